#include <catch2/catch.hpp>

#include "protocol/hex.h"
#include "protocol/packets.h"

using namespace protocol;

namespace {
template <typename T>
T as(std::string_view payload) {
  Request r = parse_request(payload);
  INFO("payload: " << payload << " index " << r.index());
  REQUIRE(std::holds_alternative<T>(r));
  return std::get<T>(r);
}
bool malformed(std::string_view payload) { return std::holds_alternative<Malformed>(parse_request(payload)); }
bool unknown(std::string_view payload) { return std::holds_alternative<Unknown>(parse_request(payload)); }
}  // namespace

TEST_CASE("thread ids", "[packets]") {
  CHECK(parse_thread_id("p1a.1b") == ThreadId{0x1a, 0x1b});
  CHECK(parse_thread_id("p1a.-1") == ThreadId{0x1a, -1});
  CHECK(parse_thread_id("p1a") == ThreadId{0x1a, -1});
  CHECK(parse_thread_id("p-1.-1") == ThreadId{-1, -1});
  CHECK(parse_thread_id("-1") == ThreadId{std::nullopt, -1});
  CHECK(parse_thread_id("0")->is_any());
  CHECK(parse_thread_id("1b") == ThreadId{std::nullopt, 0x1b});
  CHECK_FALSE(parse_thread_id(""));
  CHECK_FALSE(parse_thread_id("p"));
  CHECK_FALSE(parse_thread_id("p1."));
  CHECK_FALSE(parse_thread_id("xyz"));
  CHECK_FALSE(parse_thread_id("-2"));
  CHECK_FALSE(parse_thread_id("ffffffff"));
  CHECK(format_thread_id(0x1182, 0x1183, true) == "p1182.1183");
  CHECK(format_thread_id(0x1182, 0x1183, false) == "1183");
  CHECK(format_thread_id(1, -1, true) == "p1.-1");
}

TEST_CASE("general queries", "[packets]") {
  auto q = as<QuerySupported>(
      "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;xmlRegisters=i386");
  REQUIRE(q.features.size() == 6);
  CHECK(q.features[0] == "multiprocess+");
  CHECK(q.features[5] == "xmlRegisters=i386");
  CHECK(as<QuerySupported>("qSupported").features.empty());
  as<MustReplyEmpty>("vMustReplyEmpty");
  as<StartNoAckMode>("QStartNoAckMode");
  as<EnableExtendedMode>("!");
  as<QueryHaltReason>("?");
  as<QueryCurrentThread>("qC");
  as<ThreadInfoFirst>("qfThreadInfo");
  as<ThreadInfoNext>("qsThreadInfo");
  CHECK_FALSE(as<QueryAttached>("qAttached").pid);
  CHECK(as<QueryAttached>("qAttached:1182").pid == 0x1182);
  CHECK(malformed("qAttached:zz"));
  as<QueryOffsets>("qOffsets");
  CHECK(as<QuerySymbol>("qSymbol::").raw == ":");
  as<QueryTStatus>("qTStatus");
  CHECK(as<SetNonStop>("QNonStop:1").on);
  CHECK_FALSE(as<SetNonStop>("QNonStop:0").on);
  CHECK(as<Monitor>("qRcmd,68656c70").command == "help");
  CHECK(as<Monitor>("qRcmd,").command.empty());
  CHECK(malformed("qRcmd,6"));
  CHECK(unknown("qCRC:0,10"));
  CHECK(unknown("qTfV"));
  CHECK(unknown(""));
  CHECK(unknown("qSupportedX"));
}

TEST_CASE("H and T", "[packets]") {
  auto h = as<SetThread>("Hgp0.0");
  CHECK(h.op == 'g');
  CHECK(h.thread.pid == 0);
  CHECK(h.thread.is_any());
  auto c = as<SetThread>("Hc-1");
  CHECK(c.op == 'c');
  CHECK(c.thread.is_all());
  CHECK(as<SetThread>("Hgp1182.1183").thread.tid == 0x1183);
  CHECK(malformed("Hx1"));
  CHECK(malformed("Hg"));
  CHECK(as<ThreadAlive>("Tp1.2").thread == ThreadId{1, 2});
  CHECK(malformed("T"));
}

TEST_CASE("qGetTLSAddr", "[packets]") {
  // As GDB sends it with multiprocess (remote.c get_thread_local_address): ptid,offset,lm.
  auto t = as<GetTlsAddress>("qGetTLSAddr:p1a2b.1a2c,10,7ffff7ffe2e0");
  CHECK(t.thread == ThreadId{0x1a2b, 0x1a2c});
  CHECK(t.offset == 0x10);
  CHECK(t.lm == 0x7ffff7ffe2e0);
  // Without multiprocess; lm 0 is a static program.
  auto s = as<GetTlsAddress>("qGetTLSAddr:1a2c,fffffffffffffffc,0");
  CHECK(s.thread == ThreadId{std::nullopt, 0x1a2c});
  CHECK(s.offset == 0xfffffffffffffffc);
  CHECK(s.lm == 0);
  CHECK(malformed("qGetTLSAddr:"));
  CHECK(malformed("qGetTLSAddr:1a2c"));
  CHECK(malformed("qGetTLSAddr:1a2c,10"));
  CHECK(malformed("qGetTLSAddr:1a2c,10,0,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,10,"));
  CHECK(malformed("qGetTLSAddr:zz,10,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,1g,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,10000000000000000,0"));
  CHECK(unknown("qGetTLSAddr"));
  CHECK(unknown("qGetTIBAddr:1a2c"));
}

TEST_CASE("signal lists and switches", "[packets]") {
  CHECK(as<SetPassSignals>("QPassSignals:e;10;14;17;1a;97;").gdb_signals == std::vector<int>{0xe, 0x10, 0x14, 0x17, 0x1a, 0x97});
  CHECK(as<SetPassSignals>("QPassSignals:").gdb_signals.empty());
  CHECK(as<SetProgramSignals>("QProgramSignals:0;1;3;").gdb_signals == std::vector<int>{0, 1, 3});
  CHECK(malformed("QPassSignals:zz;"));
  CHECK(as<SetDisableRandomization>("QDisableRandomization:1").on);
  CHECK_FALSE(as<SetStartupWithShell>("QStartupWithShell:0").on);
  CHECK(malformed("QStartupWithShell:"));
  CHECK(as<SetEnvironment>("QEnvironmentHexEncoded:413d31").var_eq_value == "A=1");
  CHECK(as<UnsetEnvironment>("QEnvironmentUnset:41").var == "A");
  as<ResetEnvironment>("QEnvironmentReset");
  CHECK(as<SetWorkingDir>("QSetWorkingDir:").dir.empty());
  CHECK(as<SetWorkingDir>("QSetWorkingDir:2f746d70").dir == "/tmp");
  auto cs = as<SetCatchSyscalls>("QCatchSyscalls:1;27;3c");
  CHECK(cs.on);
  CHECK(cs.syscalls == std::vector<int>{0x27, 0x3c});
  CHECK(as<SetCatchSyscalls>("QCatchSyscalls:1").syscalls.empty());
  CHECK_FALSE(as<SetCatchSyscalls>("QCatchSyscalls:0").on);
  CHECK(as<SetThreadEvents>("QThreadEvents:1").on);
}

TEST_CASE("registers and memory", "[packets]") {
  CHECK_FALSE(as<ReadRegisters>("g").thread_suffix);
  CHECK(as<ReadRegisters>("g;thread:0b2a;").thread_suffix == 0xb2a);
  auto G = as<WriteRegisters>("G0011ff;thread:12;");
  CHECK(G.data == std::vector<uint8_t>{0x00, 0x11, 0xff});
  CHECK(G.thread_suffix == 0x12);
  CHECK(malformed("G001"));
  auto p = as<ReadRegister>("p10");
  CHECK(p.regno == 0x10);
  CHECK(as<ReadRegister>("p0;thread:0b2a;").thread_suffix == 0xb2a);
  CHECK(malformed("p"));
  CHECK(malformed("p0;thread:zz;"));
  auto P = as<WriteRegister>("P39=ffffffffffffffff");
  CHECK(P.regno == 0x39);
  CHECK(P.value == std::vector<uint8_t>(8, 0xff));
  CHECK(as<WriteRegister>("P10=0100000000000000;thread:7;").thread_suffix == 7);
  CHECK(malformed("P10"));

  auto m = as<ReadMemory>("m555555554040,2d8");
  CHECK(m.addr == 0x555555554040u);
  CHECK(m.length == 0x2d8u);
  CHECK_FALSE(m.binary);
  CHECK(as<ReadMemory>("x0,0").binary);
  // Huge lengths are just numbers.
  CHECK(as<ReadMemory>("m0,ffffffffffffffff").length == UINT64_MAX);
  CHECK(malformed("m10"));
  CHECK(malformed("m,10"));
  auto M = as<WriteMemory>("M1000,2:abcd");
  CHECK(M.addr == 0x1000u);
  CHECK(M.data == std::vector<uint8_t>{0xab, 0xcd});
  CHECK(malformed("M1000,3:abcd"));
  CHECK(malformed("M1000,ffffffffffffffff:ab"));
  CHECK(as<WriteMemory>("X55555555802c,0:").data.empty());
  auto X = as<WriteMemory>(std::string_view("X10,4:\x05\0#*", 10));
  CHECK(X.data == std::vector<uint8_t>{0x05, 0x00, '#', '*'});
  CHECK(malformed("X10,5:abcd"));
}

TEST_CASE("vCont and legacy resume", "[packets]") {
  as<VContQuery>("vCont?");
  auto v = as<VCont>("vCont;c:p1.-1;s:p1.2;r1000,2000:p1.2;C05;S0b;t");
  REQUIRE(v.actions.size() == 6);
  CHECK(v.actions[0].kind == ResumeKind::Continue);
  CHECK(v.actions[0].thread == ThreadId{1, -1});
  CHECK(v.actions[1].kind == ResumeKind::Step);
  CHECK(v.actions[1].thread == ThreadId{1, 2});
  CHECK(v.actions[2].kind == ResumeKind::RangeStep);
  CHECK(v.actions[2].range_start == 0x1000u);
  CHECK(v.actions[2].range_end == 0x2000u);
  CHECK(v.actions[3].gdb_signal == 5);
  CHECK_FALSE(v.actions[3].thread);
  CHECK(v.actions[4].kind == ResumeKind::Step);
  CHECK(v.actions[4].gdb_signal == 0xb);
  CHECK(v.actions[5].kind == ResumeKind::Stop);
  CHECK(as<VCont>("vCont;C0b:p2.3").actions[0].thread == ThreadId{2, 3});
  CHECK(malformed("vCont;"));
  CHECK(malformed("vCont"));
  CHECK(malformed("vCont;q"));
  CHECK(malformed("vCont;c:zz"));
  CHECK(malformed("vCont;r10:p1.1"));
  CHECK(malformed("vCont;C"));
  as<VCtrlC>("vCtrlC");
  as<VStopped>("vStopped");
  CHECK(unknown("vStoppedx"));
  // vCont;t (non-stop): stop one thread, or every thread of a process.
  auto t = as<VCont>("vCont;t:p1a.1b");
  REQUIRE(t.actions.size() == 1);
  CHECK(t.actions[0].kind == ResumeKind::Stop);
  CHECK(t.actions[0].thread == ThreadId{0x1a, 0x1b});
  CHECK(as<VCont>("vCont;t:p1a.-1").actions[0].thread == ThreadId{0x1a, -1});
  CHECK(malformed("vCont;t01"));

  auto c = as<LegacyResume>("c");
  CHECK(c.action.kind == ResumeKind::Continue);
  CHECK_FALSE(c.addr);
  CHECK(as<LegacyResume>("c400000").addr == 0x400000u);
  auto s = as<LegacyResume>("S0b;1234");
  CHECK(s.action.kind == ResumeKind::Step);
  CHECK(s.action.gdb_signal == 0xb);
  CHECK(s.addr == 0x1234u);
  CHECK(as<LegacyResume>("C05").action.gdb_signal == 5);
  CHECK(as<LegacyResume>("s").action.kind == ResumeKind::Step);
  CHECK(malformed("Cxx"));
}

TEST_CASE("stepbranch", "[packets]") {
  CHECK(as<StepBranch>("stepbranch").count == 1u);
  CHECK(as<StepBranch>("stepbranch:10").count == 10u);
  CHECK(malformed("stepbranch:0"));
  CHECK(malformed("stepbranch:x"));
  CHECK(malformed("stepbranch:99999999999"));
}

TEST_CASE("Qbranchstub:stepbranch-next and qbranchstub:stepbranch-last", "[packets]") {
  auto plain = as<StepBranchNext>("Qbranchstub:stepbranch-next:1a2b,1");
  CHECK_FALSE(plain.thread.pid);
  CHECK(plain.thread.tid == 0x1a2b);
  CHECK(plain.count == 1u);
  auto multi = as<StepBranchNext>("Qbranchstub:stepbranch-next:p1a.1b,25");
  CHECK(multi.thread.pid == 0x1a);
  CHECK(multi.thread.tid == 0x1b);
  CHECK(multi.count == 25u);  // decimal, as in stepbranch:N
  CHECK_FALSE(multi.lifted_breakpoint);
  auto lifted = as<StepBranchNext>("Qbranchstub:stepbranch-next:p1a.1b,3;bp:401136");
  CHECK(lifted.thread.tid == 0x1b);
  CHECK(lifted.count == 3u);
  CHECK(lifted.lifted_breakpoint == std::optional<uint64_t>(0x401136));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,3;bp:"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,3;bp:xyz"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,3;bp:10000000000000000"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,3;other:1"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,;bp:1"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,0"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,x"));
  CHECK(malformed("Qbranchstub:stepbranch-next:1a2b,99999999999"));
  CHECK(malformed("Qbranchstub:stepbranch-next:-1,1"));  // a concrete thread, not "all"
  CHECK(malformed("Qbranchstub:stepbranch-next:0,1"));   // nor "any"
  CHECK(malformed("Qbranchstub:stepbranch-next:zz,1"));
  CHECK(std::holds_alternative<StepBranchLast>(parse_request("qbranchstub:stepbranch-last")));
  CHECK(std::holds_alternative<Unknown>(parse_request("qbranchstub:stepbranch-lastx")));
  CHECK(std::holds_alternative<Unknown>(parse_request("Qbranchstub:other")));
}

TEST_CASE("process control", "[packets]") {
  CHECK_FALSE(as<Kill>("k").pid);
  CHECK(as<Kill>("vKill;1182").pid == 0x1182);
  CHECK(malformed("vKill;"));
  CHECK_FALSE(as<Detach>("D").pid);
  CHECK(as<Detach>("D;14f2").pid == 0x14f2);
  CHECK(malformed("D;x"));
  auto r = as<VRun>("vRun;2f62696e2f6c73;2d6c");
  CHECK(r.argv == std::vector<std::string>{"/bin/ls", "-l"});
  CHECK(as<VRun>("vRun;").argv == std::vector<std::string>{""});
  CHECK(malformed("vRun;zz"));
  CHECK(as<VAttach>("vAttach;7f4e").pid == 0x7f4e);
  CHECK(malformed("vAttach;"));
}

TEST_CASE("breakpoints", "[packets]") {
  auto z = as<InsertBreakpoint>("Z0,555555555149,1");
  CHECK(z.type == BreakpointType::Software);
  CHECK(z.addr == 0x555555555149u);
  CHECK(z.kind == 1u);
  CHECK(z.conditions.empty());
  CHECK_FALSE(z.commands);
  auto zc = as<InsertBreakpoint>("Z0,10,1;X2,0a0b;cmds:0,X1,27");
  CHECK(zc.addr == 0x10u);
  CHECK(zc.conditions == std::vector<std::vector<uint8_t>>{{0x0a, 0x0b}});
  REQUIRE(zc.commands);
  CHECK_FALSE(zc.commands->persist);
  CHECK(zc.commands->bytecodes == std::vector<std::vector<uint8_t>>{{0x27}});
  CHECK(as<RemoveBreakpoint>("z2,55555555802c,4").type == BreakpointType::WriteWatch);
  CHECK(as<InsertBreakpoint>("Z4,1,8").type == BreakpointType::AccessWatch);
  CHECK(unknown("Z5,1,1"));
  CHECK(malformed("Z0,1"));
  CHECK(malformed("Z0,zz,1"));
}

namespace {
std::vector<uint8_t> bytes(std::string_view hex) { return from_hex(hex).value(); }
using Codes = std::vector<std::vector<uint8_t>>;
}  // namespace

// Z packets GDB 13.1 sent to gdbserver (set debug remote 1) with `set breakpoint
// condition-evaluation target` and `set dprintf-style agent`.
TEST_CASE("breakpoint conditions and commands from GDB", "[packets]") {
  // break foo if x > 3 && *p == 7
  const char* cond = "26000622100222dc16080219162022032b1420001821003526000622100222d01608021a1916202207132000302100352201210037220027";
  auto z = as<InsertBreakpoint>(std::string("Z0,555555555151,1;X38,") + cond);
  CHECK(z.type == BreakpointType::Software);
  CHECK(z.addr == 0x555555555151u);
  CHECK(z.kind == 1u);
  REQUIRE(z.conditions.size() == 1);
  CHECK(z.conditions[0] == bytes(cond));
  CHECK(z.conditions[0].size() == 0x38);
  CHECK_FALSE(z.commands);

  // Two breakpoints at one address: break foo if x == 1; break foo if *s == 111 && sp->c < -4
  auto two = as<InsertBreakpoint>(
      "Z0,555555555151,1;X12,26000622100222dc16080219162022011327X3d,26000622100222c81608021a171608226f13"
      "20001821003a26000622100222c01608021a22040217160822fc16081420003521003a220121003c220027");
  REQUIRE(two.conditions.size() == 2);
  CHECK(two.conditions[0] == bytes("26000622100222dc16080219162022011327"));
  CHECK(two.conditions[1].size() == 0x3d);
  CHECK(two.conditions[1].back() == 0x27);

  // hbreak foo if x == 2
  auto hw = as<InsertBreakpoint>("Z1,555555555151,1;X12,26000622100222dc16080219162022021327");
  CHECK(hw.type == BreakpointType::Hardware);
  CHECK(hw.conditions == Codes{bytes("26000622100222dc16080219162022021327")});

  // dprintf foo,"x=%d s=%s\n",x,s
  const char* printf_code = "26000622100222c81608021a26000622100222dc160802191620220022003402000c783d256420733d25735c6e0027";
  auto d = as<InsertBreakpoint>(std::string("Z0,555555555151,1;cmds:1,X2f,") + printf_code);
  CHECK(d.conditions.empty());
  REQUIRE(d.commands);
  CHECK(d.commands->persist);
  CHECK(d.commands->bytecodes == Codes{bytes(printf_code)});

  // dprintf foo,"hit x=%d\n",x ; condition 1 x > 8
  auto dc = as<InsertBreakpoint>(
      "Z0,555555555151,1;X13,26000622100222dc16080219162022082b1427;"
      "cmds:1,X22,26000622100222dc160802191620220022003401000b68697420783d25645c6e0027");
  CHECK(dc.conditions == Codes{bytes("26000622100222dc16080219162022082b1427")});
  REQUIRE(dc.commands);
  REQUIRE(dc.commands->bytecodes.size() == 1);
  CHECK(dc.commands->bytecodes[0].size() == 0x22);

  // dprintf foo,"first x=%d\n",x ; dprintf foo,"second x=%d\n",x  (one cmds: token)
  auto two_cmds = as<InsertBreakpoint>(
      "Z0,555555555151,1;cmds:1,X24,26000622100222dc160802191620220022003401000d666972737420783d25645c6e0027"
      "X25,26000622100222dc160802191620220022003401000e7365636f6e6420783d25645c6e0027");
  REQUIRE(two_cmds.commands);
  REQUIRE(two_cmds.commands->bytecodes.size() == 2);
  CHECK(two_cmds.commands->bytecodes[0].size() == 0x24);
  CHECK(two_cmds.commands->bytecodes[1].size() == 0x25);
  CHECK(two_cmds.commands->bytecodes[1].back() == 0x27);
}

TEST_CASE("breakpoint options: grammar and bounds", "[packets]") {
  // Several commands back to back, persist 0, upper-case hex, an empty expression.
  auto z = as<InsertBreakpoint>("Z0,1,1;cmds:0,X1,27X2,0A0B");
  REQUIRE(z.commands);
  CHECK_FALSE(z.commands->persist);
  CHECK(z.commands->bytecodes == std::vector<std::vector<uint8_t>>{{0x27}, {0x0a, 0x0b}});
  CHECK(as<InsertBreakpoint>("Z0,1,1;X0,").conditions == std::vector<std::vector<uint8_t>>{{}});
  // Empty tokens and a trailing ';' are fine; unknown tokens are skipped, as gdbserver does.
  CHECK(as<InsertBreakpoint>("Z0,1,1;").conditions.empty());
  CHECK(as<InsertBreakpoint>("Z0,1,1;;X1,27;").conditions.size() == 1);
  auto skip = as<InsertBreakpoint>("Z0,1,1;future:1,2;X1,27");
  CHECK(skip.conditions.size() == 1);
  CHECK_FALSE(skip.commands);
  // Watchpoints parse the same options (GDB sends none).
  CHECK(as<InsertBreakpoint>("Z2,1000,4;X1,27").conditions.size() == 1);
  // z ignores whatever follows, as before.
  CHECK(as<RemoveBreakpoint>("z0,1,1;X2,zz").addr == 1u);

  CHECK(malformed("Z0,1,1;X"));
  CHECK(malformed("Z0,1,1;X1"));
  CHECK(malformed("Z0,1,1;X,27"));
  CHECK(malformed("Z0,1,1;Xg,27"));
  CHECK(malformed("Z0,1,1;X2,27"));          // shorter than its length
  CHECK(malformed("Z0,1,1;X1,2"));
  CHECK(malformed("Z0,1,1;X1,zz"));
  CHECK(malformed("Z0,1,1;X1,2727"));        // longer: junk after the expression
  CHECK(malformed("Z0,1,1;X1,27junk"));
  CHECK(malformed("Z0,1,1;Xffffffffffffffff,27"));   // no allocation from a bad length
  CHECK(malformed("Z0,1,1;X10000000000000000,27"));
  CHECK(malformed("Z0,1,1;X7fffffffffffffff,2727"));
  CHECK(malformed("Z0,1,1;cmds:"));
  CHECK(malformed("Z0,1,1;cmds:1"));
  CHECK(malformed("Z0,1,1;cmds:1,"));
  CHECK(malformed("Z0,1,1;cmds:2,X1,27"));
  CHECK(malformed("Z0,1,1;cmds:1X1,27"));
  CHECK(malformed("Z0,1,1;cmds:1,27"));
  CHECK(malformed("Z0,1,1;cmds:1,X1,27junk"));
  CHECK(malformed("Z0,1,1;cmds:1,X1,27;cmds:0,X1,27"));
  CHECK(malformed("Z0,1,1;X1,27;cmds:1,X1,zz"));
}

TEST_CASE("qXfer", "[packets]") {
  auto x = as<XferRead>("qXfer:features:read:target.xml:0,1000");
  CHECK(x.object == "features");
  CHECK(x.annex == "target.xml");
  CHECK(x.offset == 0u);
  CHECK(x.length == 0x1000u);
  auto t = as<XferRead>("qXfer:threads:read::3000,fff");
  CHECK(t.annex.empty());
  CHECK(t.offset == 0x3000u);
  CHECK(as<XferRead>("qXfer:btrace:read:delta:0,1000").annex == "delta");
  CHECK(as<XferRead>("qXfer:libraries-svr4:read:start=0;prev=1:0,1000").annex == "start=0;prev=1");
  CHECK(unknown("qXfer:siginfo:erase::0,10"));
  CHECK(malformed("qXfer:features:read:target.xml"));
  CHECK(malformed("qXfer:features:read:target.xml:0"));
}

TEST_CASE("qXfer write", "[packets]") {
  auto w = as<XferWrite>("qXfer:siginfo:write::0:abcd");
  CHECK(w.object == "siginfo");
  CHECK(w.annex.empty());
  CHECK(w.offset == 0u);
  CHECK(w.data == std::vector<uint8_t>{'a', 'b', 'c', 'd'});
  // The data is binary (already unescaped by the framer): ':' ',' and NUL are data bytes.
  using namespace std::string_view_literals;
  auto b = as<XferWrite>("qXfer:siginfo:write::1a:\x0b:,\0\xff"sv);
  CHECK(b.offset == 0x1au);
  CHECK(b.data == std::vector<uint8_t>{0x0b, ':', ',', 0x00, 0xff});
  auto named = as<XferWrite>("qXfer:siginfo:write:3/mem:10:x");
  CHECK(named.object == "siginfo");
  CHECK(named.annex == "3/mem");
  CHECK(named.offset == 0x10u);
  CHECK(unknown("qXfer:spu:write:3/mem:10:x"));  // an object the server does not have
  CHECK(as<XferWrite>("qXfer:siginfo:write::0:").data.empty());
  CHECK(malformed("qXfer:siginfo:write::0"));
  CHECK(malformed("qXfer:siginfo:write:"));
  CHECK(malformed("qXfer:siginfo:write::zz:ab"));
  CHECK(malformed("qXfer:siginfo:write:::ab"));
}

TEST_CASE("R (restart)", "[packets]") {
  CHECK(std::holds_alternative<Restart>(parse_request("R00")));
  CHECK(std::holds_alternative<Restart>(parse_request("R")));
}

TEST_CASE("vFile", "[packets]") {
  CHECK(as<FileSetFs>("vFile:setfs:0").pid == 0);
  auto o = as<FileOpen>("vFile:open:6a7573742070726f62696e67,0,1c0");
  CHECK(o.path == "just probing");
  CHECK(o.flags == 0);
  CHECK(o.mode == 0x1c0);
  CHECK(as<FileClose>("vFile:close:6").fd == 6);
  auto pr = as<FilePread>("vFile:pread:6,47ff,0");
  CHECK(pr.fd == 6);
  CHECK(pr.count == 0x47ffu);
  CHECK(pr.offset == 0u);
  auto pw = as<FilePwrite>("vFile:pwrite:6,10,he,lo");
  CHECK(pw.offset == 0x10u);
  CHECK(pw.data == std::vector<uint8_t>{'h', 'e', ',', 'l', 'o'});
  CHECK(as<FileFstat>("vFile:fstat:6").fd == 6);
  CHECK(as<FileUnlink>("vFile:unlink:2f746d70").path == "/tmp");
  CHECK(as<FileReadlink>("vFile:readlink:2f746d70").path == "/tmp");
  CHECK(malformed("vFile:open:zz,0,0"));
  CHECK(malformed("vFile:pread:6,1"));
  CHECK(malformed("vFile:pwrite:6"));
  CHECK(unknown("vFile:stat:2f"));
}

TEST_CASE("btrace packets", "[packets]") {
  CHECK(as<BtraceEnable>("Qbtrace:bts").format == "bts");
  CHECK(as<BtraceEnable>("Qbtrace:pt").format == "pt");
  CHECK(as<BtraceEnable>("Qbtrace:off").format == "off");
  CHECK(as<BtraceEnable>("Qbtrace:foo").format == "foo");
  auto c = as<BtraceConf>("Qbtrace-conf:bts:size=0x10000");
  CHECK(c.format == "bts");
  CHECK(c.key == "size");
  CHECK(c.value == "0x10000");
  auto bad = as<BtraceConf>("Qbtrace-conf:what");
  CHECK(bad.format == "what");
  CHECK(bad.key.empty());
}

TEST_CASE("LLDB packets", "[packets]") {
  as<HostInfo>("qHostInfo");
  as<ProcessInfo>("qProcessInfo");
  CHECK(as<MemoryRegionInfo>("qMemoryRegionInfo:7ffff7fc1000").addr == 0x7ffff7fc1000u);
  CHECK(malformed("qMemoryRegionInfo:"));
  as<ThreadSuffixSupported>("QThreadSuffixSupported");
  as<ListThreadsInStopReply>("QListThreadsInStopReply");
  as<ThreadsInfo>("jThreadsInfo");
  as<EnableErrorStrings>("QEnableErrorStrings");
  as<WatchpointSupportInfo>("qWatchpointSupportInfo");
  as<WatchpointSupportInfo>("qWatchpointSupportInfo:");
  CHECK(as<ThreadStopInfo>("qThreadStopInfo2b").tid == 0x2b);
  CHECK(as<RegisterInfo>("qRegisterInfo1f").regno == 0x1f);
  CHECK(malformed("qRegisterInfo"));
  CHECK(unknown("jThreadExtendedInfo:"));
  CHECK(unknown("qStructuredDataPlugins"));
  CHECK(unknown("qVAttachOrWaitSupported"));
}
