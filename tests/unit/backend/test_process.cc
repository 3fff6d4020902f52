// LinuxProcess against real programs (compiled at test time from test_inferiors/).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_memory.h"
#include "backend/probe/probe.h"
#include "backend/ptrace/proc_info.h"
#include "test_process_support.h"

using namespace backend;
using namespace bs_test;

namespace {

std::unique_ptr<Process> launch_ok(const LaunchOptions& o) {
  auto p = Process::launch(o);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  return std::move(p.value());
}

uint64_t pc_of(Process& p, pid_t tid) {
  auto regs = p.read_registers(tid);
  REQUIRE(regs.ok());
  return regs->pc(p.register_layout());
}

ResumePlan step_thread(pid_t tid) {
  ResumePlan plan;
  plan.threads[tid] = ResumeAction{ResumeKind::Step};
  return plan;
}

}  // namespace

TEST_CASE("launch stops at the loader entry with SIGTRAP", "[process]") {
  auto exe = inferior("simple");
  REQUIRE(!exe.empty());
  auto p = launch_ok(options_for(exe));
  CHECK(p->last_stop().kind == StopKind::Signal);
  CHECK(p->last_stop().signo == SIGTRAP);
  CHECK(!p->was_attached());
  CHECK(p->threads() == std::vector<pid_t>{p->pid()});
  auto path = p->exe_path();
  REQUIRE(path.ok());
  CHECK(*path == exe);
  // rip is inside the dynamic loader's mapping.
  uint64_t pc = pc_of(*p, p->pid());
  auto maps = p->memory_map();
  REQUIRE(maps.ok());
  std::string where;
  for (const auto& r : *maps)
    if (r.start <= pc && pc < r.end) where = r.name;
  CHECK(where.find("ld-linux") != std::string::npos);
  auto av = p->auxv();
  REQUIRE(av.ok());
  CHECK(auxv_value(*av, 9 /*AT_ENTRY*/) == symbol(exe, "_start"));
  REQUIRE(p->kill().ok());
}

TEST_CASE("breakpoint, step over it, run to exit", "[process]") {
  auto exe = inferior("simple");
  uint64_t marker = symbol(exe, "marker");
  REQUIRE(marker != 0);
  auto p = launch_ok(options_for(exe));
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, marker, 1).ok());

  // Reads hide the int3; the raw memory has it.
  uint8_t shown = 0, raw = 0;
  REQUIRE(p->read_memory(marker, {&shown, 1}).ok());
  ProcMemory direct(p->pid());
  REQUIRE(direct.read(marker, {&raw, 1}).ok());
  CHECK(raw == 0xcc);
  CHECK(shown != 0xcc);

  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Breakpoint);
  CHECK(ev->tid == p->pid());
  CHECK(pc_of(*p, p->pid()) == marker);

  // A single step from the breakpoint executes the original instruction.
  REQUIRE(p->resume(step_thread(p->pid())).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Step);
  CHECK(pc_of(*p, p->pid()) > marker);

  // Second call of marker hits again (the int3 was put back).
  REQUIRE(p->resume(continue_all()).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Breakpoint);
  // Continue straight from the breakpoint (step-over inside the backend).
  REQUIRE(p->resume(continue_all()).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 1);
  CHECK(!p->alive());
  int status;
  CHECK(::waitpid(ev->pid, &status, WNOHANG | __WALL) == -1);
}

TEST_CASE("memory writes over a breakpoint keep the int3", "[process]") {
  auto exe = inferior("simple");
  uint64_t marker = symbol(exe, "marker");
  auto p = launch_ok(options_for(exe));
  uint8_t orig[4];
  REQUIRE(p->read_memory(marker, orig).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, marker + 1, 1).ok());
  uint8_t patch[4] = {0x90, 0x91, 0x92, 0x93};
  REQUIRE(p->write_memory(marker, patch).ok());
  uint8_t back[4];
  REQUIRE(p->read_memory(marker, back).ok());
  CHECK(std::memcmp(back, patch, 4) == 0);
  ProcMemory direct(p->pid());
  uint8_t raw[4];
  REQUIRE(direct.read(marker, raw).ok());
  CHECK(raw[0] == 0x90);
  CHECK(raw[1] == 0xcc);
  REQUIRE(p->remove_breakpoint(BreakpointKind::Software, marker + 1, 1).ok());
  REQUIRE(direct.read(marker, raw).ok());
  CHECK(raw[1] == 0x91);
  // Partial read across the end of a mapping returns the readable prefix.
  auto maps = p->memory_map();
  REQUIRE(maps.ok());
  for (size_t i = 0; i + 1 < maps->size(); ++i) {
    const auto& r = (*maps)[i];
    if (r.read && (*maps)[i + 1].start != r.end) {
      std::vector<uint8_t> buf(64);
      auto n = p->read_memory(r.end - 16, buf);
      REQUIRE(n.ok());
      CHECK(*n == 16);
      break;
    }
  }
  uint8_t nothing[8];
  CHECK(!p->read_memory(0, nothing).ok());
  REQUIRE(p->kill().ok());
}

TEST_CASE("a General register read is the GETREGS part of a full read", "[process][registers]") {
  auto exe = inferior("simple");
  auto p = launch_ok(options_for(exe));
  const auto& l = p->register_layout();
  auto all = p->read_registers(p->pid());
  auto gpr = p->read_registers(p->pid(), RegisterSet::General);
  REQUIRE(all.ok());
  REQUIRE(gpr.ok());
  for (int r = 0; r < static_cast<int>(l.regs.size()); ++r) {
    INFO(l.regs[r].name);
    CHECK(gpr->valid[r] == is_general_register(r));
    if (is_general_register(r))
      CHECK(std::memcmp(gpr->bytes.data() + l.regs[r].offset, all->bytes.data() + l.regs[r].offset,
                        static_cast<size_t>(l.regs[r].bitsize / 8)) == 0);
  }
  CHECK(is_general_register(RegisterLayout::kRip));
  CHECK(is_general_register(*l.find("fs_base")));
  CHECK(is_general_register(*l.find("orig_rax")));
  CHECK_FALSE(is_general_register(*l.find("xmm0")));
  CHECK_FALSE(is_general_register(*l.find("mxcsr")));
  REQUIRE(p->kill().ok());
}

TEST_CASE("registers round-trip", "[process][registers]") {
  auto exe = inferior("simple");
  auto p = launch_ok(options_for(exe));
  const auto& l = p->register_layout();
  auto regs = p->read_registers(p->pid());
  REQUIRE(regs.ok());
  RegisterFile f = *regs;
  for (bool v : f.valid) CHECK(v);
  f.set_u64(l, 0, 0x1122334455667788ull);  // rax
  int xmm1 = *l.find("xmm1");
  for (int i = 0; i < 16; ++i) f.bytes[l.regs[xmm1].offset + i] = static_cast<uint8_t>(i + 1);
  std::optional<int> ymm2h = l.find("ymm2h");
  if (ymm2h)
    for (int i = 0; i < 16; ++i) f.bytes[l.regs[*ymm2h].offset + i] = static_cast<uint8_t>(0xa0 + i);
  REQUIRE(p->write_registers(p->pid(), f).ok());
  auto again = p->read_registers(p->pid());
  REQUIRE(again.ok());
  CHECK(again->get_u64(l, 0) == 0x1122334455667788ull);
  CHECK(std::memcmp(again->bytes.data() + l.regs[xmm1].offset, f.bytes.data() + l.regs[xmm1].offset, 16) == 0);
  if (ymm2h) {
    INFO("xstate write may fail on some kernels; the server then falls back to the FP/SSE part");
    CHECK(std::memcmp(again->bytes.data() + l.regs[*ymm2h].offset, f.bytes.data() + l.regs[*ymm2h].offset, 16) == 0);
  }
  // The whole file written back unchanged (GDB's G) keeps everything.
  REQUIRE(p->write_registers(p->pid(), *again).ok());
  auto third = p->read_registers(p->pid());
  REQUIRE(third.ok());
  CHECK(third->bytes == again->bytes);
  auto si = p->siginfo(p->pid());
  REQUIRE(si.ok());
  CHECK(si->size() == 128);
  // A fresh x87: control word 0x37f, every tag empty (full tag word, converted from FXSAVE's).
  CHECK(third->get_u64(l, *l.find("fctrl")) == 0x37f);
  CHECK(third->get_u64(l, *l.find("ftag")) == 0xffff);
  CHECK(third->get_u64(l, *l.find("mxcsr")) == 0x1f80);
  REQUIRE(p->kill().ok());
}

TEST_CASE("launch through the shell with arguments and environment", "[process]") {
  auto exe = inferior("simple");
  LaunchOptions o;
  o.argv = {exe, "a b", "it's"};
  o.startup_with_shell = true;
  o.env_set["BS_FLAG"] = "1";
  auto p = launch_ok(o);
  auto path = p->exe_path();
  REQUIRE(path.ok());
  CHECK(*path == exe);
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 13);  // argc 3 + 10

  // env_unset and a wrapper (env) without the shell.
  LaunchOptions w;
  w.argv = {exe};
  w.wrapper = {"env", "BS_FLAG=1"};
  w.startup_with_shell = false;
  auto q = launch_ok(w);
  REQUIRE(q->exe_path().ok());
  CHECK(*q->exe_path() == exe);
  REQUIRE(q->resume(continue_all()).ok());
  ev = wait_stop(*q);
  REQUIRE(ev);
  CHECK(ev->exit_status == 11);
}

// The program's environment as /proc shows it at the exec stop.
static std::vector<std::string> environment_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::vector<std::string> out;
  for (std::string kv; std::getline(f, kv, '\0');) out.push_back(kv);
  return out;
}

TEST_CASE("the environment keeps the server's order, and a replay's is exactly the recorded one", "[process]") {
  ::setenv("BS_ORDER_Z", "z", 1);   // appended: after every variable the test started with
  ::setenv("BS_ORDER_A", "a", 1);
  std::vector<std::string> expected;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("BS_ORDER_A=", 0) != 0) expected.emplace_back(*e);
  for (auto& kv : expected)
    if (kv.rfind("BS_ORDER_Z=", 0) == 0) kv = "BS_ORDER_Z=zz";   // replaced in place
  expected.push_back("BS_NEW=1");
  LaunchOptions o;
  o.argv = {inferior("simple")};
  o.startup_with_shell = false;
  o.env_set["BS_ORDER_Z"] = "zz";
  o.env_set["BS_NEW"] = "1";
  o.env_unset.insert("BS_ORDER_A");
  auto p = launch_ok(o);
  CHECK(environment_of(p->pid()) == expected);   // not sorted: the stack as without a server
  REQUIRE(p->kill().ok());

  LaunchOptions r;
  r.argv = {inferior("simple")};
  r.startup_with_shell = false;
  r.exact_environment = std::vector<std::string>{"Z=1", "A=2", "M=3"};
  auto q = launch_ok(r);
  CHECK(environment_of(q->pid()) == std::vector<std::string>{"Z=1", "A=2", "M=3"});
  REQUIRE(q->kill().ok());
  ::unsetenv("BS_ORDER_Z");
  ::unsetenv("BS_ORDER_A");
}

TEST_CASE("launching a missing program fails with code 127", "[process]") {
  LaunchOptions o;
  o.argv = {"/nonexistent/bs-no-such-program"};
  o.startup_with_shell = false;
  auto p = Process::launch(o);
  REQUIRE(!p.ok());
  CHECK(p.error().message.find("127") != std::string::npos);
  o.startup_with_shell = true;
  auto q = Process::launch(o);
  REQUIRE(!q.ok());
  CHECK(q.error().message.find("127") != std::string::npos);
}

TEST_CASE("threads: clone events and all-stop at breakpoints", "[process][threads]") {
  auto exe = inferior("threads");
  uint64_t hit = symbol(exe, "hit");
  REQUIRE(hit != 0);
  auto p = launch_ok(options_for(exe));
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, hit, 1).ok());
  int hits = 0;
  for (int round = 0; round < 10; ++round) {
    REQUIRE(p->resume(continue_all()).ok());
    auto ev = wait_stop(*p);
    REQUIRE(ev);
    if (ev->kind == StopKind::Exited) {
      CHECK(ev->exit_status == 0);
      break;
    }
    REQUIRE(ev->kind == StopKind::Breakpoint);
    ++hits;
    CHECK(ev->tid != p->pid());
    CHECK(p->has_thread(ev->tid));
    CHECK(pc_of(*p, ev->tid) == hit);
    // All-stop: every thread is in a ptrace stop.
    for (pid_t tid : p->threads()) CHECK(thread_state(p->pid(), tid) == 't');
    CHECK(p->threads().front() == p->pid());
  }
  CHECK(hits == 3);
}

TEST_CASE("signals: reported, delivered, passed", "[process][signals]") {
  auto exe = inferior("signals");
  auto p = launch_ok(options_for(exe));
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Signal);
  CHECK(ev->signo == SIGUSR1);
  auto si = p->siginfo(ev->tid);
  REQUIRE(si.ok());
  int signo;
  std::memcpy(&signo, si->data(), sizeof signo);
  CHECK(signo == SIGUSR1);
  p->set_pass_signals({SIGUSR1});
  REQUIRE(p->resume(continue_all(SIGUSR1)).ok());  // deliver this one
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 2);  // both reached the handler, the second without a stop
}

// Watchpoints and hardware breakpoints through the debug registers (where the probe sees them
// trap) and emulated in software (everywhere): the same stops either way.
void check_watch_and_hbreak(bool emulated) {
  auto exe = inferior("simple");
  uint64_t counter = symbol(exe, "global_counter");
  REQUIRE(counter != 0);
  auto p = launch_ok(options_for(exe));
  p->configure(watch_settings(emulated));
  CHECK(p->settings().watch_emulation == emulated);
  CHECK(p->hardware_slots() == 4);
  CHECK(!p->insert_breakpoint(BreakpointKind::WriteWatch, counter, 0).ok());
  REQUIRE(p->insert_breakpoint(BreakpointKind::WriteWatch, counter, 4).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p, 60);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Watchpoint);
  CHECK(ev->watch_type == WatchType::Write);
  CHECK(ev->watch_addr == counter);
  int value = 0;
  REQUIRE(p->read_memory(counter, {reinterpret_cast<uint8_t*>(&value), 4}).ok());
  CHECK(value == 1);
  REQUIRE(p->remove_breakpoint(BreakpointKind::WriteWatch, counter, 4).ok());
  // Hardware execution breakpoint on marker (second call).
  uint64_t marker = symbol(exe, "marker");
  REQUIRE(p->insert_breakpoint(BreakpointKind::Hardware, marker, 1).ok());
  uint8_t first = 0;
  REQUIRE(p->read_memory(marker, {&first, 1}).ok());
  CHECK(first != 0xcc);  // an emulated one is an int3 nobody sees
  REQUIRE(p->resume(continue_all()).ok());
  ev = wait_stop(*p, 60);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::HwBreakpoint);
  CHECK(pc_of(*p, p->pid()) == marker);
  REQUIRE(p->kill().ok());
}

TEST_CASE("watchpoint and hardware breakpoint, debug registers", "[process][hw]") {
  auto probe = probe_debug_registers();
  if (!probe.works) {
    WARN("skipped: debug registers do not trap here: " << probe.detail);
    return;
  }
  check_watch_and_hbreak(false);
}

TEST_CASE("watchpoint and hardware breakpoint, emulated", "[process][watch]") { check_watch_and_hbreak(true); }

TEST_CASE("read watchpoints: refused on debug registers, exact when emulated", "[process][watch]") {
  auto exe = inferior("simple");
  uint64_t counter = symbol(exe, "global_counter");
  auto hw = launch_ok(options_for(exe));
  auto r = hw->insert_breakpoint(BreakpointKind::ReadWatch, counter, 4);
  REQUIRE(!r.ok());
  CHECK(r.error().code == EOPNOTSUPP);
  REQUIRE(hw->kill().ok());

  // Emulated: marker() reads global_counter twice (once per call); main's `= 5` only writes it.
  auto p = launch_ok(options_for(exe));
  p->configure(watch_settings(true));
  REQUIRE(p->insert_breakpoint(BreakpointKind::ReadWatch, counter, 4).ok());
  uint64_t marker = symbol(exe, "marker");
  for (int value : {0, 5}) {
    REQUIRE(p->resume(continue_all()).ok());
    auto ev = wait_stop(*p, 60);
    REQUIRE(ev);
    REQUIRE(ev->kind == StopKind::Watchpoint);
    CHECK(ev->watch_type == WatchType::Read);
    CHECK(ev->watch_addr == counter);
    uint64_t pc = pc_of(*p, p->pid());
    CHECK(pc > marker);
    CHECK(pc < marker + 64);
    int now = -1;
    REQUIRE(p->read_memory(counter, {reinterpret_cast<uint8_t*>(&now), 4}).ok());
    CHECK(now == value);  // stopped after the read, before marker's write
  }
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p, 60);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
}

TEST_CASE("range step leaves the range with a Step stop", "[process]") {
  auto exe = inferior("simple");
  uint64_t main_addr = symbol(exe, "main");
  uint64_t marker = symbol(exe, "marker");
  auto p = launch_ok(options_for(exe));
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, main_addr, 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  REQUIRE(ev->kind == StopKind::Breakpoint);
  // Step through main's prologue until the call into marker leaves the range.
  ResumePlan plan;
  plan.threads[p->pid()] = ResumeAction{ResumeKind::RangeStep, 0, main_addr, main_addr + 0x40};
  REQUIRE(p->resume(plan).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Step);
  CHECK(pc_of(*p, p->pid()) == marker);
  REQUIRE(p->kill().ok());
}

TEST_CASE("interrupt stops a running program with SIGINT", "[process]") {
  auto exe = inferior("spin");
  auto p = launch_ok(options_for(exe));
  REQUIRE(p->resume(continue_all()).ok());
  CHECK(!p->poll_events());
  p->interrupt();
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Signal);
  CHECK(ev->signo == SIGINT);
  // Continue with no signal: the program keeps running (nothing stale delivered).
  REQUIRE(p->resume(continue_all()).ok());
  timespec ts{0, 50 * 1000000};
  ::nanosleep(&ts, nullptr);  // give it time to misbehave, not synchronisation
  CHECK(!p->poll_events());
  p->interrupt();
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->signo == SIGINT);
  pid_t pid = p->pid();
  REQUIRE(p->kill().ok());
  CHECK(::kill(pid, 0) == -1);  // reaped: no zombie
}

TEST_CASE("attach and detach leave the program running", "[process]") {
  auto exe = inferior("spin");
  pid_t child = ::fork();
  if (child == 0) {
    ::execl(exe.c_str(), exe.c_str(), nullptr);
    ::_exit(127);
  }
  // Wait until the child runs the program (its exe changes after exec).
  for (int i = 0; i < 10000; ++i) {
    auto path = read_exe_path(child);
    if (path && *path == exe) break;
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
  {
    auto p = Process::attach(child);
    REQUIRE(p.ok());
    CHECK((*p)->was_attached());
    CHECK((*p)->last_stop().signo == 0);
    CHECK(thread_state(child, child) == 't');
    uint64_t spins_addr = symbol(exe, "spins");
    uint64_t before = 0;
    REQUIRE((*p)->read_memory(spins_addr, {reinterpret_cast<uint8_t*>(&before), 8}).ok());
    REQUIRE((*p)->detach().ok());
    CHECK(!(*p)->alive());
  }
  char st = thread_state(child, child);
  INFO("state after detach: " << st);
  CHECK((st == 'R' || st == 'S'));
  CHECK(::kill(child, SIGKILL) == 0);
  int status = 0;
  CHECK(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));

  auto missing = Process::attach(999999);
  REQUIRE(!missing.ok());
  CHECK(missing.error().code == ESRCH);
}

TEST_CASE("a signal that arrives before the attach stop is what the attach reports", "[process][attach]") {
  // gdbserver keeps it as the thread's status and GDB shows "Program received signal"; it is
  // not delivered behind the client's back. Racy by nature: some attaches see SIGSTOP first.
  auto exe = inferior("sigloop");
  int reported = 0, attempts = 0;
  // About a third of attaches meet the signal on most hosts; on an AMD EPYC PVM guest, whose
  // signal delivery is slow, 100 attaches once met none: up to 20 s of attempts there.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (; reported < 2 && (attempts < 100 || std::chrono::steady_clock::now() < deadline); ++attempts) {
    pid_t child = ::fork();
    if (child == 0) {
      ::execl(exe.c_str(), exe.c_str(), nullptr);
      ::_exit(127);
    }
    for (int i = 0; i < 10000; ++i) {
      auto path = read_exe_path(child);
      if (path && *path == exe) break;
      timespec ts{0, 1000000};
      ::nanosleep(&ts, nullptr);
    }
    auto p = Process::attach(child);
    REQUIRE(p.ok());
    StopEvent first = (*p)->last_stop();
    CHECK((first.signo == 0 || first.signo == SIGUSR1));
    CHECK(first.kind == StopKind::Signal);
    if (first.signo == SIGUSR1) ++reported;
    REQUIRE((*p)->kill().ok());
  }
  INFO(attempts << " attaches");
  CHECK(reported >= 1);
}

TEST_CASE("an exit while the process is paused is reported at the next resume", "[process]") {
  // All-stop across processes pauses the others when one stops; one may exit meanwhile.
  auto exe = inferior("simple");
  auto p = launch_ok(options_for(exe));
  pid_t pid = p->pid();
  REQUIRE(p->resume(continue_all()).ok());
  // Let it finish (a zombie nobody reaped yet), then pause it as the server would.
  for (int i = 0; i < 10000 && thread_state(pid, pid) != 'Z'; ++i) {
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
  p->pause();
  CHECK(!p->alive());
  CHECK(p->exit_unreported());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 1);
  CHECK(!p->exit_unreported());
  CHECK(!p->resume(continue_all()).ok());
}

namespace {
// The forks program, its breakpoint on marker() in place, after the fork: the parent's own
// marker() call (after its child exited 0), then its exit with 3.
void finish_forks_parent(Process& p) {
  REQUIRE(p.resume(continue_all()).ok());
  auto ev = wait_stop(p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Breakpoint);
  REQUIRE(p.resume(continue_all()).ok());
  ev = wait_stop(p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 3);
}
}  // namespace

TEST_CASE("fork children run free without our breakpoints", "[process]") {
  auto exe = inferior("forks");
  uint64_t marker = symbol(exe, "marker");
  auto p = launch_ok(options_for(exe));
  p->set_pass_signals({SIGCHLD});  // as GDB does: SIGCHLD is nostop/pass
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, marker, 1).ok());
  finish_forks_parent(*p);
}

TEST_CASE("reported fork: the child is held clean, then detached", "[process][fork]") {
  auto exe = inferior("forks");
  uint64_t marker = symbol(exe, "marker");
  auto p = launch_ok(options_for(exe));
  p->set_pass_signals({SIGCHLD});
  p->set_fork_reporting(true, true);
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, marker, 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  REQUIRE(ev->kind == StopKind::Fork);
  pid_t child = ev->child_pid;
  CHECK(child > 0);
  auto children = p->take_fork_children();
  REQUIRE(children.size() == 1);
  CHECK(children[0]->pid() == child);
  CHECK(p->take_fork_children().empty());  // handed over once
  // The child's copy of marker() holds the original byte, not our int3.
  ProcMemory child_mem(child);
  uint8_t byte = 0, original = 0;
  REQUIRE(child_mem.read(marker, {&byte, 1}).ok());
  REQUIRE(p->read_memory(marker, {&original, 1}).ok());
  CHECK(byte == original);
  CHECK(byte != 0xcc);
  REQUIRE(children[0]->detach().ok());
  CHECK_FALSE(children[0]->alive());
  finish_forks_parent(*p);
}

TEST_CASE("reported fork: following the child", "[process][fork]") {
  auto exe = inferior("forks");
  uint64_t marker = symbol(exe, "marker");
  auto p = launch_ok(options_for(exe));
  p->set_pass_signals({SIGCHLD});
  p->set_fork_reporting(true, true);
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  REQUIRE(ev->kind == StopKind::Fork);
  auto children = p->take_fork_children();
  REQUIRE(children.size() == 1);
  std::unique_ptr<Process> child = std::move(children[0]);
  CHECK(child->pid() == ev->child_pid);
  CHECK(child->settings().trace_source == p->settings().trace_source);
  CHECK(child->threads() == std::vector<pid_t>{ev->child_pid});
  REQUIRE(p->detach().ok());  // the parent runs on, untraced
  REQUIRE(child->insert_breakpoint(BreakpointKind::Software, marker, 1).ok());
  REQUIRE(child->resume(continue_all()).ok());
  ev = wait_stop(*child);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Breakpoint);
  CHECK(pc_of(*child, child->pid()) == marker);
  REQUIRE(child->resume(continue_all()).ok());
  ev = wait_stop(*child);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 0);
  int status = 0;
  CHECK(::waitpid(p->pid(), &status, 0) == p->pid());  // the detached parent: ours to reap
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 3);
}

TEST_CASE("syscall catching: entry and return of the caught ones only", "[process][syscalls]") {
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "exit 4"};
  o.startup_with_shell = false;
  auto p = launch_ok(o);
  p->set_catch_syscalls(true, {SYS_exit_group});
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::SyscallEntry);
  CHECK(ev->syscall_no == SYS_exit_group);
  p->set_catch_syscalls(false, {});
  REQUIRE(p->resume(continue_all()).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 4);

  auto q = launch_ok(o);
  q->set_catch_syscalls(true, {});  // every syscall
  REQUIRE(q->resume(continue_all()).ok());
  ev = wait_stop(*q);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::SyscallEntry);
  int first = ev->syscall_no;
  REQUIRE(q->resume(continue_all()).ok());
  ev = wait_stop(*q);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::SyscallReturn);
  CHECK(ev->syscall_no == first);
  REQUIRE(q->kill().ok());
}

TEST_CASE("libraries from the r_debug walk", "[process]") {
  auto exe = inferior("simple");
  auto p = launch_ok(options_for(exe));
  uint64_t main_lm = 0;
  auto early = p->libraries(&main_lm);
  REQUIRE(early.ok());  // at the loader entry there may be nothing yet
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, symbol(exe, "main"), 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  auto libs = p->libraries(&main_lm);
  REQUIRE(libs.ok());
  CHECK(main_lm != 0);
  bool libc = false;
  for (const auto& l : *libs) libc |= l.name.find("libc.so") != std::string::npos;
  CHECK(libc);
  CHECK(!p->thread_name(p->pid()).empty());
  CHECK(p->thread_core(p->pid()) >= 0);
  REQUIRE(p->kill().ok());
}

TEST_CASE("exec after launch is an exec stop (SIGTRAP) in the new image", "[process]") {
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "exec /bin/true"};
  o.startup_with_shell = false;
  auto p = launch_ok(o);
  REQUIRE(p->resume(continue_all()).ok());
  auto ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exec);
  CHECK(ev->signo == SIGTRAP);
  CHECK(ev->exec_path.find("true") != std::string::npos);
  CHECK(p->threads() == std::vector<pid_t>{p->pid()});
  uint8_t byte;
  CHECK(p->read_memory(pc_of(*p, p->pid()), {&byte, 1}).ok());  // /proc/pid/mem reopened
  REQUIRE(p->resume(continue_all()).ok());
  ev = wait_stop(*p);
  REQUIRE(ev);
  CHECK(ev->kind == StopKind::Exited);
  CHECK(ev->exit_status == 0);
}

TEST_CASE("attach to a threaded process stops every thread", "[process][threads]") {
  auto exe = inferior("spin_threads");
  pid_t child = ::fork();
  if (child == 0) {
    ::execl(exe.c_str(), exe.c_str(), nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 10000 && list_tasks(child).size() < 3; ++i) {
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
  REQUIRE(list_tasks(child).size() == 3);
  auto p = Process::attach(child);
  REQUIRE(p.ok());
  CHECK((*p)->threads().size() == 3);
  CHECK((*p)->threads().front() == child);
  for (pid_t tid : (*p)->threads()) CHECK(thread_state(child, tid) == 't');
  // Run and interrupt once, then let it go.
  REQUIRE((*p)->resume(continue_all()).ok());
  (*p)->interrupt();
  auto ev = wait_stop(**p);
  REQUIRE(ev);
  CHECK(ev->signo == SIGINT);
  for (pid_t tid : (*p)->threads()) CHECK(thread_state(child, tid) == 't');
  REQUIRE((*p)->detach().ok());
  for (pid_t tid : list_tasks(child)) {
    char st = thread_state(child, tid);
    CHECK((st == 'R' || st == 'S'));
  }
  ::kill(child, SIGKILL);
  int status = 0;
  CHECK(::waitpid(child, &status, 0) == child);
}
