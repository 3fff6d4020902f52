// LinuxProcess's glue to WatchEmulator (emulated watchpoints): the checked step prepared before
// a thread runs, or its run ahead to the next instruction that needs a check, and the event of
// a hit.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "backend/linux/linux_process.h"

namespace backend {

StopEvent LinuxProcess::watch_event(pid_t tid, const WatchHit& hit) const {
  StopEvent ev = make_event(StopKind::Watchpoint, tid, SIGTRAP);
  ev.watch_addr = hit.addr;
  ev.watch_type = hit.kind == HwKind::Write ? WatchType::Write
                  : hit.kind == HwKind::Read ? WatchType::Read : WatchType::Access;
  return ev;
}

// Before t runs while emulated watchpoints are set: work out what the instruction about to run
// accesses (a syscall stepped through its entry and exit stops keeps the check made before
// it), or, for the lone thread of a process, how far it may run unchecked: to an int3 at the
// first instruction that needs a check. (Another thread could meet that int3 and run the
// instruction under it unchecked, so threaded processes always step.)
LinuxProcess::WatchRun LinuxProcess::prepare_watch_step(LinuxThread& t, int signo) {
  if (t.watch_step && t.in_syscall) return WatchRun::Step;
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return WatchRun::Gone;
  if (signo == 0 && t.in<run::WatchStep>() && !t.overlaid() && threads_.size() == 1) {
    RunAhead ahead = watch_.run_ahead(gp, code_reader_);
    // Record/replay: never past a cpuid, rdrand... (its block ends there): a step takes it.
    if (interceptor_)
      if (auto b = code_cache_.block_at(gp.rip); b && b->end.kind == FlowKind::Trap && b->end.addr < ahead.stop)
        ahead.stop = b->end.addr;
    if (ahead.stop != gp.rip) {
      stepper_.arm(t, ahead.stop);
      if (t.armed == ahead.stop) {
        t.watch_step.reset();
        return WatchRun::Ahead;
      }
    }
  }
  stepper_.arm(t, 0);
  t.watch_step = watch_.prepare(gp, signo == 0, watch_reader_);
  return WatchRun::Step;
}

// A branch that ends a run ahead, emulated instead of stepped when what it accesses (a call's
// push, a ret's pop, an indirect target's load) is known and misses every watched region:
// one stop per straight-line run instead of two.
bool LinuxProcess::watch_emulate_flow(LinuxThread& t, uint64_t addr) {
  auto insn = code_cache_.insn_at(addr);
  if (!insn || !insn->second || !flow_is_emulatable(insn->second->kind)) return false;
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return false;
  WatchEmulator::Step step = watch_.prepare(gp, true, watch_reader_);
  if (!step.exact) return false;
  for (const auto& access : step.accesses)
    if (watch_.touches(access)) return false;
  auto out = stepper_.emulate(t, *insn->second, gp);
  if (!out) return false;
  stepper_.flow_done(t, *insn->second, *out);
  resume_thread(t, 0);
  return true;
}

}  // namespace backend
