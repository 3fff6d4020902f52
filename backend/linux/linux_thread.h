// One thread of a traced Linux process, as the ptrace loop sees it: whether it runs, the run
// mode that decides how it is resumed and what its next stop means, and the small amount of
// state each mode needs. Modes are types (std::variant), so a mode's data exists only while
// the thread is in that mode.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <variant>

#include "backend/btrace/branch.h"
#include "backend/btrace/branch_cursor.h"
#include "backend/engine/path_plan.h"
#include "backend/x86/block_cache.h"
#include "backend/engine/block_step.h"
#include "backend/process.h"
#include "backend/points/watch_emulator.h"

namespace backend {

namespace run {
// As the client asked: PTRACE_CONT (PTRACE_SYSCALL while syscalls are caught) or one step.
struct Normal {};
// Single steps while the pc stays in the action's range (vCont;r).
struct RangeStep {};
// One step of the instruction under our int3 at `addr`, lifted meanwhile; then the action.
struct StepOver {
  uint64_t addr = 0;
};
// Software branch tracing: run to the armed int3 at the end of the planned path, execute the
// control-flow instruction there (emulated, or stepped as a LiftedStep), record, plan again.
struct Traced {
  PathPlan plan;
};
// stepbranch: this thread alone until it has taken `left` more branches.
struct StepBranch {
  uint32_t left = 0;
  Branch last;                  // the newest taken branch
  uint64_t pass_client_at = 0;  // a client breakpoint at the start pc is stepped over, not reported
  bool singleblock = false;     // PTRACE_SINGLEBLOCK (where the probe proved BTF works)
  BlockStepStart block;         // singleblock: where the current block step began
};
// A continue while emulated watchpoints are set: checked single steps, or runs ahead to an
// armed int3 where every access on the way is known to miss the watched regions.
struct WatchStep {};
}  // namespace run

using RunMode = std::variant<run::Normal, run::RangeStep, run::StepOver, run::Traced, run::StepBranch, run::WatchStep>;

// For --debug: the mode's name.
const char* mode_name(const RunMode& mode);

// Overlays that take over a thread for one step and then give it back to its mode:
// a control-flow instruction the emulator cannot execute (syscall, int, an instruction under
// someone else's int3) run by the CPU with our int3 lifted,
struct LiftedStep {
  FlowInsn insn;
  uint64_t lifted = 0;     // the address whose int3 we lifted (0: none)
  uint64_t displaced = 0;  // a syscall run out of line: the copy's address, until its entry stop
};
// and a traced thread single-stepping into a signal handler (the signal is a branch from the
// last instruction executed before it).
struct SignalEntry {
  uint64_t from = 0;  // 0 = unknown
  // {the branch that came to the delivery pc with nothing of its block run (0: unknown), that
  // pc}: the handler may take its target's place in the history (TraceManager::signal_entry).
  std::optional<Branch> arrived_by;
};

struct LinuxThread {
  explicit LinuxThread(pid_t id = 0) : tid(id) {}
  pid_t tid = 0;
  bool running = false;
  bool stepping = false;           // resumed with PTRACE_SINGLESTEP (a step trap is expected)
  bool sigstop_expected = false;   // we sent a SIGSTOP that has not arrived yet
  bool zombie = false;             // the leader exited (pthread_exit) while other threads live
  std::optional<StopEvent> pending;  // a client-visible event kept for the next resume
  ThreadOptions options;           // the client's per-thread options (QThreadOptions)
  int deliver_signal = 0;          // a signal to pass at the next resume (not reported)
  int last_signal = 0;             // real signal of the reported stop (detach re-delivers it)
  ResumeAction action;             // what the client asked for this thread
  RunMode mode;
  std::optional<LiftedStep> lifted_step;
  std::optional<SignalEntry> signal_entry;
  uint64_t armed = 0;              // this thread's internal int3 (0 = none)
  BranchCursor cursor;
  // Emulated watchpoints: the checked single step in flight, and a hit it found.
  std::optional<WatchEmulator::Step> watch_step;
  std::optional<WatchHit> watch_hit;
  // Syscall catching: between an entry stop and its exit stop, and the syscall's number.
  bool in_syscall = false;
  int syscall_nr = -1;
  // The syscall stop being handled, read once when it came (LinuxProcess::read_syscall_stop):
  // each ptrace request costs a few microseconds on some VMs, and both the patch tracer and
  // the syscall handling need the number. nr -1: unknown.
  struct SyscallStop {
    bool entry = false;
    bool known = true;  // an entry or an exit (not a seccomp stop)
    int nr = -1;
    uint64_t ip = 0;  // after the `syscall` (0: unknown)
  };
  std::optional<SyscallStop> syscall_stop;
  // This resume is a free run through patched code in which every system call is buffered or
  // stops at an int3 first (a recording's system-call buffer): PTRACE_CONT is enough.
  bool calls_never_unseen = false;
  // A checked step (WatchStep) of a traced thread that met a syscall runs it under
  // PTRACE_SYSCALL: the syscall instruction's address, from its entry stop to its exit, where
  // the step ends (rt_sigreturn's jump back to where a signal came is a branch to record).
  uint64_t watch_syscall_from = 0;
  // A lifted syscall instruction whose entry stop came (the client catches syscalls, so it ran
  // under PTRACE_SYSCALL instead of a single step): its exit, or the step trap after it,
  // finishes it as the lifted step would have.
  std::optional<FlowInsn> syscall_flow;
  // Non-stop (unused in all-stop): the client resumed it and was not told of a stop since;
  // a stop it asked for (vCont;t: signal 0, vCtrlC: SIGINT) to report at the next chance;
  // stopped by us for an instant (a memory write, another thread's step-over), to be resumed
  // with the ptrace request of its last resume; its wait status read while pausing it, not
  // yet handled; and the stop it was last reported in ('?').
  bool resumed = false;
  bool stop_requested = false;
  int stop_signal = 0;
  bool paused = false;
  bool stashed = false;
  long request = 0;
  std::optional<StopEvent> last_event;
  // While-stepping after a tracepoint hit (backend/trace/): single steps collecting the
  // tracepoint's step actions, `left` more; the client's own action is kept to go on with.
  struct TraceSteps {
    uint32_t tracepoint = 0;
    uint64_t addr = 0;
    uint64_t left = 0;
    ResumeAction action;
  };
  std::optional<TraceSteps> trace_steps;
  // Its registers as last read while it stayed stopped (dropped when it runs, a status comes,
  // or the client writes them): what a read answers once it has died since, killed from
  // outside while stopped, as gdbserver answers from its register cache.
  std::optional<RegisterFile> stop_regs;

  template <typename M>
  bool in() const { return std::holds_alternative<M>(mode); }
  bool overlaid() const { return lifted_step || signal_entry; }
};

}  // namespace backend
