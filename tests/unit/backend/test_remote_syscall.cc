// inject_syscall_at_stop (backend/ptrace/remote_syscall.h): a system call run in a traced child
// from its syscall-entry and syscall-exit stops, after which the child's own call goes on as if
// nothing had happened (its result, its registers).
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstddef>

#include "backend/ptrace/proc_memory.h"
#include "backend/ptrace/remote_syscall.h"

using backend::ProcMemory;

namespace {

// The child asks for its parent's pid with a raw system call and exits 0 when the answer is
// right: the call the tracer stops at and injects around.
pid_t start_child() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    ::raise(SIGSTOP);
    long r = ::syscall(SYS_getppid);
    ::_exit(r == ::getppid() ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL));
  return pid;
}

// On to the next syscall stop of getppid (entry first, then its exit).
bool to_getppid_stop(pid_t pid) {
  for (int i = 0; i < 64; ++i) {
    if (::ptrace(PTRACE_SYSCALL, pid, nullptr, nullptr) != 0) return false;
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFSTOPPED(status)) return false;
    if (WSTOPSIG(status) != (SIGTRAP | 0x80)) continue;
    errno = 0;
    long nr = ::ptrace(PTRACE_PEEKUSER, pid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
    if (nr == SYS_getppid) return true;
  }
  return false;
}

int finish(pid_t pid) {
  ::ptrace(PTRACE_CONT, pid, nullptr, nullptr);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("remote syscall: injected at an entry stop and at an exit stop, the program's call unharmed", "[remote_syscall]") {
  pid_t pid = start_child();
  ProcMemory mem(pid);
  REQUIRE(to_getppid_stop(pid));  // its entry
  user_regs_struct before{};
  REQUIRE(::ptrace(PTRACE_GETREGS, pid, nullptr, &before) == 0);
  auto r = backend::patch::inject_syscall_at_stop(pid, pid, mem, SYS_getpid, {0, 0, 0, 0, 0, 0});
  REQUIRE(r);
  CHECK(*r == pid);
  user_regs_struct after{};
  REQUIRE(::ptrace(PTRACE_GETREGS, pid, nullptr, &after) == 0);
  CHECK(after.rip == before.rip);
  CHECK(after.orig_rax == SYS_getppid);
  CHECK(after.rax == before.rax);
  // Still at getppid's entry: the next stop is its exit, with the right answer.
  REQUIRE(::ptrace(PTRACE_SYSCALL, pid, nullptr, nullptr) == 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  REQUIRE(WIFSTOPPED(status));
  REQUIRE(WSTOPSIG(status) == (SIGTRAP | 0x80));
  REQUIRE(::ptrace(PTRACE_GETREGS, pid, nullptr, &before) == 0);
  CHECK(static_cast<long>(before.rax) == ::getpid());
  // At the exit stop: ours runs, then the registers (getppid's result) are as they were.
  r = backend::patch::inject_syscall_at_stop(pid, pid, mem, SYS_gettid, {0, 0, 0, 0, 0, 0});
  REQUIRE(r);
  CHECK(*r == pid);
  REQUIRE(::ptrace(PTRACE_GETREGS, pid, nullptr, &after) == 0);
  CHECK(after.rip == before.rip);
  CHECK(after.rax == before.rax);
  CHECK(finish(pid) == 0);
}
