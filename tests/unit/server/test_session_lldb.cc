// Session, LLDB-only packets: qThreadStopInfo, jThreadsInfo, qMemoryRegionInfo,
// qWatchpointSupportInfo, qRegisterInfo; and monitor stepbranch's console reply.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::StopKind;
using fake::FakeProcess;
using fake::SessionHarness;
using fake::hex_le;
using Packets = std::vector<std::string>;

namespace {

struct LldbSetup {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65});
  LldbSetup() {
    p.add_thread(0x64, "prog", -1);
    p.add_thread(0x65, "worker", 1);
    p.set_reg(0x64, 16, 0x400000);
    p.set_reg(0x65, 16, 0x401000);
    p.set_reg(0x65, 17, 0x246);
    h.lldb_handshake();
    p.stop_with(fake::stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP));
    REQUIRE(h.round_trip("vCont;c:p64.-1").size() == 1);
  }
  // rax..eflags as "NN:hex;" (stop replies) or "\"N\":\"hex\"" (JSON), by hand.
  std::string regs(pid_t tid, bool json) {
    std::string out;
    for (int r = 0; r <= 17; ++r) {
      std::string value = hex_le(p.regs(tid).get_u64(p.register_layout(), r), r == 17 ? 4 : 8);
      if (json) out += fmt::format("{}\"{}\":\"{}\"", r ? "," : "", r, value);
      else out += fmt::format("{:02x}:{};", r, value);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("lldb: qThreadStopInfo: the event for the event thread, signal 0 for the others") {
  LldbSetup l;
  const std::string threads = "threads:64,65;thread-pcs:400000,401000;";
  CHECK(l.h.request("qThreadStopInfo65") ==
        "T05" + l.regs(0x65, false) + "thread:p64.65;core:1;name:worker;" + threads + "reason:breakpoint;");
  CHECK(l.h.request("qThreadStopInfo64") ==
        "T00" + l.regs(0x64, false) + "thread:p64.64;name:prog;" + threads + "reason:signal;");
  CHECK(l.h.request("qThreadStopInfo99") == "E03");
  CHECK(l.h.request("qThreadStopInfozz") == "E16");
}

TEST_CASE("lldb: jThreadsInfo: JSON of every thread, binary-escaped") {
  LldbSetup l;
  std::string reply = l.h.request("jThreadsInfo");
  std::string json = fake::unescape(reply);
  CHECK(json == "[{\"tid\":100,\"name\":\"prog\",\"registers\":{" + l.regs(0x64, true) +
                    "}},{\"tid\":101,\"name\":\"worker\",\"reason\":\"breakpoint\",\"signal\":5,\"registers\":{" +
                    l.regs(0x65, true) + "}}]");
  CHECK(reply.size() == json.size() + 4);  // the JSON's four '}' went out as "}]"
}

TEST_CASE("lldb: qMemoryRegionInfo: the mapping, or the hole up to the next one") {
  LldbSetup l;
  l.p.map_result = std::vector<backend::MemoryRegion>{
      {0x400000, 0x401000, true, false, true, "/bin/prog", 0},
      {0x7ffff000, 0x80000000, true, true, false, "[stack]", 0},
  };
  CHECK(l.h.request("qMemoryRegionInfo:400800") == "start:400000;size:1000;permissions:rx;name:2f62696e2f70726f67;");
  CHECK(l.h.request("qMemoryRegionInfo:7ffff000") == "start:7ffff000;size:1000;permissions:rw;name:5b737461636b5d;");
  CHECK(l.h.request("qMemoryRegionInfo:500000") == "start:500000;size:7faff000;");
  CHECK(l.h.request("qMemoryRegionInfo:80000000") == "start:80000000;size:ffffffff7fffffff;");
  CHECK(l.h.request("qMemoryRegionInfo:zz") == "E16");
  l.p.map_result = backend::Error{EACCES, "no maps"};
  CHECK(l.h.request("qMemoryRegionInfo:400800") == "E0d");
}

TEST_CASE("lldb: qWatchpointSupportInfo and qRegisterInfo") {
  LldbSetup l;
  CHECK(l.h.request("qWatchpointSupportInfo:") == "num:4;");
  l.p.slots = 2;
  CHECK(l.h.request("qWatchpointSupportInfo") == "num:2;");
  CHECK(l.h.request("qRegisterInfo0") == "");  // registers come from target.xml
}

TEST_CASE("monitor stepbranch: console output of the branch, then OK, when the thread stops") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  auto sb = fake::stop_event(StopKind::StepBranch, 0x64, 0x64, SIGTRAP);
  sb.branch_from = 0x401000;
  sb.branch_to = 0x401020;
  p.stop_with(sb);
  auto replies = h.round_trip("qRcmd," + fake::hex("stepbranch 2"));
  CHECK(replies ==
        Packets{"O" + fake::hex("branch 0x401000 <0x401000> -> 0x401020 <0x401020>\n"
                                "Note: run 'maint flush register-cache' so GDB sees the new registers.\n"),
                "OK"});
  CHECK(p.step_branches == std::vector<std::pair<pid_t, uint32_t>>{{0x64, 2}});

  p.stop_with(fake::exit_event(0x64, 3));
  CHECK(h.round_trip("qRcmd," + fake::hex("stepbranch")) ==
        Packets{"O" + fake::hex("The program exited with code 3.\n"), "OK"});
}

TEST_CASE("monitor btrace: start, status, history through the fake tracer") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  auto monitor = [&](std::string_view command) { return h.round_trip("qRcmd," + fake::hex(command)); };
  CHECK(monitor("btrace history") ==
        Packets{"O" + fake::hex("Thread 100 is not being recorded: use 'monitor btrace start'.\n"), "OK"});
  CHECK(monitor("btrace start") == Packets{"O" + fake::hex("Recording branches of thread 100 (fake source).\n"), "OK"});
  CHECK(monitor("btrace start") == Packets{"O" + fake::hex("Thread 100 is already being recorded.\n"), "OK"});
  CHECK(monitor("btrace status") ==
        Packets{"O" + fake::hex("Branch-trace source: fake (chosen: auto).\nThread 100: recording, buffer 65536 bytes.\n"),
                "OK"});
  p.fake_tracer.branches[0x64] = {{0x401000, 0x401100}, {0x401105, 0x401200}, {0x401210, 0x401000}};
  CHECK(monitor("btrace history 2") ==
        Packets{"O" + fake::hex("branch 0x401105 <0x401105> -> 0x401200 <0x401200>\n"
                                "branch 0x401210 <0x401210> -> 0x401000 <0x401000>\n"),
                "OK"});
  CHECK(monitor("btrace stop") == Packets{"O" + fake::hex("Stopped recording thread 100.\n"), "OK"});
}
