// Parsing the execution packets (protocol/packets/execution.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("vCont and legacy resume", "[packets][execution]") {
  as<VContQuery>("vCont?");
  auto v = as<VCont>("vCont;c:p1.-1;s:p1.2;r1000,2000:p1.2;C05;S0b;t");
  REQUIRE(v.actions.size() == 6);
  CHECK(v.actions[0].op == VContOp::Continue);
  CHECK(v.actions[0].thread == ThreadId{1, -1});
  CHECK(v.actions[1].op == VContOp::Step);
  CHECK(v.actions[1].thread == ThreadId{1, 2});
  CHECK(v.actions[2].op == VContOp::RangeStep);
  CHECK(v.actions[2].range_start == 0x1000u);
  CHECK(v.actions[2].range_end == 0x2000u);
  CHECK(v.actions[3].gdb_signal == 5);
  CHECK_FALSE(v.actions[3].thread);
  CHECK(v.actions[4].op == VContOp::Step);
  CHECK(v.actions[4].gdb_signal == 0xb);
  CHECK(v.actions[5].op == VContOp::Stop);
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
  CHECK(t.actions[0].op == VContOp::Stop);
  CHECK(t.actions[0].thread == ThreadId{0x1a, 0x1b});
  CHECK(as<VCont>("vCont;t:p1a.-1").actions[0].thread == ThreadId{0x1a, -1});
  CHECK(malformed("vCont;t01"));

  auto c = as<LegacyResume>("c");
  CHECK(c.action.op == VContOp::Continue);
  CHECK_FALSE(c.addr);
  CHECK(as<LegacyResume>("c400000").addr == 0x400000u);
  auto s = as<LegacyResume>("S0b;1234");
  CHECK(s.action.op == VContOp::Step);
  CHECK(s.action.gdb_signal == 0xb);
  CHECK(s.addr == 0x1234u);
  CHECK(as<LegacyResume>("C05").action.gdb_signal == 5);
  CHECK(as<LegacyResume>("s").action.op == VContOp::Step);
  CHECK(malformed("Cxx"));
}

TEST_CASE("stepbranch", "[packets][execution]") {
  CHECK(as<StepBranch>("stepbranch").count == 1u);
  CHECK(as<StepBranch>("stepbranch:10").count == 10u);
  CHECK(malformed("stepbranch:0"));
  CHECK(malformed("stepbranch:x"));
  CHECK(malformed("stepbranch:99999999999"));
}

TEST_CASE("Qbranchstub:stepbranch-next and qbranchstub:stepbranch-last", "[packets][execution]") {
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

TEST_CASE("process control", "[packets][execution]") {
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

TEST_CASE("R (restart)", "[packets][execution]") {
  CHECK(std::holds_alternative<Restart>(parse_request("R00")));
  CHECK(std::holds_alternative<Restart>(parse_request("R")));
}
