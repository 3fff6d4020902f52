// Session, execution: vCont splitting into per-thread backend plans, legacy c/s/C/S, signal
// numbering, stop replies in both dialects, exits, 'N', stepbranch, ^C, k, D, vKill.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::ResumeKind;
using backend::StopKind;
using fake::FakeProcess;
using fake::SessionHarness;
using fake::gdb_expedited;
using fake::hex_le;
using fake::stop_event;
using Packets = std::vector<std::string>;

namespace {

// LLDB gets rax..eflags (0..0x11): 17 registers of 8 bytes, eflags of 4.
std::string lldb_expedited(FakeProcess& p, pid_t tid) {
  std::string out;
  for (int r = 0; r <= 0x11; ++r) {
    uint64_t v = p.regs(tid).get_u64(p.register_layout(), r);
    out += fmt::format("{:02x}:", r) + hex_le(v, r == 0x11 ? 4 : 8) + ";";
  }
  return out;
}

// A GDB session on process 0x64 with threads 0x64 and 0x65 (rbp/rsp/rip set in 0x65).
struct GdbSetup {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65});
  std::string regs65 = gdb_expedited(0x7ffe0010, 0x7ffe0000, 0x401000);
  GdbSetup() {
    p.set_reg(0x65, 6, 0x7ffe0010);
    p.set_reg(0x65, 7, 0x7ffe0000);
    p.set_reg(0x65, 16, 0x401000);
    h.gdb_handshake();
  }
};

bool same_action(const backend::ResumeAction& a, ResumeKind kind, int signo) {
  return a.kind == kind && a.signo == signo;
}

}  // namespace

TEST_CASE("execution: vCont? lists every action") {
  SessionHarness h;
  CHECK(h.request("vCont?") == "vCont;c;C;t;s;S;r");
}

TEST_CASE("execution: vCont with s:p1.2 and c steps thread 2 and continues the others") {
  GdbSetup g;
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c") == Packets{"T05" + g.regs65 + "thread:p64.65;"});
  REQUIRE(g.p.resumes.size() == 1);
  const auto& plan = g.p.resumes[0];
  REQUIRE(plan.threads.size() == 1);
  REQUIRE(plan.threads.count(0x65));
  CHECK(same_action(plan.threads.at(0x65), ResumeKind::Step, 0));
  REQUIRE(plan.others);
  CHECK(same_action(*plan.others, ResumeKind::Continue, 0));
  CHECK_FALSE(plan.step_over_client_breakpoints);  // GDB steps over its breakpoints itself
  // Fork reporting is set from the dialect before the resume.
  REQUIRE(g.p.fork_reporting.size() == 1);
  CHECK(g.p.fork_reporting[0] == std::pair<bool, bool>{true, true});
  auto resume_at = std::find(g.p.calls().begin(), g.p.calls().end(), "resume");
  CHECK(std::find(g.p.calls().begin(), resume_at, "set_fork_reporting") != resume_at);
}

TEST_CASE("execution: vCont c:p<pid>.-1 continues every thread of the process") {
  GdbSetup g;
  g.p.stop_with(fake::signal_stop(0x64, 0x65, SIGSEGV));
  CHECK(g.h.round_trip("vCont;c:p64.-1") == Packets{"T0b" + g.regs65 + "thread:p64.65;"});
  REQUIRE(g.p.resumes.size() == 1);
  CHECK(g.p.resumes[0].threads.empty());
  REQUIRE(g.p.resumes[0].others);
  CHECK(same_action(*g.p.resumes[0].others, ResumeKind::Continue, 0));
}

TEST_CASE("execution: a vCont naming one thread leaves the others stopped") {
  GdbSetup g;
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x64, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.64").size() == 1);
  REQUIRE(g.p.resumes.size() == 1);
  CHECK(g.p.resumes[0].threads.size() == 1);
  CHECK(g.p.resumes[0].threads.count(0x64));
  CHECK_FALSE(g.p.resumes[0].others);
}

TEST_CASE("execution: the leftmost vCont action that names a thread wins") {
  GdbSetup g;
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c:p64.65;c").size() == 1);
  CHECK(same_action(g.p.resumes.at(0).threads.at(0x65), ResumeKind::Step, 0));
}

TEST_CASE("execution: vCont signals in GDB's numbering reach the backend as Linux signals") {
  GdbSetup g;
  g.p.stop_with(fake::signal_stop(0x64, 0x65, SIGUSR2));
  // GDB 0x1e = SIGUSR1 (Linux 10), GDB 0xa = SIGBUS (Linux 7); GDB 0x1f = SIGUSR2 in the reply.
  CHECK(g.h.round_trip("vCont;C1e:p64.65;Ca") == Packets{"T1f" + g.regs65 + "thread:p64.65;"});
  const auto& plan = g.p.resumes.at(0);
  CHECK(same_action(plan.threads.at(0x65), ResumeKind::Continue, SIGUSR1));
  REQUIRE(plan.others);
  CHECK(same_action(*plan.others, ResumeKind::Continue, SIGBUS));
}

TEST_CASE("execution: vCont signals from LLDB are Linux numbers, LLDB gets breakpoint step-overs") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  h.lldb_handshake();
  p.stop_with(fake::signal_stop(0x64, 0x65, SIGUSR2));
  auto replies = h.round_trip("vCont;C0a:p64.65;S07:p64.64");
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].substr(0, 3) == "T0c");  // SIGUSR2 is 12 on Linux
  const auto& plan = p.resumes.at(0);
  CHECK(same_action(plan.threads.at(0x65), ResumeKind::Continue, SIGUSR1));
  CHECK(same_action(plan.threads.at(0x64), ResumeKind::Step, SIGBUS));
  CHECK_FALSE(plan.others);
  CHECK(plan.step_over_client_breakpoints);
}

TEST_CASE("execution: vCont range step and stop actions") {
  GdbSetup g;
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x64, SIGTRAP));
  CHECK(g.h.round_trip("vCont;r401000,401010:p64.64;t").size() == 1);
  const auto& plan = g.p.resumes.at(0);
  const auto& step = plan.threads.at(0x64);
  CHECK(step.kind == ResumeKind::RangeStep);
  CHECK(step.range_start == 0x401000);
  CHECK(step.range_end == 0x401010);
  REQUIRE(plan.others);
  CHECK(plan.others->kind == ResumeKind::Stop);
}

TEST_CASE("execution: a vCont that resumes nothing is an error and resumes nothing") {
  GdbSetup g;
  CHECK(g.h.request("vCont;s:p64.99") == "E.No thread to resume.");
  CHECK(g.h.request("vCont;c:p99.-1") == "E.No thread to resume.");
  CHECK(g.p.resumes.empty());
}

TEST_CASE("execution: a backend resume failure is an error reply, no stop is awaited") {
  GdbSetup g;
  g.p.resume_error = backend::Error{ESRCH, "gone"};
  CHECK(g.h.request("vCont;c") == "E.gone");
  CHECK(g.h.session().waiting() == server::Waiting::Nothing);
}

TEST_CASE("execution: vCont across two processes, the other one is paused at the stop") {
  GdbSetup g;
  auto& second = g.h.add_process(0xc8, {0xc8});
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c") == Packets{"T05" + g.regs65 + "thread:p64.65;"});
  REQUIRE(second.resumes.size() == 1);
  CHECK(second.resumes[0].threads.empty());
  CHECK(same_action(*second.resumes[0].others, ResumeKind::Continue, 0));
  CHECK(second.count("pause") == 1);
  CHECK_FALSE(second.running());
}

TEST_CASE("execution: legacy c, s, C, S with and without an address") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  const auto& layout = p.register_layout();

  p.stop_with(fake::signal_stop(0x64, 0x64, SIGSEGV));
  CHECK(h.request("c") == "T0b" + gdb_expedited(0, 0, 0) + "thread:64;");
  CHECK(p.resumes.back().threads.empty());
  CHECK(same_action(*p.resumes.back().others, ResumeKind::Continue, 0));

  p.stop_with(stop_event(StopKind::Step, 0x64, 0x64, SIGTRAP));
  CHECK(h.request("s") == "T05" + gdb_expedited(0, 0, 0) + "thread:64;");
  CHECK(same_action(p.resumes.back().threads.at(0x64), ResumeKind::Step, 0));
  CHECK_FALSE(p.resumes.back().others);

  p.stop_with(fake::signal_stop(0x64, 0x64, SIGSEGV));
  CHECK(h.round_trip("C1e").size() == 1);
  CHECK(same_action(*p.resumes.back().others, ResumeKind::Continue, SIGUSR1));

  CHECK(p.register_writes.empty());
  p.stop_with(stop_event(StopKind::Step, 0x64, 0x64, SIGTRAP));
  CHECK(h.request("S0b;401234") == "T05" + gdb_expedited(0, 0, 0x401234) + "thread:64;");
  CHECK(same_action(p.resumes.back().threads.at(0x64), ResumeKind::Step, SIGSEGV));
  REQUIRE(p.register_writes.size() == 1);
  CHECK(p.register_writes[0].first == 0x64);
  CHECK(p.register_writes[0].second.pc(layout) == 0x401234);

  p.stop_with(fake::signal_stop(0x64, 0x64, SIGSEGV));
  CHECK(h.round_trip("c402000").size() == 1);
  CHECK(p.regs(0x64).pc(layout) == 0x402000);
  CHECK(h.request("C1e;zz") == "E.c/s: bad address");  // bad address
  CHECK(h.request("Cxyz") == "E.C/S: bad signal");    // bad signal
}

TEST_CASE("execution: GDB stop replies for every stop reason") {
  GdbSetup g;
  auto with = [&](backend::StopEvent e) {
    g.p.stop_with(std::move(e));
    auto replies = g.h.round_trip("vCont;c");
    return replies.size() == 1 ? replies[0] : "<" + std::to_string(replies.size()) + " replies>";
  };
  const std::string tail = g.regs65 + "thread:p64.65;";
  CHECK(with(stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP)) == "T05swbreak:;" + tail);
  CHECK(with(stop_event(StopKind::HwBreakpoint, 0x64, 0x65, SIGTRAP)) == "T05hwbreak:;" + tail);
  auto watch = stop_event(StopKind::Watchpoint, 0x64, 0x65, SIGTRAP);
  watch.watch_addr = 0x601040;
  watch.watch_type = backend::WatchType::Write;
  CHECK(with(watch) == "T05watch:601040;" + tail);
  watch.watch_type = backend::WatchType::Read;
  CHECK(with(watch) == "T05rwatch:601040;" + tail);
  watch.watch_type = backend::WatchType::Access;
  CHECK(with(watch) == "T05awatch:601040;" + tail);
  CHECK(with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP)) == "T05" + tail);
  auto fork = stop_event(StopKind::Fork, 0x64, 0x65, SIGTRAP);
  fork.child_pid = 0x1c8;
  CHECK(with(fork) == "T05fork:p1c8.1c8;" + tail);
  fork.kind = StopKind::VFork;
  CHECK(with(fork) == "T05vfork:p1c8.1c8;" + tail);
  CHECK(with(stop_event(StopKind::VForkDone, 0x64, 0x65, SIGTRAP)) == "T05vforkdone:;" + tail);
  auto exec = stop_event(StopKind::Exec, 0x64, 0x65, SIGTRAP);
  exec.exec_path = "/bin/ls";
  CHECK(with(exec) == "T05exec:2f62696e2f6c73;" + tail);
  auto sys = stop_event(StopKind::SyscallEntry, 0x64, 0x65, SIGTRAP);
  sys.syscall_no = 231;
  CHECK(with(sys) == "T05syscall_entry:e7;" + tail);
  sys.kind = StopKind::SyscallReturn;
  CHECK(with(sys) == "T05syscall_return:e7;" + tail);
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGINT)) == "T02" + tail);
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGCHLD)) == "T14" + tail);  // GDB_SIGNAL_CHLD
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGSTOP)) == "T11" + tail);  // GDB_SIGNAL_STOP
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGSYS)) == "T0c" + tail);   // GDB_SIGNAL_SYS
}

TEST_CASE("execution: a stop reply names the thread's core when known") {
  GdbSetup g;
  g.p.add_thread(0x65, "worker", 0x1a);
  g.p.stop_with(fake::signal_stop(0x64, 0x65, SIGSEGV));
  CHECK(g.h.round_trip("vCont;c") == Packets{"T0b" + gdb_expedited(0, 0, 0) + "thread:p64.65;core:1a;"});
}

TEST_CASE("execution: without exec-events an exec is a plain SIGTRAP stop") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("qSupported:multiprocess+;swbreak+;hwbreak+").rfind("PacketSize", 0) == 0);
  auto exec = stop_event(StopKind::Exec, 0x64, 0x64, SIGTRAP);
  exec.exec_path = "/bin/ls";
  p.stop_with(exec);
  CHECK(h.round_trip("vCont;c") == Packets{"T05" + gdb_expedited(0, 0, 0) + "thread:p64.64;"});
  CHECK(p.fork_reporting.at(0) == std::pair<bool, bool>{false, false});
}

TEST_CASE("execution: LLDB stop replies carry reason, name, threads and thread-pcs, Linux signals") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  p.add_thread(0x64, "prog", -1);
  p.add_thread(0x65, "worker", 1);
  p.set_reg(0x64, 16, 0x400000);
  p.set_reg(0x65, 16, 0x401000);
  p.set_reg(0x65, 0, 0xdead);
  p.set_reg(0x65, 0x11, 0x246);
  h.lldb_handshake();
  auto with = [&](backend::StopEvent e) {
    p.stop_with(std::move(e));
    auto replies = h.round_trip("vCont;c:p64.-1");
    return replies.size() == 1 ? replies[0] : "<" + std::to_string(replies.size()) + " replies>";
  };
  const std::string regs = lldb_expedited(p, 0x65);
  CHECK(regs.substr(0, 20) == "00:adde000000000000;");
  CHECK(regs.substr(regs.size() - 12) == "11:46020000;");
  const std::string thread = "thread:p64.65;core:1;name:worker;threads:64,65;thread-pcs:400000,401000;";
  // No swbreak: LLDB did not offer it, and reads the reason key.
  CHECK(with(stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP)) == "T05" + regs + thread + "reason:breakpoint;");
  CHECK(with(stop_event(StopKind::HwBreakpoint, 0x64, 0x65, SIGTRAP)) == "T05" + regs + thread + "reason:breakpoint;");
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGUSR1)) == "T0a" + regs + thread + "reason:signal;");
  CHECK(with(fake::signal_stop(0x64, 0x65, SIGCHLD)) == "T11" + regs + thread + "reason:signal;");
  CHECK(with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP)) == "T05" + regs + thread + "reason:trace;");
  auto watch = stop_event(StopKind::Watchpoint, 0x64, 0x65, SIGTRAP);
  watch.watch_addr = 0x601040;  // 6295616
  CHECK(with(watch) == "T05watch:601040;" + regs + thread +
                           "reason:watchpoint;description:363239353631362030;");  // "6295616 0"
  auto exec = stop_event(StopKind::Exec, 0x64, 0x65, SIGTRAP);
  exec.exec_path = "/bin/ls";
  CHECK(with(exec) == "T05exec:2f62696e2f6c73;" + regs + thread + "reason:exec;");
}

TEST_CASE("execution: LLDB gets a thread name that would break the reply as hexname") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  p.add_thread(0x64, "a;b", -1);
  h.lldb_handshake();
  p.stop_with(fake::signal_stop(0x64, 0x64, SIGUSR1));
  auto replies = h.round_trip("vCont;c");
  REQUIRE(replies.size() == 1);
  CHECK(replies[0].find("thread:p64.64;hexname:613b62;threads:64;thread-pcs:0;reason:signal;") != std::string::npos);
}

TEST_CASE("execution: exit replies: W and X, with the process when multiprocess") {
  SECTION("GDB") {
    GdbSetup g;
    g.p.stop_with(fake::exit_event(0x64, 0));
    CHECK(g.h.round_trip("vCont;c") == Packets{"W00;process:64"});
  }
  SECTION("GDB, killed by a signal in GDB's numbering") {
    GdbSetup g;
    g.p.stop_with(fake::killed_event(0x64, SIGUSR1));
    CHECK(g.h.round_trip("vCont;c") == Packets{"X1e;process:64"});
    CHECK_FALSE(g.p.alive());
  }
  SECTION("LLDB, Linux numbering") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    h.lldb_handshake();
    p.stop_with(fake::killed_event(0x64, SIGUSR1));
    CHECK(h.round_trip("vCont;c") == Packets{"X0a;process:64"});
  }
  SECTION("no multiprocess") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    p.stop_with(fake::killed_event(0x64, SIGKILL));
    CHECK(h.round_trip("c") == Packets{"X09"});
  }
}

TEST_CASE("execution: a process exit while another remains: reported, then forgotten") {
  GdbSetup g;
  g.h.add_process(0xc8, {0xc8});
  g.p.stop_with(fake::exit_event(0x64, 2));
  CHECK(g.h.round_trip("vCont;c") == Packets{"W02;process:64"});
  CHECK(g.h.server().process_for(0x64) == nullptr);
  CHECK(g.h.request("qfThreadInfo") == "mpc8.c8");
}

TEST_CASE("execution: no resumed thread left: N with no-resumed+, gdbserver's error without") {
  SECTION("no-resumed+") {
    GdbSetup g;
    g.p.stop_with(stop_event(StopKind::NoResumed, 0x64, 0, 0));
    CHECK(g.h.round_trip("vCont;c") == Packets{"N"});
  }
  SECTION("not offered") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    h.request("qSupported:multiprocess+;swbreak+;hwbreak+");
    p.stop_with(stop_event(StopKind::NoResumed, 0x64, 0, 0));
    CHECK(h.round_trip("vCont;c") == Packets{"E.No unwaited-for children left."});
  }
}

TEST_CASE("execution: stepbranch: the general thread, the count, branch-from/branch-to") {
  GdbSetup g;
  auto sb = stop_event(StopKind::StepBranch, 0x64, 0x64, SIGTRAP);
  sb.branch_from = 0x401000;
  sb.branch_to = 0x401020;
  g.p.stop_with(sb);
  CHECK(g.h.round_trip("stepbranch") ==
        Packets{"T05" + gdb_expedited(0, 0, 0) +
                "thread:p64.64;branch-from:401000;branch-to:401020;stepbranch-mechanism:software;"});
  CHECK(g.p.step_branches == std::vector<std::pair<pid_t, uint32_t>>{{0x64, 1}});
  CHECK(g.p.resumes.empty());

  CHECK(g.h.request("Hgp64.65") == "OK");
  sb.tid = 0x65;
  sb.step_mechanism = "singleblock";
  g.p.stop_with(sb);
  CHECK(g.h.round_trip("stepbranch:3") ==
        Packets{"T05" + g.regs65 + "thread:p64.65;branch-from:401000;branch-to:401020;stepbranch-mechanism:singleblock;"});
  CHECK(g.p.step_branches.back() == std::pair<pid_t, uint32_t>{0x65, 3});
}

TEST_CASE("execution: stepbranch that stops for something else still names the mechanism") {
  GdbSetup g;
  g.p.stop_with(stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("stepbranch") ==
        Packets{"T05swbreak:;" + g.regs65 + "thread:p64.65;stepbranch-mechanism:software;"});
}

TEST_CASE("execution: stepbranch errors") {
  GdbSetup g;
  g.p.step_branch_error = backend::Error{EINVAL, "Cannot step: the thread is running."};
  CHECK(g.h.request("stepbranch") == "E.Cannot step: the thread is running.");
  CHECK(g.h.request("stepbranch:0") == "E.stepbranch: bad count");
  CHECK(g.h.request("stepbranch:x") == "E.stepbranch: bad count");
  CHECK(g.h.session().waiting() == server::Waiting::Nothing);
}

TEST_CASE("execution: stepbranch-next turns the client's next step of that thread into a stepbranch") {
  GdbSetup g;
  CHECK(g.h.request("qbranchstub:stepbranch-last") == "none");
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,3") == "OK");
  auto sb = stop_event(StopKind::StepBranch, 0x64, 0x65, SIGTRAP);
  sb.branch_from = 0x401000;
  sb.branch_to = 0x401020;
  g.p.stop_with(sb);
  // GDB's stepi: this thread steps, the others continue. Only the thread runs, to its 3rd branch.
  CHECK(g.h.round_trip("vCont;s:p64.65;c") ==
        Packets{"T05" + g.regs65 + "thread:p64.65;branch-from:401000;branch-to:401020;stepbranch-mechanism:software;"});
  CHECK(g.p.step_branches == std::vector<std::pair<pid_t, uint32_t>>{{0x65, 3}});
  CHECK(g.p.resumes.empty());
  CHECK(g.h.request("qbranchstub:stepbranch-last") ==
        "thread:p64.65;branch-from:401000;branch-to:401020;stepbranch-mechanism:software;");
  // One-shot: the next step is a step again, and the answer is gone with the new stop.
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c") == Packets{"T05" + g.regs65 + "thread:p64.65;"});
  CHECK(g.p.step_branches.size() == 1);
  REQUIRE(g.p.resumes.size() == 1);
  CHECK(same_action(g.p.resumes[0].threads.at(0x65), ResumeKind::Step, 0));
  CHECK(g.h.request("qbranchstub:stepbranch-last") == "none");
}

TEST_CASE("execution: stepbranch-next puts back the breakpoint the client lifted for its step, for the run only") {
  GdbSetup g;
  CHECK(g.h.request("Z0,401136,1") == "OK");
  CHECK(g.h.request("z0,401136,1") == "OK");  // GDB's step-over of the breakpoint at the pc
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,3;bp:401136") == "OK");
  g.p.journal->clear();
  g.p.breakpoint_calls.clear();
  g.p.stop_with(stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65").size() == 1);
  // In before the run, out at its stop (before the reply, so the client's Z0 finds it absent).
  fake::Journal order;
  for (const auto& call : g.p.calls())
    if (call == "insert_breakpoint" || call == "step_branch" || call == "remove_breakpoint" || call == "read_registers")
      if (order.empty() || order.back() != call) order.push_back(call);
  CHECK(order == fake::Journal{"insert_breakpoint", "step_branch", "remove_breakpoint", "read_registers"});
  REQUIRE(g.p.breakpoint_calls.size() == 2);
  CHECK(g.p.breakpoint_calls[0].insert);
  CHECK(g.p.breakpoint_calls[0].addr == 0x401136);
  CHECK_FALSE(g.p.breakpoint_calls[1].insert);
  CHECK(g.p.breakpoint_calls[1].addr == 0x401136);
  CHECK(g.p.client_breakpoints.empty());
  CHECK(g.h.request("Z0,401136,1") == "OK");

  SECTION("one the client kept inserted is neither inserted again nor removed") {
    CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,3;bp:401136") == "OK");
    g.p.breakpoint_calls.clear();
    g.p.stop_with(stop_event(StopKind::StepBranch, 0x64, 0x65, SIGTRAP));
    CHECK(g.h.round_trip("vCont;s:p64.65").size() == 1);
    CHECK(g.p.breakpoint_calls.empty());
    CHECK(g.p.client_breakpoints.size() == 1);
  }
  SECTION("a request that expires unused inserts nothing") {
    CHECK(g.h.request("z0,401136,1") == "OK");
    CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,3;bp:401136") == "OK");
    g.p.breakpoint_calls.clear();
    g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
    CHECK(g.h.round_trip("vCont;c").size() == 1);
    CHECK(g.p.breakpoint_calls.empty());
  }
}

TEST_CASE("execution: stepbranch-next applies to GDB's step-over step and to a legacy s") {
  GdbSetup g;
  SECTION("vCont;s of the thread alone (GDB stepping over a breakpoint at the pc)") {
    CHECK(g.h.request("Qbranchstub:stepbranch-next:65,1") == "OK");
    g.p.stop_with(stop_event(StopKind::StepBranch, 0x64, 0x65, SIGTRAP));
    CHECK(g.h.round_trip("vCont;s:p64.65").size() == 1);
  }
  SECTION("s after Hc") {
    CHECK(g.h.request("Hcp64.65") == "OK");
    CHECK(g.h.request("Qbranchstub:stepbranch-next:65,1") == "OK");
    g.p.stop_with(stop_event(StopKind::StepBranch, 0x64, 0x65, SIGTRAP));
    CHECK(g.h.round_trip("s").size() == 1);
  }
  CHECK(g.p.step_branches == std::vector<std::pair<pid_t, uint32_t>>{{0x65, 1}});
  CHECK(g.p.resumes.empty());
}

TEST_CASE("execution: a stepbranch-next request expires at a resume of any other kind") {
  GdbSetup g;
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,2") == "OK");
  std::string other;
  SECTION("continue") { other = "vCont;c"; }
  SECTION("a step of another thread") { other = "vCont;s:p64.64;c"; }
  SECTION("a step that delivers a signal (stops at the handler, as a stepbranch would)") { other = "vCont;S0a:p64.65"; }
  SECTION("a range step") { other = "vCont;r401000,401010:p64.65;c"; }
  SECTION("the stepbranch packet") { other = "stepbranch"; }
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip(other).size() == 1);
  g.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(g.h.round_trip("vCont;s:p64.65;c").size() == 1);
  CHECK(g.p.resumes.size() + g.p.step_branches.size() == 2);
  REQUIRE_FALSE(g.p.resumes.empty());
  CHECK(same_action(g.p.resumes.back().threads.at(0x65), ResumeKind::Step, 0));  // a plain step
}

TEST_CASE("execution: stepbranch-next errors") {
  GdbSetup g;
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.99,1") == "E.No such thread.");
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p99.99,1") == "E.No process.");
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,0") == "E.stepbranch-next: bad count");
  // A failed stepbranch is answered as the step's error; nothing is left armed.
  CHECK(g.h.request("Qbranchstub:stepbranch-next:p64.65,1") == "OK");
  g.p.step_branch_error = backend::Error{EINVAL, "Cannot step."};
  CHECK(g.h.request("vCont;s:p64.65") == "E.Cannot step.");
  CHECK(g.h.session().waiting() == server::Waiting::Nothing);
}

TEST_CASE("execution: the stop comes later: nothing until the server polls it") {
  GdbSetup g;
  CHECK(g.h.round_trip("vCont;c").empty());
  CHECK(g.p.running());
  CHECK(g.h.poll().empty());
  g.p.stop_with(fake::signal_stop(0x64, 0x65, SIGSEGV));
  // Picked up by the server's safety-net poll timer (no SIGCHLD in a test).
  CHECK(g.h.wait() == Packets{"T0b" + g.regs65 + "thread:p64.65;"});
}

TEST_CASE("execution: ^C and vCtrlC stop a running process with SIGINT") {
  GdbSetup g;
  CHECK(g.h.round_trip("vCont;c").empty());
  g.h.send_raw("\x03");
  CHECK(g.p.count("interrupt") == 1);
  CHECK(g.h.wait() == Packets{"T02" + gdb_expedited(0, 0, 0) + "thread:p64.64;"});

  CHECK(g.h.round_trip("vCont;c").empty());
  CHECK(g.h.request("vCtrlC") == "OK");
  CHECK(g.p.count("interrupt") == 2);
  CHECK(g.h.wait() == Packets{"T02" + gdb_expedited(0, 0, 0) + "thread:p64.64;"});
}

TEST_CASE("execution: k kills everything and answers X09") {
  SECTION("GDB") {
    GdbSetup g;
    auto first = g.p.journal;
    auto second = g.h.add_process(0xc8, {0xc8}).journal;
    CHECK(g.h.request("k") == "X09;process:64");
    CHECK(fake::count(*first, "kill") == 1);  // both processes are gone now
    CHECK(fake::count(*second, "kill") == 1);
    CHECK(g.h.server().process() == nullptr);
    CHECK(g.h.request("?") == "W00");
  }
  SECTION("no multiprocess") {
    SessionHarness h;
    auto journal = h.add_process(0x64).journal;
    CHECK(h.request("k") == "X09");
    CHECK(fake::count(*journal, "kill") == 1);
  }
}

TEST_CASE("execution: vKill with a pid kills that process only") {
  GdbSetup g;
  auto second = g.h.add_process(0xc8, {0xc8}).journal;
  CHECK(g.h.request("vKill;c8") == "OK");
  CHECK(fake::count(*second, "kill") == 1);
  CHECK(g.p.count("kill") == 0);
  CHECK(g.h.server().process_for(0xc8) == nullptr);
  CHECK(g.h.request("qfThreadInfo") == "mp64.64,p64.65");
}

TEST_CASE("execution: vKill of a process we do not debug kills nothing") {
  SECTION("multiprocess: E01, as gdbserver") {
    GdbSetup g;
    auto journal = g.p.journal;
    CHECK(g.h.request("vKill;99") == "E.No such process.");
    CHECK(fake::count(*journal, "kill") == 0);
    CHECK(g.h.server().process_for(0x64) != nullptr);
  }
  SECTION("without multiprocess the pid is GDB's placeholder: the process") {
    SessionHarness h;
    auto journal = h.add_process(0x64).journal;
    CHECK(h.request("vKill;a410") == "OK");  // 42000, GDB's pid for a target without pids
    CHECK(fake::count(*journal, "kill") == 1);
  }
}

TEST_CASE("execution: D and D with a pid detach") {
  SECTION("D") {
    GdbSetup g;
    g.p.attached = true;
    auto journal = g.p.journal;
    CHECK(g.h.request("D") == "OK");
    CHECK(fake::count(*journal, "detach") == 1);
    CHECK(g.h.server().process() == nullptr);
    CHECK(g.h.request("?") == "W00");
  }
  SECTION("D;pid of one of two") {
    GdbSetup g;
    auto second = g.h.add_process(0xc8, {0xc8}).journal;
    CHECK(g.h.request("D;c8") == "OK");
    CHECK(fake::count(*second, "detach") == 1);
    CHECK(g.p.count("detach") == 0);
    CHECK(g.h.request("D;99") == "E.No such process.");
  }
  SECTION("a backend failure") {
    GdbSetup g;
    g.p.detach_error = backend::Error{EPERM, "no"};
    CHECK(g.h.request("D") == "E.no");
    CHECK(g.h.server().process() == &g.p);
  }
}

TEST_CASE("execution: a reported fork child is held until named, let go if not") {
  SECTION("named by Hg, then detached") {
    GdbSetup g;
    auto child = std::make_unique<FakeProcess>(0x1c8, std::vector<pid_t>{0x1c8});
    auto c = child->journal;
    g.p.add_fork_child(std::move(child));
    auto fork = stop_event(StopKind::Fork, 0x64, 0x65, SIGTRAP);
    fork.child_pid = 0x1c8;
    g.p.stop_with(fork);
    CHECK(g.h.round_trip("vCont;c") == Packets{"T05fork:p1c8.1c8;" + g.regs65 + "thread:p64.65;"});
    CHECK(g.h.request("qfThreadInfo") == "mp64.64,p64.65");  // held: not listed
    CHECK(g.h.request("Hgp1c8.1c8") == "OK");
    CHECK(g.h.request("qfThreadInfo") == "mp64.64,p64.65,p1c8.1c8");
    CHECK(g.h.request("D;1c8") == "OK");
    CHECK(fake::count(*c, "detach") == 1);
  }
  SECTION("the parent detached: the client follows the child") {
    GdbSetup g;
    g.p.add_fork_child(std::make_unique<FakeProcess>(0x1c8, std::vector<pid_t>{0x1c8}));
    auto fork = stop_event(StopKind::Fork, 0x64, 0x65, SIGTRAP);
    fork.child_pid = 0x1c8;
    g.p.stop_with(fork);
    CHECK(g.h.round_trip("vCont;c").size() == 1);
    CHECK(g.h.request("D;64") == "OK");
    CHECK(g.h.request("qfThreadInfo") == "mp1c8.1c8");
    CHECK(g.h.request("qC") == "QCp1c8.1c8");
  }
  SECTION("never named: detached at the next resume") {
    GdbSetup g;
    auto child = std::make_unique<FakeProcess>(0x1c8, std::vector<pid_t>{0x1c8});
    auto c = child->journal;
    g.p.add_fork_child(std::move(child));
    auto fork = stop_event(StopKind::Fork, 0x64, 0x65, SIGTRAP);
    fork.child_pid = 0x1c8;
    g.p.stop_with(fork);
    CHECK(g.h.round_trip("vCont;c").size() == 1);
    CHECK(fake::count(*c, "detach") == 0);
    g.p.stop_with(fake::signal_stop(0x64, 0x65, SIGSEGV));
    CHECK(g.h.round_trip("vCont;c").size() == 1);
    CHECK(fake::count(*c, "detach") == 1);
    CHECK(fake::count(*c, "resume") == 0);
    CHECK(g.h.server().process_for(0x1c8) == nullptr);
  }
}

TEST_CASE("execution: a stop in the second process reports that process's thread and registers") {
  GdbSetup g;
  auto& second = g.h.add_process(0xc8, {0xc8, 0xc9});
  second.set_reg(0xc9, 16, 0x555000);
  second.stop_with(fake::signal_stop(0xc8, 0xc9, SIGSEGV));
  CHECK(g.h.round_trip("vCont;c") == Packets{"T0b" + gdb_expedited(0, 0, 0x555000) + "thread:pc8.c9;"});
  CHECK(g.p.count("pause") == 1);  // the first one stops too (all-stop)
  CHECK(g.h.request("qC") == "QCpc8.c9");
  CHECK(g.h.request("p10") == hex_le(0x555000, 8));  // the stop selected that process
}

TEST_CASE("execution: a ^C while stopped stands: the next resume stops with SIGINT") {
  GdbSetup g;
  g.h.send_raw("\x03");
  CHECK(g.h.poll().empty());  // nothing runs: nothing to answer yet
  CHECK(g.p.count("interrupt") == 0);
  CHECK(g.h.round_trip("vCont;c") == Packets{"T02" + gdb_expedited(0, 0, 0) + "thread:p64.64;"});
  CHECK(g.p.count("interrupt") == 1);
  // Answered once: the next resume runs on.
  CHECK(g.h.round_trip("vCont;c").empty());
  CHECK(g.p.count("interrupt") == 1);
}

TEST_CASE("execution: with busy polling the stop is read before the handler returns") {
  auto options = SessionHarness::default_options();
  options.busy_poll_us = 100000;  // bounds the wait only: the fake stops at the first poll
  SessionHarness h(options);
  if (h.server().busy_poll().count() == 0) {
    WARN("one CPU: the server never busy-polls here");
    return;
  }
  auto& p = h.add_process(0x64);
  p.stop_with(fake::signal_stop(0x64, 0x64, SIGSEGV));
  h.connect();
  h.wire().on_data(fake::frame("c"));  // no loop run: only the handler's own polling
  auto out = fake::split_output(h.take_written());
  CHECK(out.acks == "+");
  CHECK(out.packets == Packets{"T0b" + gdb_expedited(0, 0, 0) + "thread:64;"});
}

TEST_CASE("execution: bulk memory reads are prepared ahead, and a write drops what was prepared") {
  GdbSetup g;
  std::vector<uint8_t> block(0x3000);
  for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 13 + 1);
  g.p.map_memory(0x10000, block);
  auto hex_of = [&](size_t from, size_t n) { return fake::hex(std::string_view(reinterpret_cast<char*>(&block[from]), n)); };
  CHECK(g.h.request("m10000,1000") == hex_of(0, 0x1000));
  size_t reads = g.p.count("read_memory");  // the next block was read while the client decoded
  CHECK(g.h.request("m11000,1000") == hex_of(0x1000, 0x1000));
  CHECK(g.p.count("read_memory") == reads + 1);  // served as prepared; the one after prepared
  CHECK(g.h.request("M12000,1:ff") == "OK");
  block[0x2000] = 0xff;
  CHECK(g.h.request("m12000,1000") == hex_of(0x2000, 0x1000));  // read afresh: sees the write
}
