// Parsing the tracepoint packets (protocol/packets/tracepoints.h): the packets GDB 13 sends for
// `trace`, `actions`, `tstart`, `tstop`, `tstatus`, `tfind`, `tsave` and friends (remote.c's
// download_tracepoint, download_trace_state_variable, trace_find...), and malformed forms.
#include <catch2/catch.hpp>

#include "protocol/hex.h"
#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

namespace {
std::vector<uint8_t> bytes(std::string_view hex) { return from_hex(hex).value(); }
using Kind = TraceActionSpec::Kind;
}  // namespace

TEST_CASE("tracepoints: QTinit, QTStart, QTStop, qTStatus take no arguments", "[packets][tracepoints]") {
  as<TraceInit>("QTinit");
  as<TraceStart>("QTStart");
  as<TraceStop>("QTStop");
  as<TraceStatusQuery>("qTStatus");
  // Exact names: anything after them is another packet.
  CHECK_FALSE(std::holds_alternative<TraceInit>(parse_request("QTinitx")));
  CHECK_FALSE(std::holds_alternative<TraceStart>(parse_request("QTStart:1")));
  CHECK_FALSE(std::holds_alternative<TraceStatusQuery>(parse_request("qTStatusx")));
}

TEST_CASE("tracepoints: QTDP definitions", "[packets][tracepoints]") {
  // trace foo (with actions following)
  auto d = as<TraceDefine>("QTDP:2:0000555555555147:E:0:0-");
  CHECK(d.number == 2u);
  CHECK(d.addr == 0x555555555147u);
  CHECK(d.enabled);
  CHECK(d.step_count == 0u);
  CHECK(d.pass_count == 0u);
  CHECK_FALSE(d.fast_size);
  CHECK_FALSE(d.is_static);
  CHECK(d.condition.empty());
  CHECK(d.more);

  // disabled, while-stepping 10, passcount 3, no actions
  auto dis = as<TraceDefine>("QTDP:1:0000555555555140:D:a:3");
  CHECK(dis.number == 1u);
  CHECK(dis.addr == 0x555555555140u);
  CHECK_FALSE(dis.enabled);
  CHECK(dis.step_count == 10u);
  CHECK(dis.pass_count == 3u);
  CHECK_FALSE(dis.more);

  // trace foo if x == 5 (condition on the target: `reg 5; const8 5; equal; end`)
  auto c = as<TraceDefine>("QTDP:1:0000000000401136:E:0:0:X7,26000522051327-");
  CHECK(c.condition == bytes("26000522051327"));
  CHECK(c.more);
  // GDB 13 writes condition lengths in plain hex; a zero-padded one reads the same
  auto c2 = as<TraceDefine>("QTDP:4:0000000000401136:E:0:0:X00000007,26000522051327");
  CHECK(c2.number == 4u);
  CHECK(c2.condition == bytes("26000522051327"));
  CHECK_FALSE(c2.more);

  // ftrace: F<size>; strace: S
  auto f = as<TraceDefine>("QTDP:3:0000555555555147:E:0:0:F5");
  REQUIRE(f.fast_size);
  CHECK(*f.fast_size == 5u);
  CHECK_FALSE(f.is_static);
  auto s = as<TraceDefine>("QTDP:3:0000555555555147:E:0:0:S-");
  CHECK(s.is_static);
  CHECK(s.more);
  auto fc = as<TraceDefine>("QTDP:3:0000555555555147:E:0:0:F5:X2,2227");
  REQUIRE(fc.fast_size);
  CHECK(fc.condition == bytes("2227"));

  // large numbers: a 64-bit step count and a 32-bit tracepoint number
  auto big = as<TraceDefine>("QTDP:ffffffff:ffffffffffffffff:E:ffffffffffffffff:1");
  CHECK(big.number == 0xffffffffu);
  CHECK(big.addr == 0xffffffffffffffffu);
  CHECK(big.step_count == 0xffffffffffffffffu);
  CHECK(big.pass_count == 1u);
}

TEST_CASE("tracepoints: QTDP actions R, M, X", "[packets][tracepoints]") {
  // collect $regs
  auto r = as<TraceDefineActions>("QTDP:-2:0000555555555147:R08000080000000000000");
  CHECK(r.number == 2u);
  CHECK(r.addr == 0x555555555147u);
  CHECK_FALSE(r.more);
  REQUIRE(r.actions.size() == 1);
  CHECK(r.actions[0].kind == Kind::Registers);
  CHECK_FALSE(r.actions[0].stepping);
  CHECK(r.actions[0].mask == bytes("08000080000000000000"));
  CHECK(r.actions[0].text == "R08000080000000000000");
  // an odd number of mask digits is read as if it had a leading 0
  auto odd = as<TraceDefineActions>("QTDP:-2:0000555555555147:R1ff-");
  REQUIRE(odd.actions.size() == 1);
  CHECK(odd.actions[0].mask == std::vector<uint8_t>{0x01, 0xff});
  CHECK(odd.actions[0].text == "R1ff");
  CHECK(odd.more);

  // collect gvar (absolute)
  auto m = as<TraceDefineActions>("QTDP:-1:0000555555555140:M-1,555555558010,4");
  REQUIRE(m.actions.size() == 1);
  CHECK(m.actions[0].kind == Kind::Memory);
  CHECK(m.actions[0].basereg == -1);
  CHECK(m.actions[0].offset == 0x555555558010u);
  CHECK(m.actions[0].len == 4u);
  CHECK(m.actions[0].text == "M-1,555555558010,4");
  // register-relative, uppercase length as GDB writes it
  auto mr = as<TraceDefineActions>("QTDP:-1:0000555555555140:M6,FFFFFFFFFFFFFFEC,1C");
  REQUIRE(mr.actions.size() == 1);
  CHECK(mr.actions[0].basereg == 6);
  CHECK(mr.actions[0].offset == 0xffffffffffffffecu);
  CHECK(mr.actions[0].len == 0x1cu);

  // collect *p: reg 7; trace_quick 8; end (GDB writes X%08X)
  auto x = as<TraceDefineActions>("QTDP:-1:0000555555555140:X00000006,2600070d0827");
  REQUIRE(x.actions.size() == 1);
  CHECK(x.actions[0].kind == Kind::Expression);
  CHECK(x.actions[0].bytecode == bytes("2600070d0827"));
  CHECK(x.actions[0].text == "X00000006,2600070d0827");
  auto x7 = as<TraceDefineActions>("QTDP:-1:0000555555555140:X7,22000b0d000427-");
  REQUIRE(x7.actions.size() == 1);
  CHECK(x7.actions[0].bytecode == bytes("22000b0d000427"));
  CHECK(x7.more);

  // several M/X actions concatenated in one packet, each with its own text
  auto many = as<TraceDefineActions>("QTDP:-1:0000555555555140:M-1,555555558010,4M-1,555555558020,8X2,2227-");
  REQUIRE(many.actions.size() == 3);
  CHECK(many.actions[0].text == "M-1,555555558010,4");
  CHECK(many.actions[1].text == "M-1,555555558020,8");
  CHECK(many.actions[1].offset == 0x555555558020u);
  CHECK(many.actions[1].len == 8u);
  CHECK(many.actions[2].text == "X2,2227");
  CHECK(many.actions[2].bytecode == bytes("2227"));
  CHECK(many.more);
}

TEST_CASE("tracepoints: QTDP while-stepping actions", "[packets][tracepoints]") {
  // GDB puts 'S' before the first while-stepping action string
  auto s = as<TraceDefineActions>("QTDP:-1:0000555555555140:SR08000080000000000000-");
  REQUIRE(s.actions.size() == 1);
  CHECK(s.actions[0].stepping);
  CHECK(s.actions[0].kind == Kind::Registers);
  CHECK(s.actions[0].text == "R08000080000000000000");  // without the S
  CHECK(s.more);
  // everything after the S is stepping
  auto sm = as<TraceDefineActions>("QTDP:-1:0000555555555140:SM-1,555555558010,4X2,2227");
  REQUIRE(sm.actions.size() == 2);
  CHECK(sm.actions[0].stepping);
  CHECK(sm.actions[1].stepping);
  CHECK(sm.actions[0].text == "M-1,555555558010,4");
  // an S after ordinary actions switches the rest
  auto mixed = as<TraceDefineActions>("QTDP:-1:0000555555555140:M-1,10,4SM-1,20,4");
  REQUIRE(mixed.actions.size() == 2);
  CHECK_FALSE(mixed.actions[0].stepping);
  CHECK(mixed.actions[1].stepping);
  // a bare S parses (no actions)
  auto bare = as<TraceDefineActions>("QTDP:-1:0000555555555140:S-");
  CHECK(bare.actions.empty());
  CHECK(bare.more);
}

TEST_CASE("tracepoints: QTDP malformed forms", "[packets][tracepoints]") {
  CHECK(malformed("QTDP:"));
  CHECK(malformed("QTDP:2"));
  CHECK(malformed("QTDP:2:"));
  CHECK(malformed("QTDP:2:0000555555555147"));
  CHECK(malformed("QTDP:2:0000555555555147:"));
  CHECK(malformed("QTDP:2:0000555555555147:Q:0:0"));     // neither E nor D
  CHECK(malformed("QTDP:2:0000555555555147:E"));
  CHECK(malformed("QTDP:2:0000555555555147:E:"));
  CHECK(malformed("QTDP:2:0000555555555147:E:0"));
  CHECK(malformed("QTDP:2:0000555555555147:E:0:"));      // truncated pass count
  CHECK(malformed("QTDP:2:0000555555555147:E:zz:0"));
  CHECK(malformed("QTDP:zz:0000555555555147:E:0:0"));
  CHECK(malformed("QTDP:2:wxyz:E:0:0"));
  CHECK(malformed("QTDP:100000000:0:E:0:0"));            // tracepoint numbers are 32-bit
  CHECK(malformed("QTDP:2:11112222333344445:E:0:0"));     // address over 64 bits
  CHECK(malformed("QTDP:2:0:E:0:0:"));                   // empty option
  CHECK(malformed("QTDP:2:0:E:0:0:Q"));                  // unknown option
  CHECK(malformed("QTDP:2:0:E:0:0:F"));                  // F without a size
  CHECK(malformed("QTDP:2:0:E:0:0:X7,2600"));            // condition shorter than its length
  CHECK(malformed("QTDP:2:0:E:0:0:X2,zz27"));            // bad hex
  CHECK(malformed("QTDP:2:0:E:0:0:X2"));                 // no comma
  CHECK(malformed("QTDP:2:0:E:0:0junk"));

  CHECK(malformed("QTDP:-"));
  CHECK(malformed("QTDP:-2"));
  CHECK(malformed("QTDP:-2:0000555555555147"));           // no ':' before the actions
  CHECK(malformed("QTDP:-2:zz:R1"));
  CHECK(malformed("QTDP:-2:0:R"));                        // R without a mask
  CHECK(malformed("QTDP:-2:0:Rxy"));
  CHECK(malformed("QTDP:-2:0:M"));
  CHECK(malformed("QTDP:-2:0:M-1"));
  CHECK(malformed("QTDP:-2:0:M-1,"));
  CHECK(malformed("QTDP:-2:0:M-1,10"));
  CHECK(malformed("QTDP:-2:0:M-1,10,"));                  // truncated length
  CHECK(malformed("QTDP:-2:0:M-1,zz,4"));
  CHECK(malformed("QTDP:-2:0:M10000,0,4"));               // base register over 16 bits
  CHECK(malformed("QTDP:-2:0:X8,22000b0d000427"));        // length runs past the end
  CHECK(malformed("QTDP:-2:0:X8,22000b0d000427-"));
  CHECK(malformed("QTDP:-2:0:X7,22000b0d0004zz"));        // bad hex
  CHECK(malformed("QTDP:-2:0:X,"));
  CHECK(malformed("QTDP:-2:0:Xffffffffffffffff,00"));     // a huge length
  CHECK(malformed("QTDP:-2:0:Q"));                        // unknown action letters
  CHECK(malformed("QTDP:-2:0:R1Z"));
  CHECK(malformed("QTDP:-2:0:M-1,10,4;R1"));
}

TEST_CASE("tracepoints: QTDPsrc", "[packets][tracepoints]") {
  auto at = as<TraceDefineSource>("QTDPsrc:2:555555555147:at:0:7:74726163656d65");
  CHECK(at.number == 2u);
  CHECK(at.addr == 0x555555555147u);
  CHECK(at.raw == "at:0:7:74726163656d65");
  auto cmd = as<TraceDefineSource>("QTDPsrc:1:401136:cmd:0:10:7768696c652d7374657070696e672032");
  CHECK(cmd.raw == "cmd:0:10:7768696c652d7374657070696e672032");
  auto cond = as<TraceDefineSource>("QTDPsrc:1:401136:cond:0:6:78203d3d2035");
  CHECK(cond.raw == "cond:0:6:78203d3d2035");
  as<TraceDefineSource>("QTDPsrc:1:0:at:0:0:");  // the qSupported probe: an empty text

  CHECK(malformed("QTDPsrc:"));
  CHECK(malformed("QTDPsrc:2:555555555147"));
  CHECK(malformed("QTDPsrc:2:555555555147:at:0:7"));
  CHECK(malformed("QTDPsrc:2:555555555147::0:7:74"));
  CHECK(malformed("QTDPsrc:2:555555555147:at:zz:7:74"));
  CHECK(malformed("QTDPsrc:2:555555555147:at:0:zz:74"));
  CHECK(malformed("QTDPsrc:2:555555555147:at:0:7:7g"));
  CHECK(malformed("QTDPsrc:2:555555555147:at:0:7:747"));  // odd hex
  CHECK(malformed("QTDPsrc:x:555555555147:at:0:7:74"));
}

TEST_CASE("tracepoints: QTDV", "[packets][tracepoints]") {
  auto ts = as<TraceDefineVariable>("QTDV:1:0000000000000000:1:74726163655f74696d657374616d70");
  CHECK(ts.number == 1u);
  CHECK(ts.initial == 0);
  CHECK(ts.builtin);
  CHECK(ts.name == "trace_timestamp");
  auto v = as<TraceDefineVariable>("QTDV:2:fffffffffffffffb:0:636f756e74");
  CHECK(v.number == 2u);
  CHECK(v.initial == -5);
  CHECK_FALSE(v.builtin);
  CHECK(v.name == "count");
  auto pos = as<TraceDefineVariable>("QTDV:3:000000000000002a:0:78");
  CHECK(pos.initial == 42);

  CHECK(malformed("QTDV:"));
  CHECK(malformed("QTDV:2:0:0"));
  CHECK(malformed("QTDV:2:0:0:78:79"));
  CHECK(malformed("QTDV:zz:0:0:78"));
  CHECK(malformed("QTDV:2:zz:0:78"));
  CHECK(malformed("QTDV:2:0:zz:78"));
  CHECK(malformed("QTDV:2:0:0:7"));
  CHECK(malformed("QTDV:2:0:0:zz"));
  CHECK(malformed("QTDV:100000000:0:0:78"));
  CHECK(malformed("QTDV:2:11112222333344445:0:78"));
}

TEST_CASE("tracepoints: QTro", "[packets][tracepoints]") {
  auto r = as<TraceReadOnlyRegions>("QTro:318,334:338,358");
  REQUIRE(r.ranges.size() == 2);
  CHECK(r.ranges[0] == std::pair<uint64_t, uint64_t>{0x318, 0x334});
  CHECK(r.ranges[1] == std::pair<uint64_t, uint64_t>{0x338, 0x358});
  auto one = as<TraceReadOnlyRegions>("QTro:555555554000,555555555000");
  REQUIRE(one.ranges.size() == 1);
  CHECK(one.ranges[0].first == 0x555555554000u);
  CHECK(as<TraceReadOnlyRegions>("QTro").ranges.empty());
  CHECK(as<TraceReadOnlyRegions>("QTro:").ranges.empty());  // no read-only sections

  CHECK(malformed("QTro:318"));
  CHECK(malformed("QTro:318,334:"));
  CHECK(malformed("QTro:318,zz"));
  CHECK(malformed("QTrox"));
}

TEST_CASE("tracepoints: qTP, qTV, QTEnable, QTDisable", "[packets][tracepoints]") {
  auto p = as<TracepointStatusQuery>("qTP:2:555555555147");
  CHECK(p.number == 2u);
  CHECK(p.addr == 0x555555555147u);
  CHECK(malformed("qTP:2"));
  CHECK(malformed("qTP:2:"));
  CHECK(malformed("qTP:2:555555555147:"));
  CHECK(malformed("qTP:2:55555555514z"));
  CHECK(malformed("qTP:"));

  CHECK(as<TraceVariableQuery>("qTV:1").number == 1u);
  CHECK(as<TraceVariableQuery>("qTV:1f").number == 0x1fu);
  CHECK(malformed("qTV:"));
  CHECK(malformed("qTV:zz"));
  CHECK(malformed("qTV:100000000"));

  auto e = as<TraceEnable>("QTEnable:2:0000555555555147");
  CHECK(e.number == 2u);
  CHECK(e.addr == 0x555555555147u);
  CHECK(e.enable);
  auto d = as<TraceEnable>("QTDisable:2:0000555555555147");
  CHECK(d.number == 2u);
  CHECK_FALSE(d.enable);
  CHECK(malformed("QTEnable:2"));
  CHECK(malformed("QTDisable:2:"));
  CHECK(malformed("QTDisable:2:1:"));
  CHECK(malformed("QTEnable:"));
}

TEST_CASE("tracepoints: QTFrame forms", "[packets][tracepoints]") {
  auto none = as<TraceFrameSelect>("QTFrame:ffffffff");  // tfind none: GDB's %x of -1
  CHECK(none.kind == TraceFrameSelect::Kind::Number);
  CHECK(none.number == -1);
  auto n0 = as<TraceFrameSelect>("QTFrame:0");
  CHECK(n0.kind == TraceFrameSelect::Kind::Number);
  CHECK(n0.number == 0);
  CHECK(as<TraceFrameSelect>("QTFrame:1f").number == 0x1f);
  CHECK(as<TraceFrameSelect>("QTFrame:-1").number == -1);

  auto pc = as<TraceFrameSelect>("QTFrame:pc:555555555140");
  CHECK(pc.kind == TraceFrameSelect::Kind::Pc);
  CHECK(pc.a == 0x555555555140u);
  auto tdp = as<TraceFrameSelect>("QTFrame:tdp:2");
  CHECK(tdp.kind == TraceFrameSelect::Kind::Tracepoint);
  CHECK(tdp.a == 2u);
  auto range = as<TraceFrameSelect>("QTFrame:range:555555555140:555555555150");
  CHECK(range.kind == TraceFrameSelect::Kind::Range);
  CHECK(range.a == 0x555555555140u);
  CHECK(range.b == 0x555555555150u);
  auto outside = as<TraceFrameSelect>("QTFrame:outside:a:b");
  CHECK(outside.kind == TraceFrameSelect::Kind::Outside);
  CHECK(outside.a == 0xau);
  CHECK(outside.b == 0xbu);

  CHECK(malformed("QTFrame:"));
  CHECK(malformed("QTFrame:zz"));
  CHECK(malformed("QTFrame:pc:"));
  CHECK(malformed("QTFrame:pc:zz"));
  CHECK(malformed("QTFrame:tdp:"));
  CHECK(malformed("QTFrame:range:a"));
  CHECK(malformed("QTFrame:range:a:"));
  CHECK(malformed("QTFrame:range:a:b:c"));
  CHECK(malformed("QTFrame:outside:zz:b"));
  CHECK(malformed("QTFrame:outside:"));
}

TEST_CASE("tracepoints: QTBuffer, QTDisconnected, qTBuffer", "[packets][tracepoints]") {
  CHECK(as<TraceBufferCircular>("QTBuffer:circular:1").on);
  CHECK_FALSE(as<TraceBufferCircular>("QTBuffer:circular:0").on);
  CHECK_FALSE(as<TraceBufferSize>("QTBuffer:size:-1").size);
  auto size = as<TraceBufferSize>("QTBuffer:size:100000");
  REQUIRE(size.size);
  CHECK(*size.size == 0x100000u);
  CHECK(malformed("QTBuffer:"));
  CHECK(malformed("QTBuffer:circular:"));
  CHECK(malformed("QTBuffer:circular:x"));
  CHECK(malformed("QTBuffer:size:"));
  CHECK(malformed("QTBuffer:size:-2"));
  CHECK(malformed("QTBuffer:size:zz"));
  CHECK(malformed("QTBuffer:other:1"));

  CHECK(as<TraceDisconnected>("QTDisconnected:1").on);
  CHECK_FALSE(as<TraceDisconnected>("QTDisconnected:0").on);
  CHECK(malformed("QTDisconnected:"));
  CHECK(malformed("QTDisconnected:y"));

  auto rd = as<TraceBufferRead>("qTBuffer:0,1f4");
  CHECK(rd.offset == 0u);
  CHECK(rd.len == 0x1f4u);
  auto rd2 = as<TraceBufferRead>("qTBuffer:7d0,7d0");
  CHECK(rd2.offset == 0x7d0u);
  CHECK(rd2.len == 0x7d0u);
  CHECK(malformed("qTBuffer:"));
  CHECK(malformed("qTBuffer:0"));
  CHECK(malformed("qTBuffer:0,"));
  CHECK(malformed("qTBuffer:zz,1"));
}

TEST_CASE("tracepoints: QTNotes", "[packets][tracepoints]") {
  auto empty = as<TraceNotes>("QTNotes:user:;notes:;");  // what tstart always sends
  REQUIRE(empty.user);
  CHECK(empty.user->empty());
  REQUIRE(empty.notes);
  CHECK(empty.notes->empty());
  CHECK_FALSE(empty.tstop);

  auto stop = as<TraceNotes>("QTNotes:tstop:6265636175736520492063616e;");
  CHECK_FALSE(stop.user);
  CHECK_FALSE(stop.notes);
  REQUIRE(stop.tstop);
  CHECK(*stop.tstop == "because I can");

  auto both = as<TraceNotes>("QTNotes:user:626f62;notes:6869;");
  CHECK(both.user == std::optional<std::string>("bob"));
  CHECK(both.notes == std::optional<std::string>("hi"));
  // the last ';' may be missing; unknown names are ignored
  auto last = as<TraceNotes>("QTNotes:user:626f62");
  CHECK(last.user == std::optional<std::string>("bob"));
  auto other = as<TraceNotes>("QTNotes:color:626f62;user:78;");
  CHECK(other.user == std::optional<std::string>("x"));

  CHECK(malformed("QTNotes:user"));
  CHECK(malformed("QTNotes:user:7;"));
  CHECK(malformed("QTNotes:user:zz;"));
}

TEST_CASE("tracepoints: upload packets qTfP, qTsP, qTfV, qTsV", "[packets][tracepoints]") {
  CHECK(as<TraceUploadPoints>("qTfP").first);
  CHECK_FALSE(as<TraceUploadPoints>("qTsP").first);
  CHECK(as<TraceUploadVariables>("qTfV").first);
  CHECK_FALSE(as<TraceUploadVariables>("qTsV").first);
  CHECK_FALSE(std::holds_alternative<TraceUploadPoints>(parse_request("qTfPx")));
}

TEST_CASE("tracepoints: the packets need the tracepoint capability", "[packets][tracepoints]") {
  Capabilities none;
  for (std::string_view p : {"QTinit", "QTDP:2:0000555555555147:E:0:0-", "QTDP:-2:0:R1", "QTDV:1:0:1:78",
                             "QTStart", "QTStop", "qTStatus", "qTP:1:2", "qTV:1", "QTFrame:0", "qTfP", "qTsV",
                             "QTBuffer:size:-1", "QTNotes:user:;", "qTBuffer:0,10", "QTEnable:1:2", "QTro:1,2"}) {
    INFO(p);
    CHECK(std::holds_alternative<Unknown>(parse_request(p, none)));
  }
  Capabilities on;
  on.set(Capability::Tracepoints, true);
  CHECK(std::holds_alternative<TraceStatusQuery>(parse_request("qTStatus", on)));
}
