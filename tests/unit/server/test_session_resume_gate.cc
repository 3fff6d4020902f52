// Session, the resume gate: every resume passes through Session::begin_resume, which hands the
// one-shot requests (Qbranchstub:stepbranch-next) to the resume that fulfils them and lets the
// others expire, whichever way the client resumes.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::ResumeKind;
using backend::StopKind;
using fake::FakeProcess;
using fake::SessionHarness;
using fake::stop_event;

namespace {

struct GdbSession {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65});
  GdbSession() { h.gdb_handshake(); }

  // A plan that steps `tid` (with `signo`) and continues the others.
  server::Session::ResumePlans step(pid_t tid, int signo = 0) {
    backend::ResumePlan plan;
    plan.threads[tid] = backend::ResumeAction{ResumeKind::Step, signo};
    plan.others = backend::ResumeAction{};
    return {{&p, plan}};
  }
};

}  // namespace

TEST_CASE("resume gate: the request goes to the resume that steps its thread, once") {
  GdbSession g;
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,3;bp:401136") == "OK");
  auto& s = g.h.session();
  auto taken = s.begin_resume(g.step(0x65));
  REQUIRE(taken.step_branch);
  CHECK(taken.step_branch_process == &g.p);
  CHECK(taken.step_branch->tid == 0x65);
  CHECK(taken.step_branch->count == 3);
  CHECK(taken.step_branch->lifted_breakpoint == 0x401136);
  // One-shot: the next resume gets nothing.
  auto again = s.begin_resume(g.step(0x65));
  CHECK_FALSE(again.step_branch);
  CHECK(again.step_branch_process == nullptr);
}

TEST_CASE("resume gate: a resume that does not fulfil the request ends it") {
  GdbSession g;
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,1") == "OK");
  auto& s = g.h.session();
  server::Session::ResumePlans other;
  SECTION("a step of another thread") { other = g.step(0x64); }
  SECTION("a step that delivers a signal") { other = g.step(0x65, SIGUSR1); }
  SECTION("no plans (stepbranch, monitor stepbranch)") {}
  CHECK_FALSE(s.begin_resume(other).step_branch);
  CHECK_FALSE(s.begin_resume(g.step(0x65)).step_branch);
}

TEST_CASE("resume gate: every way of resuming expires the request") {
  GdbSession g;
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,2") == "OK");
  std::string other;
  size_t own_step_branches = 0;  // what the other resume runs as a stepbranch itself
  SECTION("legacy c") { other = "c"; }
  SECTION("legacy C with a signal") { other = "C0a"; }
  SECTION("legacy s of another thread") {
    CHECK(g.h.request("Hcp64.64") == "OK");
    other = "s";
  }
  SECTION("monitor stepbranch") {
    other = "qRcmd,737465706272616e6368";
    own_step_branches = 1;
  }
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK_FALSE(g.h.round_trip(other).empty());
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c").size() == 1);
  REQUIRE_FALSE(g.p.resumes.empty());
  const auto& last = g.p.resumes.back().threads;
  REQUIRE(last.count(0x65));
  CHECK(last.at(0x65).kind == ResumeKind::Step);  // a plain step, not a stepbranch
  CHECK(g.p.step_branches.size() == own_step_branches);
}
