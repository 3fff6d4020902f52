// Software branch tracing and stepbranch: the part of the ptrace loop that runs a thread block
// by block. A traced thread that continues runs to an internal int3 on the first control-flow
// instruction whose outcome is not known statically (direct jmp/call are followed at planning
// time); there the instruction is emulated (or, for syscalls and traps, stepped by the CPU with
// the int3 lifted), the branch recorded, and the next stop planned: one ptrace stop per
// executed non-direct control-flow instruction, none per ordinary instruction. stepbranch runs
// one thread the same way (or with PTRACE_SINGLEBLOCK where BTF works) and counts the branches
// it takes.
//
// The stepper owns no thread: LinuxProcess owns them and the wait loop, and calls in here for
// the threads in run::Traced and run::StepBranch modes and for the lifted-step overlay.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "backend/engine/path_plan.h"
#include "backend/points/software_breakpoints.h"
#include "backend/btrace/patch/patch_tracer.h"
#include "backend/btrace/trace_manager.h"
#include "backend/x86/block_cache.h"
#include "backend/x86/flow_emulator.h"
#include "backend/linux/linux_thread.h"
#include "backend/ptrace/proc_memory.h"
#include "backend/ptrace/registers.h"

namespace backend {

class BranchStepper {
 public:
  // What the stepper needs from the process that owns the threads.
  class Host {
   public:
    // Issues t's ptrace resume in its current mode (or reports instead, see LinuxProcess).
    virtual void resume(LinuxThread& t, int signo) = 0;
    // A client-visible event of t: the first one stops the whole process.
    virtual void report(LinuxThread& t, StopEvent ev) = 0;
    // Carries on in t's mode after internal work (emulation, a lifted step).
    virtual void proceed(LinuxThread& t) = 0;
    // The process is being stopped for a reported event: threads stay where they are.
    virtual bool stopping() const = 0;
    virtual StopEvent event(StopKind kind, pid_t tid, int signo) const = 0;
    virtual uint64_t pc(pid_t tid) const = 0;
    // Another thread is stepping with the int3 at addr lifted right now.
    virtual bool lifted_elsewhere(const LinuxThread& t, uint64_t addr) const = 0;
    // Runs t's syscall instruction out of line, its int3 left in for the other threads: true
    // when t was resumed so (its syscall stops finish it); false: lift it as any other.
    virtual bool run_syscall_displaced(LinuxThread& t, const FlowInsn& insn) = 0;
    // Emulated watchpoints are set: every instruction must be a checked step.
    virtual bool watch_stepping() const = 0;
    // Non-stop mode: block patching stays with single-threaded programs there.
    virtual bool non_stop_mode() const = 0;
    // Replay's watch pc (an internal int3 a thread must meet): no patch may cover it.
    virtual bool exact_stop_at(uint64_t addr) const = 0;
    // Block patching: how many ring entries tid may write before it must stop (0: no limit).
    virtual uint64_t branch_budget(pid_t tid) = 0;
    // A ring was drained at a stop the patcher consumed: the watch pc's int3 may be due now.
    // True when it changed (the thread is then planned anew rather than resumed as it was).
    virtual bool exact_stop_changed() = 0;
    // Record/replay: the instruction at t's pc is one whose result the interceptor gives
    // (SyscallInterceptor::take_instruction). Emulated: t is past it; Stopped: t was reported.
    enum class Taken { No, Emulated, Stopped };
    virtual Taken take_nondeterministic(LinuxThread& t) = 0;
    // Stops every other running thread of the process for a moment (they were resumed;
    // resume_others() resumes them as they were): the ones stopped, for resume_others().
    virtual std::vector<pid_t> pause_others(LinuxThread& t) = 0;
    virtual void resume_others(const std::vector<pid_t>& paused) = 0;
    // t is about to run the client breakpoint at addr: does the hit stop it (its target-side
    // condition holds)? False: the instruction there is executed as any other.
    virtual bool client_breakpoint_stops(LinuxThread& t, uint64_t addr) = 0;
    // A hardware execution breakpoint (Z1) is set at addr.
    virtual bool hw_breakpoint_at(uint64_t addr) const = 0;
    // --debug: what the stepper decided (only built when logging() is true).
    virtual bool logging() const = 0;
    virtual void log_line(std::string_view line) const = 0;

   protected:
    ~Host() = default;
  };

  BranchStepper(Host& host, SoftwareBreakpoints& breakpoints, ProcMemory& memory, BlockCache& code,
                std::unique_ptr<TraceManager>& tracer, const RegisterLayout& layout);

  bool traced(pid_t tid) const { return tracer_->software_traced(tid); }
  void record(LinuxThread& t, uint64_t from, uint64_t to);
  // Moves t's internal int3 (0 = none).
  void arm(LinuxThread& t, uint64_t addr);

  // ---- software tracing ----
  // Runs a Continue thread from its pc: traced ones plan, arm and continue; others plain.
  void continue_traced(LinuxThread& t, int signo);
  // A traced thread gets a caught signal: single-step into the handler (SignalEntry overlay).
  void deliver_traced_signal(LinuxThread& t, int signo);
  void signal_entry_done(LinuxThread& t);
  // A thread stopped on an int3 that is ours only (its armed stop, or another thread's):
  // execute the control-flow instruction there for it and let it go on.
  void internal_hit(LinuxThread& t, uint64_t addr);
  // A single step of a traced thread ended at pc: record the branch it took.
  // A rep-prefixed string instruction at pc (movs, stos, cmps, scas, lods, ins, outs).
  bool rep_string_at(uint64_t pc) const;
  void record_step(LinuxThread& t, uint64_t pc);
  // Records the direct branches t has passed on its planned path.
  void commit_plan(LinuxThread& t, uint64_t pc);
  // The instruction executed right before pc (in t's block, or the control-flow instruction
  // that fell through to it); nullopt if unknown.
  std::optional<uint64_t> insn_before_pc(LinuxThread& t, uint64_t pc);

  // ---- control-flow instructions ----
  // Executes the instruction at t's pc (t stopped on it): emulated when possible (returns the
  // outcome), else stepped by the CPU as a LiftedStep (returns nullopt; lifted_step_done follows).
  // Record/replay's nondeterministic instructions go to the host's interceptor (nullopt when
  // that reported a divergence).
  std::optional<FlowOutcome> execute_flow(LinuxThread& t, const FlowInsn& insn);
  Result<FlowOutcome> emulate(LinuxThread& t, const FlowInsn& insn);
  // The same with t's general registers already read (gp: what they are now; written back).
  Result<FlowOutcome> emulate(LinuxThread& t, const FlowInsn& insn, user_regs_struct& gp);
  void flow_done(LinuxThread& t, const FlowInsn& insn, const FlowOutcome& outcome);
  void lifted_step_done(LinuxThread& t);

  // ---- stepbranch ----
  void start_step_branch(LinuxThread& t, uint32_t count, bool singleblock);
  void stepbranch_run(LinuxThread& t);
  // A PTRACE_SINGLEBLOCK step stopped (si_code of the SIGTRAP, DR6 read at the stop).
  void stepbranch_singleblock_done(LinuxThread& t, int si_code, std::optional<uint64_t> dr6);
  void stepbranch_step_done(LinuxThread& t);  // one checked step (emulated watchpoints)

  // At a reported stop: what traced threads passed is recorded, our int3s come out.
  void settle(LinuxThread& t);

  uint64_t emulated_flows() const { return emulated_flows_; }

  // ---- block patching (--btrace-source=patch, backend/btrace/patch/patch_tracer.h) ----
  // A wait status of t before the dispatcher reads it: true when it was patching's own (a full
  // ring, or a ret/indirect stub that met an unknown target) and is handled.
  // settle_later: a system-call stop leaves its drains to patch_settle() (or to the next stop),
  // for a caller that resumes most of them at once.
  bool patch_stop(LinuxThread& t, int status, bool settle_later = false);
  void patch_settle(LinuxThread& t) {
    if (patch_) patch_->settle(patch_thread(t));
  }
  // A piece of a full ring's deferred drain, while the threads run (the caller looks for stops
  // in between); false: nothing was left.
  bool patch_background() { return patch_ && patch_->drain_deferred_some(kBackgroundDrainBytes); }
  // Original bytes back in memory, the thread out of the stubs (reported stops, pauses,
  // detach, vfork). t: the thread at hand, if any.
  void patch_suspend(LinuxThread* t) {
    if (!patch_) return;
    if (!t) return patch_->suspend(nullptr);
    PatchThread view = patch_thread(*t);
    patch_->suspend(&view);
  }
  void patch_thread_created(pid_t child, bool non_stop) {
    if (patch_) patch_->thread_created(child, non_stop);
  }
  void patch_thread_exited(pid_t tid) {
    if (patch_) patch_->thread_exited(tid);
  }
  void patch_restore_into(const ProcMemory& child) const {
    if (patch_) patch_->restore_into(child);
  }
  void patch_unshadow(uint64_t addr, std::span<uint8_t> buf) const {
    if (patch_) patch_->unshadow(addr, buf);
  }
  bool patch_read_code(uint64_t addr, std::span<uint8_t> out) { return patch_ && patch_->read_code(addr, out); }
  void patch_invalidate(uint64_t addr, uint64_t len) {
    if (patch_) patch_->invalidate(addr, len);
  }
  void patch_reset() { patch_.reset(); }  // exec: a new image
  // No thread records through patches any more (record stop, detach) and every thread is
  // stopped: original code, stub and data areas unmapped (munmap run in tid). False: an
  // munmap failed.
  bool patch_release(pid_t tid);
  const PatchTracer* patcher() const { return patch_.get(); }
  // tid runs through block patching (its branches come from its ring; budgets apply).
  bool patch_counting(pid_t tid) const {
    return patch_ && patch_->disabled_reason().empty() && tracer_->patch_traced(tid);
  }

 private:
  FlowInsn insn_at(uint64_t addr);  // the instruction at addr as a FlowInsn (Trap if not flow)
  // All the patch source sees of t (it knows nothing of LinuxThread).
  static constexpr size_t kBackgroundDrainBytes = 64 * 1024;  // ~16K entries, tens of microseconds
  static PatchThread patch_thread(LinuxThread& t) { return PatchThread{t.tid, t.cursor, t.in_syscall}; }

  Host& host_;
  SoftwareBreakpoints& breakpoints_;
  ProcMemory& memory_;
  BlockCache& code_;
  std::unique_ptr<TraceManager>& tracer_;  // replaced when the trace source changes
  const RegisterLayout& layout_;
  RegisterFile scratch_regs_;  // emulate(): reused register file
  uint64_t emulated_flows_ = 0;
  uint64_t int3_stops_ = 0;  // internal int3 hits (block ends the engine stops at)
  uint64_t catch_up_at_ = 0;  // int3_stops_ when block patching last caught up with every thread stopped
  uint64_t catch_ups_ = 0;
  std::unique_ptr<PatchTracer> patch_;  // made when a patch-traced thread first continues
};

}  // namespace backend
