// LinuxProcess's per-thread options (QThreadOptions) against a real program, in all-stop and
// non-stop: a thread with the clone option reports its clone with the new thread left
// stopped; a thread with the exit option reports its exit; a thread without either reports
// neither (test_inferiors/clone_exit.c: main starts two threads one after the other, sees each
// one's exit reaped, exits 3; threads.c: three threads at once, exits 0).
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>

#include "backend/linux/linux_process.h"
#include "test_process_support.h"

using namespace backend;
using namespace bs_test;

namespace {

std::unique_ptr<Process> launch(bool non_stop, const std::string& program = "clone_exit") {
  auto p = Process::launch(options_for(inferior(program)));
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  std::unique_ptr<Process> proc = std::move(p.value());
  if (non_stop) REQUIRE(proc->set_non_stop(true).ok());
  return proc;
}

bool listed(Process& p, pid_t tid) {
  auto threads = p.threads();
  return std::find(threads.begin(), threads.end(), tid) != threads.end();
}

// Resumes every stopped thread (non-stop: the plan's `others` is for the stopped ones).
void resume_all(Process& p) {
  auto r = p.resume(continue_all());
  INFO((r ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

}  // namespace

TEST_CASE("thread options: clone and exit events of the threads that asked", "[process][thread-options]") {
  bool non_stop = GENERATE(false, true);
  // threads.c exits as soon as its last thread is joined: that thread's exit and the
  // process's come together, the thread's first.
  auto [program, threads, status] = GENERATE(std::tuple{"clone_exit", 2u, 3}, std::tuple{"threads", 3u, 0});
  INFO((non_stop ? "non-stop " : "all-stop ") << program);
  auto p = launch(non_stop, program);
  pid_t pid = p->pid();
  CHECK(p->thread_options(pid) == ThreadOptions{});
  p->set_thread_options(pid, ThreadOptions{true, false});  // main: its clones
  resume_all(*p);
  std::set<pid_t> cloned, exited;
  for (;;) {
    auto ev = wait_stop(*p);
    REQUIRE(ev);
    if (ev->kind == StopKind::Clone) {
      CHECK(ev->tid == pid);
      pid_t child = ev->child_pid;
      CHECK(child != pid);
      CHECK(listed(*p, child));
      // The new thread never ran: stopped (for the client too) until it is resumed; it starts
      // without options of its own.
      CHECK(thread_state(pid, child) == 't');
      CHECK_FALSE(p->thread_running(child));
      CHECK(p->thread_options(child) == ThreadOptions{});
      p->set_thread_options(child, ThreadOptions{false, true});  // the new thread: its exit
      cloned.insert(child);
      resume_all(*p);  // non-stop: the stopped ones, main and the new thread
    } else if (ev->kind == StopKind::ThreadExited) {
      CHECK(cloned.count(ev->tid));
      CHECK(ev->exit_status == 0);
      CHECK_FALSE(listed(*p, ev->tid));
      exited.insert(ev->tid);
      if (!non_stop) resume_all(*p);  // non-stop: the others ran on
    } else {
      REQUIRE(ev->kind == StopKind::Exited);
      CHECK(ev->exit_status == status);
      break;
    }
  }
  CHECK(cloned.size() == threads);
  CHECK(exited == cloned);
}

TEST_CASE("thread options: without them a clone and an exit are not reported", "[process][thread-options]") {
  bool non_stop = GENERATE(false, true);
  INFO((non_stop ? "non-stop" : "all-stop"));
  auto p = launch(non_stop);
  // Options cleared again (GDB's ";0" before each resume) report nothing.
  p->set_thread_options(p->pid(), ThreadOptions{true, true});
  p->set_thread_options(p->pid(), ThreadOptions{});
  resume_all(*p);
  auto end = wait_stop(*p);
  REQUIRE(end);
  CHECK(end->kind == StopKind::Exited);
  CHECK(end->exit_status == 3);
}
