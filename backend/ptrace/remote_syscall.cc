#include "backend/ptrace/remote_syscall.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "backend/ptrace/syscall_stop_kind.h"
#include "backend/ptrace/thread_signal.h"

namespace backend::patch {

namespace {

// Resumes tid with PTRACE_SYSCALL until its next system-call stop; other signals are held
// back in `later`. false: it is gone, or stopped otherwise (an event).
bool to_next_syscall_stop(pid_t tid, std::vector<int>& later) {
  for (int tries = 0; tries < 32; ++tries) {
    if (::ptrace(PTRACE_SYSCALL, tid, nullptr, nullptr) != 0) return false;
    int status = 0;
    while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
    if (!WIFSTOPPED(status)) return false;
    if (WSTOPSIG(status) == (SIGTRAP | 0x80)) return true;
    if ((status >> 16) != 0) return false;
    if (WSTOPSIG(status) != SIGTRAP) later.push_back(WSTOPSIG(status));
  }
  return false;
}

bool syscall_insn_before(const ProcMemory& mem, uint64_t pc) {
  uint8_t code[2] = {};
  auto n = mem.read(pc - 2, code);
  return n && *n == 2 && code[0] == 0x0f && code[1] == 0x05;
}

void set_args(user_regs_struct& regs, const std::array<uint64_t, 6>& args) {
  regs.rdi = args[0];
  regs.rsi = args[1];
  regs.rdx = args[2];
  regs.r10 = args[3];
  regs.r8 = args[4];
  regs.r9 = args[5];
}

}  // namespace

Result<int64_t> inject_syscall(pid_t pid, pid_t tid, const ProcMemory& mem, long nr, std::array<uint64_t, 6> args,
                               uint64_t at) {
  user_regs_struct saved{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved) != 0) return errno_error("PTRACE_GETREGS");
  const uint64_t where = at ? at : saved.rip;
  uint8_t orig[2];
  auto got = mem.read(where, orig);
  if (!got || *got != 2) return Error{EIO, "cannot read the code at the thread's pc"};
  static constexpr uint8_t kSyscall[2] = {0x0f, 0x05};
  if (auto w = mem.write(where, kSyscall); !w || *w != 2) return Error{EIO, "cannot write the code at the thread's pc"};
  user_regs_struct regs = saved;
  regs.rip = where;
  regs.rax = static_cast<uint64_t>(nr);
  regs.orig_rax = static_cast<uint64_t>(-1);  // no syscall restart for this one
  set_args(regs, args);
  std::vector<int> signals;
  bool stale_trap_dropped = false;
  Result<int64_t> result = Error{EIO, "the injected system call did not complete"};
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) == 0) {
    for (int tries = 0; tries < 32; ++tries) {
      if (::ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr) != 0) break;
      int status = 0;
      while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
      if (!WIFSTOPPED(status)) {
        result = Error{ESRCH, "the thread exited during an injected system call"};
        return result;
      }
      int sig = WSTOPSIG(status);
      if (sig == SIGTRAP && (status >> 16) == 0) {
        user_regs_struct after{};
        if (::ptrace(PTRACE_GETREGS, tid, nullptr, &after) != 0) break;
        // A SIGTRAP that was pending before the step (the one after execve, when the thread has
        // not run yet) stops it before anything executed: dropped, as a resume would drop it.
        // The kernel's return from execve rewrote rax meanwhile: the registers are set again.
        if (after.rip == where && !stale_trap_dropped) {
          stale_trap_dropped = true;
          if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0) break;
          continue;
        }
        if (after.rip == where + 2) result = static_cast<int64_t>(after.rax);
        break;
      }
      if (sig != SIGTRAP && sig != (SIGTRAP | 0x80)) signals.push_back(sig);  // suppressed now, queued again below
    }
  }
  (void)mem.write(where, orig);
  ::ptrace(PTRACE_SETREGS, tid, nullptr, &saved);
  for (int sig : signals) (void)signal_thread(pid, tid, sig);
  return result;
}

Result<int64_t> inject_syscall_at_stop(pid_t pid, pid_t tid, const ProcMemory& mem, long nr,
                                       std::array<uint64_t, 6> args, uint64_t at) {
  SyscallStopKind kind = syscall_stop_kind(tid);
  if (kind == SyscallStopKind::Other) return inject_syscall(pid, tid, mem, nr, args, at);
  user_regs_struct saved{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved) != 0) return errno_error("PTRACE_GETREGS");
  // An exit stop whose pc is not after a `syscall` (rt_sigreturn went elsewhere) gets one
  // written at `at` (else the pc) for the time of ours.
  uint64_t where = saved.rip - 2;
  uint8_t orig[2] = {};
  bool written = false;
  if (!syscall_insn_before(mem, saved.rip)) {
    static constexpr uint8_t kSyscall[2] = {0x0f, 0x05};
    where = at ? at : saved.rip;
    auto got = mem.read(where, orig);
    if (kind == SyscallStopKind::Entry || !got || *got != 2) return Error{EIO, "no syscall instruction before the pc"};
    if (auto w = mem.write(where, kSyscall); !w || *w != 2) return Error{EIO, "cannot write the code at the pc"};
    written = true;
  }
  std::vector<int> later;
  Result<int64_t> result = Error{EIO, "the injected system call did not complete"};
  user_regs_struct regs = saved;
  set_args(regs, args);
  bool ok = false;
  if (kind == SyscallStopKind::Entry) {
    // The pending call becomes ours; its exit stop has our result. Then the instruction again:
    // the program's call comes to its entry stop anew.
    regs.orig_rax = static_cast<uint64_t>(nr);
    if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) == 0 && to_next_syscall_stop(tid, later)) {
      user_regs_struct after{};
      if (::ptrace(PTRACE_GETREGS, tid, nullptr, &after) == 0) result = static_cast<int64_t>(after.rax);
      user_regs_struct again = saved;
      again.rip -= 2;
      again.rax = saved.orig_rax;
      ok = ::ptrace(PTRACE_SETREGS, tid, nullptr, &again) == 0 && to_next_syscall_stop(tid, later) &&
           syscall_stop_kind(tid) == SyscallStopKind::Entry;
    }
  } else {
    // Back to the instruction with our call's number: its entry stop, its exit stop.
    regs.rip = where;
    regs.rax = static_cast<uint64_t>(nr);
    if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) == 0 && to_next_syscall_stop(tid, later) &&
        syscall_stop_kind(tid) == SyscallStopKind::Entry && to_next_syscall_stop(tid, later)) {
      user_regs_struct after{};
      if (::ptrace(PTRACE_GETREGS, tid, nullptr, &after) == 0) result = static_cast<int64_t>(after.rax);
      ok = true;
    }
  }
  if (written) (void)mem.write(where, orig);
  ::ptrace(PTRACE_SETREGS, tid, nullptr, &saved);
  for (int sig : later) (void)signal_thread(pid, tid, sig);
  if (!ok) return Error{EIO, "the thread did not come back to its system-call stop"};
  return result;
}

std::optional<uint64_t> free_range_near(const std::vector<std::pair<uint64_t, uint64_t>>& used, uint64_t lo,
                                        uint64_t hi, uint64_t size) {
  constexpr uint64_t kPage = 4096;
  constexpr uint64_t kReach = (uint64_t{1} << 31) - (uint64_t{1} << 20);  // rel32 with a 1 MiB margin
  constexpr uint64_t kLowest = 0x10000;                                    // mmap_min_addr
  constexpr uint64_t kHighest = 0x7ffffffff000;
  if (hi < lo || size == 0 || hi - lo + size >= kReach) return std::nullopt;
  uint64_t win_lo = hi > kReach ? hi - kReach : 0;
  win_lo = std::max(win_lo, kLowest);
  uint64_t win_hi = std::min(lo + kReach, kHighest);
  std::vector<std::pair<uint64_t, uint64_t>> gaps;
  uint64_t prev = 0;
  for (const auto& [s, e] : used) {
    if (s > prev) gaps.emplace_back(prev, s);
    prev = std::max(prev, e);
  }
  if (prev < kHighest) gaps.emplace_back(prev, kHighest);
  std::optional<uint64_t> best;
  uint64_t best_dist = UINT64_MAX;
  for (auto [g0, g1] : gaps) {
    g0 = std::max(g0, win_lo);
    g1 = std::min(g1, win_hi);
    g0 = (g0 + kPage - 1) & ~(kPage - 1);
    g1 &= ~(kPage - 1);
    if (g1 <= g0 || g1 - g0 < size) continue;
    if (g0 < lo) {  // the highest spot below lo
      uint64_t a = (std::min(g1, lo) - size) & ~(kPage - 1);
      if (a >= g0 && a + size <= g1 && lo - a < best_dist) best = a, best_dist = lo - a;
    }
    if (g1 > hi) {  // the lowest spot above hi: only when nothing below is free
      constexpr uint64_t kAbove = uint64_t{1} << 48;
      uint64_t a = std::max(g0, (hi + kPage - 1) & ~(kPage - 1));
      if (a + size <= g1 && kAbove + (a - hi) < best_dist) best = a, best_dist = kAbove + (a - hi);
    }
  }
  return best;
}

std::optional<uint64_t> free_range_below_clear(const std::vector<MemoryRegion>& maps, uint64_t lo, uint64_t hi,
                                               uint64_t size, bool keep_clear_only) {
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (const auto& m : maps) used.emplace_back(m.start, m.end);
  std::sort(used.begin(), used.end());
  auto away = used;
  if (lo > kKeepClear) away.emplace_back(lo - kKeepClear, lo);
  std::sort(away.begin(), away.end());
  auto at = free_range_near(away, lo, hi, size);
  if (!at && !keep_clear_only) at = free_range_near(used, lo, hi, size);
  return at;
}

}  // namespace backend::patch
