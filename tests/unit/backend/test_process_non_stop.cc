// LinuxProcess in non-stop mode against real programs: the leader that leaves with
// pthread_exit while another thread runs (it has no wait status of its own), and a process
// killed from outside while the client knows it stopped.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "backend/linux/linux_process.h"
#include "test_process_support.h"

using namespace backend;
using namespace bs_test;

namespace {

std::unique_ptr<Process> launch_non_stop(const std::string& exe, bool thread_events) {
  auto p = Process::launch(options_for(exe));
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  std::unique_ptr<Process> proc = std::move(p.value());
  REQUIRE(proc->set_non_stop(true).ok());
  proc->set_thread_events(thread_events);
  return proc;
}

bool listed(Process& p, pid_t tid) {
  auto threads = p.threads();
  return std::find(threads.begin(), threads.end(), tid) != threads.end();
}

}  // namespace

TEST_CASE("non-stop: a leader gone with pthread_exit is an exited thread, off the list", "[process][non-stop]") {
  auto exe = inferior("leader_exit");
  uint64_t after = symbol(exe, "after_leader_exit");
  REQUIRE(after != 0);
  auto p = launch_non_stop(exe, true);
  pid_t pid = p->pid();
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, after, 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  std::vector<StopKind> kinds;
  std::optional<StopEvent> hit;
  bool leader_exit_told = false;
  while (!hit) {
    auto ev = wait_stop(*p);
    REQUIRE(ev);
    kinds.push_back(ev->kind);
    if (ev->kind == StopKind::ThreadCreated) {
      ResumePlan plan;  // a new thread waits stopped for the client's resume
      plan.threads[ev->tid] = ResumeAction{ResumeKind::Continue};
      REQUIRE(p->resume(plan).ok());
    } else if (ev->kind == StopKind::ThreadExited) {
      CHECK(ev->tid == pid);
      leader_exit_told = true;
    } else {
      REQUIRE(ev->kind == StopKind::Breakpoint);
      hit = ev;
    }
  }
  // The thread saw the leader exited before it hit: the leader's exit is told first, and at
  // the stop the leader is no longer a thread of the process.
  CHECK(leader_exit_told);
  CHECK(hit->tid != pid);
  CHECK_FALSE(listed(*p, pid));
  CHECK_FALSE(p->has_thread(pid));
  CHECK(p->stopped_threads().size() == 1);
  REQUIRE(p->resume(continue_all()).ok());
  auto end = wait_stop(*p);
  REQUIRE(end);
  CHECK(end->kind == StopKind::Exited);
  CHECK(end->exit_status == 5);
}

TEST_CASE("non-stop: only the leader resumed, it leaves with pthread_exit: no resumed thread is left",
          "[process][non-stop]") {
  auto exe = inferior("leader_exit");
  uint64_t ready = symbol(exe, "ready");
  REQUIRE(ready != 0);
  auto p = launch_non_stop(exe, false);
  pid_t pid = p->pid();
  REQUIRE(p->insert_breakpoint(BreakpointKind::Software, ready, 1).ok());
  REQUIRE(p->resume(continue_all()).ok());
  auto hit = wait_stop(*p);  // the new thread at ready(); the leader runs on to pthread_exit
  REQUIRE(hit);
  REQUIRE(hit->kind == StopKind::Breakpoint);
  REQUIRE(hit->tid != pid);
  auto none = wait_stop(*p);
  REQUIRE(none);
  CHECK(none->kind == StopKind::NoResumed);
  CHECK_FALSE(p->running());
  CHECK_FALSE(p->has_thread(pid));
  CHECK(p->threads() == std::vector<pid_t>{hit->tid});
  REQUIRE(p->kill().ok());
}

TEST_CASE("non-stop: stopped all over and killed from outside, a process keeps its stop's registers and tells its end once resumed",
          "[process][non-stop]") {
  // gdbserver's way, which GDB in all-stop over non-stop relies on: it reads the registers of
  // the threads it knows stopped before it resumes anything (gdb.multi/multi-kill.exp).
  auto p = launch_non_stop(inferior("spin"), false);
  pid_t pid = p->pid();
  REQUIRE(p->resume(continue_all()).ok());
  ResumePlan stop;
  stop.others = ResumeAction{ResumeKind::Stop};
  REQUIRE(p->resume(stop).ok());
  auto stopped = wait_stop(*p);
  REQUIRE(stopped);
  REQUIRE(stopped->kind == StopKind::Signal);
  auto before = p->read_registers(pid, RegisterSet::General);
  REQUIRE(before.ok());
  REQUIRE(::kill(pid, SIGKILL) == 0);
  for (int i = 0; i < 1000 && thread_state(pid, pid) != 'Z'; ++i) ::usleep(1000);  // polls a condition
  REQUIRE(thread_state(pid, pid) == 'Z');
  CHECK_FALSE(p->poll_events());  // not waited for while the client knows it stopped
  auto after = p->read_registers(pid, RegisterSet::All);
  REQUIRE(after.ok());
  CHECK(after->pc(p->register_layout()) == before->pc(p->register_layout()));
  REQUIRE(p->resume(continue_all()).ok());
  auto end = wait_stop(*p);
  REQUIRE(end);
  CHECK(end->kind == StopKind::Killed);
  CHECK(end->signo == SIGKILL);
}
