// Emulated watchpoints by page protection, in replays (backend/points/page_watch.h says why it
// holds there): the watched pages are protected while the lone thread runs on; an access to
// them stops it with SIGSEGV, the pages are opened for one checked step of that instruction
// (WatchEmulator decides whether it was a hit) and protected again. A system call the kernel
// runs for real that may touch them runs with them open. Whatever does not fit (threads, a
// client step, a diverted or diverged replay, the stack, a control-flow instruction that
// writes there, an injection that fails) leaves the watch to checked steps, as before.
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/remote_syscall.h"
#include "backend/ptrace/thread_signal.h"

namespace backend {

namespace {
// A rep string instruction stepped one iteration at a time: past this many, given up on.
constexpr int kMaxStepsPerFault = 1 << 16;
// A hot page (PageWatch): faults in a row, each within this many ring bytes (4 a branch) of
// the protection; the first stretch of checked steps and the longest.
constexpr int kHotFaults = 16;
constexpr uint64_t kHotRingBytes = 64;
constexpr uint64_t kFirstCooldown = 1024, kLongestCooldown = 1 << 16;
}  // namespace

bool LinuxProcess::page_watch_wanted(const LinuxThread& t, bool continuing) const {
  return settings_.page_watch && settings_.watch_emulation && watch_.active() && continuing && interceptor_ &&
         interceptor_->syscalls_emulated() && page_.refused.empty() && threads_.size() == 1 && !non_stop_ &&
         !t.overlaid() && !t.lifted_step && !t.signal_entry && !t.trace_steps && !t.watch_step && !t.watch_hit &&
         (t.in<run::Traced>() || t.in<run::Normal>() || t.in<run::WatchStep>());
}

bool LinuxProcess::set_page_protection(LinuxThread& t, const PageProtection& p, bool protect) {
  if (!p.changes()) return true;
  // Not at the pc, which may be in a stub area (shared with the server: not writable there).
  uint64_t site = stepper_.patcher() ? stepper_.patcher()->syscall_site() : 0;
  auto r = patch::inject_syscall_at_stop(pid_, t.tid, mem_, SYS_mprotect,
                                         {p.lo, p.hi - p.lo, static_cast<uint64_t>(protect ? p.protect : p.original), 0, 0, 0},
                                         site);
  if (r && *r == 0) return true;
  page_.refused = r ? fmt::format("mprotect of the watched pages failed ({})", *r)
                    : fmt::format("mprotect of the watched pages could not run: {}", r.error().message);
  log("process {}: watchpoints by checked steps from here: {}", pid_, page_.refused);
  return false;
}

bool LinuxProcess::sync_page_watch(LinuxThread& t, bool continuing) {
  if (page_.held_open && t.in_syscall) return true;  // the call the pages are open for runs now
  std::optional<PageProtection> want;
  bool wanted = page_watch_wanted(t, continuing);
  if (wanted && page_.cool_steps > 0) {  // a hot page: checked steps for a while
    --page_.cool_steps;
    wanted = false;
  }
  if (wanted) {
    auto ranges = watch_.ranges();
    if (!page_.plan || page_.maps_stale || ranges != page_.planned_for) {
      if (page_.armed && !page_.maps_stale) {
        // The maps show the protection in place, not the program's: plan with the pages open.
        if (!set_page_protection(t, *page_.armed, false)) return true;
        page_.armed.reset();
      }
      user_regs_struct gp{};
      auto maps = read_memory_map(pid_);
      if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return false;
      page_.plan = maps ? plan_page_protection(ranges, *maps, gp.rsp)
                        : Result<PageProtection>(Error{EIO, "cannot read the memory map"});
      page_.planned_for = std::move(ranges);
      page_.maps_stale = false;
      if (!*page_.plan) log("process {}: watchpoints by checked steps: {}", pid_, page_.plan->error().message);
    }
    if (*page_.plan) want = **page_.plan;
  }
  page_.held_open = false;
  if (want == page_.armed) return true;
  if (page_.armed) {
    if (!set_page_protection(t, *page_.armed, false)) return true;
    page_.armed.reset();
  }
  if (want && page_.refused.empty() && set_page_protection(t, *want, true)) {
    page_.armed = want;
    page_.head_at_arm = stepper_.patcher() ? stepper_.patcher()->ring_head(t.tid) : 0;
    log("process {}: watched pages {:#x}-{:#x} protected ({} faults checked, {} system calls run open so far)", pid_,
        want->lo, want->hi, page_.faults, page_.opened_for_syscalls);
  }
  return true;
}

void LinuxProcess::page_watch_syscall_entry(LinuxThread& t) {
  if (!settings_.page_watch) return;
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return;
  long nr = static_cast<long>(gp.orig_rax);
  if (nr == -1) return;  // emulated: the kernel skips it
  if (!page_.armed) {
    // A plan that found nothing to protect may find it after a mapping call.
    if (syscall_changes_mappings(nr)) page_.maps_stale = true;
    return;
  }
  const uint64_t args[6] = {gp.rdi, gp.rsi, gp.rdx, gp.r10, gp.r8, gp.r9};
  if (!syscall_may_touch(*page_.armed, nr, std::span<const uint64_t, 6>(args))) return;
  if (!set_page_protection(t, *page_.armed, false)) return;
  ++page_.opened_for_syscalls;
  log("process {}: watched pages opened for system call {}", pid_, nr);
  page_.armed.reset();
  page_.held_open = true;  // no user code runs until its exit stop: nothing to step meanwhile
  page_.maps_stale = true;
}

// t, stopped on the open pages in the middle of a free run, goes on by checked steps.
void LinuxProcess::page_watch_to_steps(LinuxThread& t) {
  stepper_.settle(t);  // out of the stubs, plans committed: checked steps run the program's code
  set_mode(t, run::Normal{});
  if (stopping()) return;
  if (stepper_.traced(t.tid)) stepper_.continue_traced(t, 0);
  else resume_thread(t, 0);
}

bool LinuxProcess::page_fault(LinuxThread& t) {
  if (!page_.armed) return false;
  siginfo_t si{};
  if (::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si) != 0) return false;
  if (si.si_signo != SIGSEGV || si.si_code != SEGV_ACCERR ||
      !page_.armed->contains(reinterpret_cast<uint64_t>(si.si_addr)))
    return false;
  ++page_.faults;
  PageProtection p = *page_.armed;
  uint64_t head = stepper_.patcher() ? stepper_.patcher()->ring_head(t.tid) : 0;
  // Unknown (protected while no ring was in use: after checked steps) counts as neither.
  if (page_.head_at_arm && head) {
    bool hot = head >= page_.head_at_arm && head - page_.head_at_arm < kHotRingBytes;
    page_.hot_faults = hot ? page_.hot_faults + 1 : 0;
    if (!hot) page_.cooldown = 0;
  }
  if (!set_page_protection(t, p, false)) return false;  // the program's own SIGSEGV, then
  page_.armed.reset();
  // A control-flow instruction (a call pushing there) would be a branch the count must see:
  // the watch goes back to checked steps, which count each one.
  if (auto insn = code_cache_.insn_at(get_pc(t.tid)); !insn || insn->second) {
    page_.refused = "a control-flow instruction accesses the watched pages";
    log("process {}: watchpoints by checked steps from here: {}", pid_, page_.refused);
    page_watch_to_steps(t);
    return true;
  }
  std::optional<WatchHit> hit;
  uint64_t pc = 0;
  for (int steps = 0; steps < kMaxStepsPerFault && !hit; ++steps) {
    user_regs_struct gp{};
    if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return true;  // gone: its exit tells
    if (steps > 0 && gp.rip != pc) break;  // done (a rep string stays at its pc until it is)
    pc = gp.rip;
    WatchEmulator::Step step = watch_.prepare(gp, true, watch_reader_);
    if (::ptrace(PTRACE_SINGLESTEP, t.tid, nullptr, nullptr) != 0) return true;
    int status = 0;
    while (::waitpid(t.tid, &status, __WALL) < 0 && errno == EINTR) {}
    if (!WIFSTOPPED(status) || (status >> 16) != 0 || WSTOPSIG(status) != SIGTRAP) {
      // Something else came first (its exit, a signal, a fault of the program's own): the
      // dispatcher takes it at the next poll; the pages stay open until the thread runs again.
      t.stashed = true;
      stashed_.emplace_back(t.tid, status);
      wants_poll_ = true;
      return true;
    }
    hit = watch_.check(step, watch_reader_);
  }
  if (hit) {
    log("process {}: a fault on the watched pages hit the watchpoint at {:#x} ({} faults)", pid_, hit->addr, page_.faults);
    t.watch_hit = hit;  // reported by resume_thread, the pages open until the next run
    resume_thread(t, 0);
    return true;
  }
  if (page_.hot_faults >= kHotFaults) {
    // Written every few branches: checked steps are cheaper for a while (the page stays open).
    page_.hot_faults = 0;
    page_.cooldown = page_.cooldown ? std::min(page_.cooldown * 2, kLongestCooldown) : kFirstCooldown;
    page_.cool_steps = page_.cooldown;
    log("process {}: the watched pages are written every few branches: checked steps for {} stops", pid_,
        page_.cooldown);
    page_watch_to_steps(t);
    return true;
  }
  if (set_page_protection(t, p, true)) {
    page_.armed = p;
    page_.head_at_arm = head;
  }
  if (!stopping()) resume_thread(t, 0);
  return true;
}

void LinuxProcess::restore_pages_into(pid_t child, const ProcMemory& mem) const {
  if (!page_.armed || !page_.armed->changes()) return;
  const PageProtection& p = *page_.armed;
  (void)patch::inject_syscall(child, child, mem, SYS_mprotect,
                              {p.lo, p.hi - p.lo, static_cast<uint64_t>(p.original), 0, 0, 0});
}

}  // namespace backend
