// Session, tracepoints: the packets GDB 13 sends for trace/actions/tstart/tstatus/tstop/tfind/
// tsave reach the server's experiment and come back with gdbserver's replies. The fake process
// collects nothing itself: frames are made by handing hits to the experiment directly, with a
// register block in the fake's layout.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "backend/trace/trace_experiment.h"
#include "tests/unit/server/session_harness.h"

using fake::FakeProcess;
using fake::SessionHarness;

namespace {

constexpr std::string_view kMask = "R08000080000000000000";  // as GDB 13 sends `collect $regs`

// What GDB's tstart sends before QTStart for `trace *0x401000` with `collect $regs, gvar` and
// `while-stepping 2` / `collect $regs, gvar2`, plus `trace *0x402000 if 1` disabled.
void download(SessionHarness& h) {
  CHECK(h.request("QTinit") == "OK");
  CHECK(h.request("QTDP:1:0000000000401000:E:2:0-") == "OK");
  CHECK(h.request("QTDP:-1:0000000000401000:" + std::string(kMask) + "-") == "OK");
  CHECK(h.request("QTDP:-1:0000000000401000:M-1,601040,4-") == "OK");
  CHECK(h.request("QTDP:-1:0000000000401000:S" + std::string(kMask) + "-") == "OK");
  CHECK(h.request("QTDP:-1:0000000000401000:M-1,601050,8") == "OK");
  CHECK(h.request("QTDPsrc:1:401000:at:0:9:2a30783430313030") == "OK");
  CHECK(h.request("QTDP:2:0000000000402000:D:a:3:X3,220127") == "OK");
  CHECK(h.request("QTDV:1:0000000000000000:1:74726163655f74696d657374616d70") == "OK");
  CHECK(h.request("QTro:400000,402000") == "OK");
  CHECK(h.request("QTDisconnected:0") == "OK");
  CHECK(h.request("QTBuffer:circular:0") == "OK");
  CHECK(h.request("QTBuffer:size:-1") == "OK");
  CHECK(h.request("QTNotes:user:;notes:;") == "OK");
}

// The stopped thread a hit sees: rip and rax in the fake's layout, two globals.
struct Site {
  std::vector<uint8_t> block;
  std::map<uint64_t, std::vector<uint8_t>> memory{{0x601040, {0x2a, 0, 0, 0}}, {0x601050, {1, 2, 3, 4, 5, 6, 7, 8}}};
  Site(const backend::RegisterLayout& layout, uint64_t rip) : block(layout.total_bytes) {
    auto at = [&](int regno, uint64_t v) {
      for (size_t i = 0; i < 8; ++i) block[layout.regs[regno].offset + i] = static_cast<uint8_t>(v >> (8 * i));
    };
    at(0, 0x1122334455667788);
    at(backend::RegisterLayout::kRip, rip);
  }
  backend::trace::HitSite site() {
    backend::trace::HitSite s;
    s.register_block = [this]() -> std::optional<std::vector<uint8_t>> { return block; };
    s.reg = [](int) -> std::optional<uint64_t> { return std::nullopt; };
    s.read = [this](uint64_t addr, std::span<uint8_t> out) {
      auto it = memory.find(addr);
      if (it == memory.end() || out.size() > it->second.size()) return false;
      std::memcpy(out.data(), it->second.data(), out.size());
      return true;
    };
    s.now_usec = 0x1234;
    return s;
  }
};

backend::trace::TraceExperiment& setup_layout(SessionHarness& h, FakeProcess& p) {
  auto& e = h.server().trace_experiment();
  // What the Linux process does when it is given the experiment.
  e.set_register_block_size(p.register_layout().total_bytes);
  e.set_pc_offset(p.register_layout().regs[backend::RegisterLayout::kRip].offset);
  return e;
}

}  // namespace

TEST_CASE("tracepoints: QTinit, QTDP, QTStart, qTStatus, QTStop round trip", "[session][tracepoints]") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request("qTStatus") ==
        "T0;tnotrun:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;circular:0;disconn:0;"
        "starttime:0;stoptime:0;username:;notes::");
  download(h);
  CHECK(h.request("qTStatus") ==
        "T0;tnotrun:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;circular:0;disconn:0;"
        "starttime:0;stoptime:0;username:;notes::");
  CHECK(h.request("qTP:1:401000") == "V0:0");
  CHECK(h.request("qTP:3:401000") == "");  // no such tracepoint
  CHECK(h.request("QTStart") == "OK");
  std::string running = h.request("qTStatus");
  INFO(running);
  CHECK(std::regex_match(running, std::regex("T1;tunknown:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;"
                                             "circular:0;disconn:0;starttime:[0-9a-f]+;stoptime:0;"
                                             "username:;notes::")));
  CHECK(running.find("starttime:0;") == std::string::npos);
  CHECK(h.request("QTBuffer:size:1000") == "E.Cannot change the buffer size while tracing.");
  CHECK(h.request("QTStop") == "OK");
  CHECK(h.request("QTNotes:tstop:6265636175736520492063616e;") == "OK");
  std::string stopped = h.request("qTStatus");
  INFO(stopped);
  CHECK(std::regex_match(stopped, std::regex("T0;tstop:6265636175736520492063616e:0;tframes:0;tcreated:0;"
                                             "tfree:500000;tsize:500000;circular:0;disconn:0;"
                                             "starttime:[0-9a-f]+;stoptime:[0-9a-f]+;username:;notes::")));
  // the settings come back in the status
  CHECK(h.request("QTBuffer:size:1000") == "OK");
  CHECK(h.request("QTBuffer:circular:1") == "OK");
  CHECK(h.request("QTDisconnected:1") == "OK");
  CHECK(h.request("QTNotes:user:626f62;notes:6869;") == "OK");
  CHECK(h.request("qTStatus").find(";tfree:1000;tsize:1000;circular:1;disconn:1;") != std::string::npos);
  CHECK(h.request("qTStatus").find(";username:626f62;notes:6869:") != std::string::npos);
  // enable / disable need the tracepoint
  CHECK(h.request("QTEnable:2:0000000000402000") == "OK");
  CHECK(h.request("QTDisable:2:0000000000402000") == "OK");
  CHECK(h.request("QTEnable:7:0000000000402000").rfind("E", 0) == 0);
  CHECK(h.request("QTDP:-7:0000000000401000:R1").rfind("E", 0) == 0);
  CHECK(h.request("QTDPsrc:7:401000:at:0:1:78").rfind("E", 0) == 0);
  // a malformed packet is an error, not a crash
  CHECK(h.request("QTDP:-1:0000000000401000:X8,22000b0d000427").rfind("E", 0) == 0);
}

TEST_CASE("tracepoints: QTStart without a process", "[session][tracepoints]") {
  SessionHarness h;
  CHECK(h.request("QTinit") == "OK");
  CHECK(h.request("QTStart") == "E.No process.");
  CHECK(h.request("qTStatus").rfind("T0;tnotrun:0;", 0) == 0);
}

TEST_CASE("tracepoints: qTfP and qTsP upload the definitions in order, then l", "[session][tracepoints]") {
  SessionHarness h;
  h.add_process(0x64);
  download(h);
  std::vector<std::string> lines{h.request("qTfP")};
  for (int i = 0; i < 20 && lines.back() != "l"; ++i) lines.push_back(h.request("qTsP"));
  CHECK(lines == std::vector<std::string>{
                     "T1:401000:E:2:0",
                     "A1:401000:" + std::string(kMask),
                     "A1:401000:M-1,601040,4",
                     "S1:401000:" + std::string(kMask),
                     "S1:401000:M-1,601050,8",  // after GDB's first 'S' packet: still stepping
                     "Z1:401000:at:0:9:2a30783430313030",
                     "T2:402000:D:a:3:X3,220127",
                     "l",
                 });
  CHECK(h.request("qTsP") == "l");
  // qTfP starts over
  CHECK(h.request("qTfP") == "T1:401000:E:2:0");
  // QTinit forgets them
  CHECK(h.request("QTinit") == "OK");
  CHECK(h.request("qTfP") == "l");
}

TEST_CASE("tracepoints: qTfV lists trace_timestamp, then l", "[session][tracepoints]") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request("qTfV") == "1:0:1:74726163655f74696d657374616d70");
  CHECK(h.request("qTsV") == "l");
  CHECK(h.request("QTDV:2:fffffffffffffffb:0:636f756e74") == "OK");
  CHECK(h.request("qTfV") == "2:fffffffffffffffb:0:636f756e74");  // newest first, as gdbserver
  CHECK(h.request("qTsV") == "1:0:1:74726163655f74696d657374616d70");
  CHECK(h.request("qTsV") == "l");
  CHECK(h.request("QTinit") == "OK");
  CHECK(h.request("qTfV") == "1:0:1:74726163655f74696d657374616d70");
  CHECK(h.request("qTsV") == "l");
}

TEST_CASE("tracepoints: QTFrame with no frames answers F-1", "[session][tracepoints]") {
  SessionHarness h;
  h.add_process(0x64);
  download(h);
  CHECK(h.request("QTFrame:0") == "F-1");
  CHECK(h.request("QTFrame:pc:401000") == "F-1");
  CHECK(h.request("QTFrame:tdp:1") == "F-1");
  CHECK(h.request("QTFrame:range:400000:500000") == "F-1");
  CHECK(h.request("QTFrame:outside:400000:500000") == "F-1");
  CHECK(h.request("QTFrame:ffffffff") == "OK");
  CHECK(h.request("qTBuffer:0,7d0") == "l");
  CHECK(h.request("qTV:1") == "U");  // never run
}

TEST_CASE("tracepoints: frames collected at hits read back through tfind", "[session][tracepoints]") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  p.map_memory(0x401000, {0x55, 0x48, 0x89, 0xe5});  // read-only code (QTro)
  p.map_memory(0x601040, {0x99, 0x99, 0x99, 0x99});  // the live value, not the collected one
  auto& e = setup_layout(h, p);
  download(h);
  CHECK(h.request("QTDV:2:000000000000000a:0:636f756e74") == "OK");
  // collect $count after `$count += 1` (getv 2; const8 1; add; setv 2; pop; tracev 2; end)
  CHECK(h.request("QTDP:-2:0000000000402000:X0000000e,2c00022201022d0002292e000227") == "OK");
  CHECK(h.request("QTEnable:2:0000000000402000") == "OK");
  CHECK(h.request("QTStart") == "OK");

  const auto& layout = p.register_layout();
  Site at1(layout, 0x401000), at2(layout, 0x402000);
  const std::vector<uint8_t> hit_block = at1.block;
  auto out = e.hit(0x401000, at1.site());
  CHECK(out.steps == 2u);  // while-stepping 2: the process steps, calling step() after each
  CHECK(out.step_tracepoint == 1u);
  at1.block[layout.regs[backend::RegisterLayout::kRip].offset] = 0x04;  // a step later: rip 0x401004
  CHECK(e.step(1, 0x401000, at1.site()));
  CHECK(e.hit(0x402000, at2.site()).collected);
  CHECK(h.request("qTV:2") == "Vb");  // live while running
  CHECK(h.request("QTStop") == "OK");
  CHECK(h.request("qTStatus").rfind("T0;tstop::0;tframes:3;tcreated:3;", 0) == 0);

  size_t block = layout.total_bytes;
  // usage: the hit's R and M blocks, and the step's R and M blocks (no frame headers)
  CHECK(h.request("qTP:1:401000") == fmt::format("V1:{:x}", (1 + block) + (11 + 4) + (1 + block) + (11 + 8)));
  CHECK(h.request("qTP:2:402000") == "V1:d");

  // frame 0: tracepoint 1's hit
  CHECK(h.request("QTFrame:0") == "F0T1");
  CHECK(h.request("g") == fake::hex(std::string_view(reinterpret_cast<const char*>(hit_block.data()), hit_block.size())));
  CHECK(h.request("p10") == fake::hex_le(0x401000, 8));
  CHECK(h.request("m601040,4") == "2a000000");
  CHECK(h.request("m601041,8") == "000000");              // short: up to the collected block's end
  CHECK(h.request("m401000,4") == "554889e5");          // read-only: from the program
  CHECK(h.request("m601000,4").rfind("E", 0) == 0);     // not collected
  CHECK(h.request("M601040,1:00").rfind("E", 0) == 0);  // frames are read-only
  CHECK(h.request("qXfer:traceframe-info:read::0,fff") ==
        "l<traceframe-info>\n<memory start=\"0x601040\" length=\"0x4\"/>\n</traceframe-info>\n");
  CHECK(h.request("qTV:2") == "U");  // not in this frame

  // frame 1: the while-stepping step (its own pc); frame 2: tracepoint 2 (no registers)
  CHECK(h.request("QTFrame:pc:401004") == "F1T1");
  CHECK(h.request("p10") == fake::hex_le(0x401004, 8));
  CHECK(h.request("QTFrame:tdp:2") == "F2T2");
  std::string g = h.request("g");
  REQUIRE(g.size() == 2 * block);
  size_t rip = layout.regs[backend::RegisterLayout::kRip].offset;
  CHECK(g.substr(2 * rip, 16) == fake::hex_le(0x402000, 8));  // only the pc is known
  CHECK(g.substr(0, 16) == std::string(16, 'x'));
  CHECK(h.request("qTV:2") == "Vb");
  CHECK(h.request("QTFrame:tdp:2") == "F-1");  // none after it
  CHECK(h.request("QTFrame:range:401000:401004") == "F-1");
  CHECK(h.request("QTFrame:0") == "F0T1");
  CHECK(h.request("QTFrame:range:401001:401fff") == "F1T1");
  CHECK(h.request("QTFrame:outside:401000:401fff") == "F2T2");

  // tsave: the raw buffer in chunks, then l
  std::string raw;
  for (uint64_t off = 0;; off += 0x7d0) {
    std::string chunk = h.request(fmt::format("qTBuffer:{:x},7d0", off));
    if (chunk == "l") break;
    REQUIRE(chunk.rfind("E", 0) != 0);
    raw += chunk;
  }
  auto expected = e.buffer().raw(0, e.buffer().used());
  CHECK(raw == fake::hex(std::string_view(reinterpret_cast<const char*>(expected.data()), expected.size())));
  CHECK(raw.substr(0, 4) == "0100");  // tracepoint 1, little-endian

  // back to the live program
  CHECK(h.request("QTFrame:ffffffff") == "OK");
  CHECK(h.request("m601040,4") == "99999999");
  CHECK(h.request("qXfer:traceframe-info:read::0,fff").rfind("E", 0) == 0);
}

TEST_CASE("tracepoints: qTStatus is empty when tracepoints are not a capability", "[session][tracepoints]") {
  auto options = SessionHarness::default_options();
  options.replay_dir = "/nonexistent/trace";  // a replay cannot collect at int3s
  SessionHarness h(options);
  std::string features = h.request(SessionHarness::kGdbOffer);
  CHECK(features.find("ConditionalTracepoints+") == std::string::npos);
  CHECK(features.find("TraceStateVariables+") == std::string::npos);
  CHECK(h.request("qTStatus") == "");
  CHECK(h.request("QTinit") == "");
  CHECK(h.request("qTfV") == "");

  SessionHarness live;
  std::string live_features = live.request(SessionHarness::kGdbOffer);
  CHECK(live_features.find("ConditionalTracepoints+") != std::string::npos);
  CHECK(live_features.find("InstallInTrace+") != std::string::npos);
  CHECK(live_features.find("qXfer:traceframe-info:read+") != std::string::npos);
}
