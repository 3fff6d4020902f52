// backend::Process on Linux x86-64 with ptrace (all-stop).
//
// Each thread has a state record (running or stopped, a pending client-visible event, a run
// mode) and every wait status goes through one dispatcher, handle_stop(). Internal work
// (stepping over a breakpoint, range stepping, suppressing our own SIGSTOPs, passing signals,
// clone/fork events) is finished there and the thread resumed; only a client-visible event
// stops the whole process (the other threads get a SIGSTOP that is then swallowed).
//
// Where later run modes plug in:
//  * software branch tracing: a RunMode::SoftwareTrace thread runs block by block. On resume,
//    decode the block at pc (BlockCache), insert_internal_breakpoint() on its control-flow
//    instruction and continue; handle_trap() sees an internal breakpoint for a thread in that
//    mode, emulates the instruction with emulate_flow() (or single-steps it), records
//    (from, to) and continues with the next block. Client breakpoints and signals still end
//    the run through report().
//  * stepbranch: RunMode::StepBranch, the same loop for one thread (others stay stopped),
//    ending with StopKind::StepBranch after `count` taken branches.
//  Both need: a branch in handle_trap() before the "internal breakpoint" fallback, and a
//  case in resume_thread() that decides between PTRACE_CONT and PTRACE_SINGLESTEP.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "backend/branch_engine.h"
#include "backend/breakpoints.h"
#include "backend/btrace/trace_manager.h"
#include "backend/btrace/tracer.h"
#include "backend/decoder.h"
#include "backend/debug_registers.h"
#include "backend/memory.h"
#include "backend/process.h"
#include "backend/watch_emulator.h"

namespace backend {

class LinuxProcess final : public Process {
 public:
  static Result<std::unique_ptr<LinuxProcess>> launch_process(const LaunchOptions& options);
  static Result<std::unique_ptr<LinuxProcess>> attach_process(pid_t pid);
  ~LinuxProcess() override;

  pid_t pid() const override { return pid_; }
  bool was_attached() const override { return attached_; }
  bool alive() const override { return alive_; }
  bool exit_unreported() const override { return exit_unreported_; }
  std::vector<pid_t> threads() const override;
  bool has_thread(pid_t tid) const override {
    auto it = threads_.find(tid);
    return it != threads_.end() && !it->second.zombie;
  }
  std::string thread_name(pid_t tid) const override;
  int thread_core(pid_t tid) const override;
  StopEvent last_stop() const override { return last_stop_; }

  Result<void> resume(const ResumePlan& plan) override;
  void interrupt() override;
  std::optional<StopEvent> poll_events() override;
  bool running() const override { return running_; }
  bool wants_poll() const override { return wants_poll_; }
  Result<void> step_branch(pid_t tid, uint32_t count) override;

  void set_fork_reporting(bool fork, bool vfork) override {
    report_forks_ = fork;
    report_vforks_ = vfork;
  }
  std::vector<pid_t> held_children() const override { return {held_children_.begin(), held_children_.end()}; }
  Result<void> detach_child(pid_t child) override;
  Result<std::unique_ptr<Process>> adopt_child(pid_t child) override;
  void release_held_children(bool kill);  // on detach / kill of this process
  void pause() override { stop_all_sync(); }

  Result<void> detach() override;
  Result<void> kill() override;

  void set_pass_signals(std::set<int> signals) override { pass_signals_ = std::move(signals); }
  void set_program_signals(std::set<int> signals) override {
    program_signals_ = std::move(signals);
    program_signals_set_ = true;
  }
  void set_catch_syscalls(bool on, std::set<int> syscalls) override;
  Result<std::vector<uint8_t>> siginfo(pid_t tid) override;
  Result<void> set_siginfo(pid_t tid, std::span<const uint8_t> info) override;

  const RegisterLayout& register_layout() const override { return layout_; }
  Result<RegisterFile> read_registers(pid_t tid, RegisterSet set = RegisterSet::All) override;
  Result<void> write_registers(pid_t tid, const RegisterFile& regs) override;

  Result<size_t> read_memory(uint64_t addr, std::span<uint8_t> out) override;
  Result<size_t> write_memory(uint64_t addr, std::span<const uint8_t> data) override;

  Result<void> insert_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) override;
  Result<void> remove_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) override;
  int hardware_slots() const override { return DebugRegisters::kSlots; }
  void set_watch_emulation(bool on) override { watch_emulation_ = on; }
  bool watch_emulation() const override { return watch_emulation_; }

  Result<std::vector<uint8_t>> auxv() override;
  Result<std::string> exe_path() override;
  Result<std::vector<MemoryRegion>> memory_map() override;
  Result<std::vector<LibraryInfo>> libraries(uint64_t* main_lm) override;

  BranchTracer& tracer() override { return *tracer_; }
  void set_trace_source(TraceSource source) override;

  // Counters for tests and benchmarks: every wait status handled, and control-flow
  // instructions executed by emulation instead of by the CPU.
  uint64_t ptrace_stops() const { return ptrace_stops_; }
  uint64_t emulated_flows() const { return emulated_flows_; }
  uint64_t watch_runs_ahead() const { return watch_runs_ahead_; }

  // Internal breakpoints (software tracer, stepbranch): share addresses with the client's.
  Result<void> insert_internal_breakpoint(uint64_t addr);
  Result<void> remove_internal_breakpoint(uint64_t addr);

 private:
  // Traced: software branch tracing, running block by block to an armed internal breakpoint.
  // FlowStep: single-stepping one control-flow instruction the emulator cannot execute
  // (syscall, trap) with our int3 lifted; afterwards the thread goes back to `flow_return`.
  // SignalEntry: a traced thread single-steps into a signal handler.
  // StepBranch: stepbranch, this thread alone.
  // WatchStep: a continue while emulated watchpoints are set: one checked single step at a time.
  enum class RunMode { Normal, RangeStep, StepOverBreakpoint, Traced, FlowStep, SignalEntry, StepBranch, WatchStep };
  struct Thread {
    explicit Thread(pid_t id = 0) : tid(id) {}
    pid_t tid = 0;
    bool running = false;
    bool stepping = false;            // last resume was PTRACE_SINGLESTEP
    bool sigstop_expected = false;    // we sent a SIGSTOP that has not arrived yet
    bool zombie = false;              // the leader exited (pthread_exit) while other threads live
    std::optional<StopEvent> pending; // client-visible event kept for the next resume
    int deliver_signal = 0;           // a signal to pass at the next resume (not reported)
    int last_signal = 0;              // real signal of the reported stop (detach re-delivers it)
    RunMode mode = RunMode::Normal;
    ResumeAction action;              // what the client asked for this thread
    uint64_t step_over_addr = 0;
    // ---- branch engine ----
    PathPlan plan;                    // Traced: path to the armed breakpoint
    uint64_t armed = 0;               // this thread's internal breakpoint (0 = none)
    uint64_t block_start = 0;         // start of the straight-line block holding pc (0 = unknown)
    uint64_t last_flow = 0;           // address of the last control-flow insn executed
    bool last_flow_taken = true;
    FlowInsn flow;                    // FlowStep: the instruction being stepped
    uint64_t lifted = 0;              // FlowStep: int3 lifted for it (0 = none)
    RunMode flow_return = RunMode::Normal;
    uint64_t step_from = 0;           // traced single-step: pc before the step
    bool step_into_handler = false;   // that step delivers a caught signal
    uint64_t signal_from = 0;         // SignalEntry: last executed insn before the signal (0 = unknown)
    uint32_t branches_left = 0;       // StepBranch
    Branch last_branch;               // StepBranch: the newest taken branch
    uint64_t pass_client_at = 0;      // StepBranch: a client breakpoint to step over, not report
    bool singleblock = false;         // StepBranch with PTRACE_SINGLEBLOCK
    // ---- emulated watchpoints ----
    std::optional<WatchEmulator::Step> watch_step;  // the checked single step in flight
    std::optional<WatchHit> watch_hit;              // that step touched a watched region
    // ---- syscall catching ----
    bool in_syscall = false;          // between a syscall-entry stop and its exit stop
    int syscall_nr = -1;              // the syscall of that entry stop
  };

  LinuxProcess(pid_t pid, bool attached);
  void set_trace_options(pid_t tid);
  Thread* find(pid_t tid);
  uint64_t get_pc(pid_t tid) const;
  void set_pc(pid_t tid, uint64_t pc) const;

  // Dispatcher for one wait status.
  void handle_stop(pid_t tid, int status);
  void handle_trap(Thread& t);
  void handle_ptrace_event(Thread& t, int event);
  void handle_syscall_stop(Thread& t);  // PTRACE_SYSCALL stop (SIGTRAP|0x80)
  void handle_step_done(Thread& t);
  // An int3 trap at addr whose breakpoint was removed before the trap was reported.
  bool vanished_breakpoint(uint64_t addr) const;
  // A client-visible event: the first one stops everybody; later ones wait as pending.
  void report(Thread& t, StopEvent ev);
  void stop_others();
  void resume_thread(Thread& t, int signo);
  void start_deferred();
  bool all_stopped() const;
  // The leader exited while other threads live (main called pthread_exit): it stays a zombie
  // the kernel reports only with the whole group. It is no thread of ours any more.
  bool leader_is_zombie(Thread& leader);
  StopEvent make_event(StopKind kind, pid_t tid, int signo = 0) const;
  void stop_all_sync();
  void forget_process(StopEvent exit_event);

  // ---- branch engine (software tracing, stepbranch, emulated step-over) ----
  bool traced(pid_t tid) const;
  void record(Thread& t, uint64_t from, uint64_t to);
  void arm(Thread& t, uint64_t addr);          // moves t's internal breakpoint (0 = none)
  void commit_plan(Thread& t, uint64_t pc);    // records the direct branches t has passed
  // Runs a traced (or untraced) Continue thread from its pc: plan, arm, PTRACE_CONT.
  void continue_traced(Thread& t, int signo);
  // Executes the instruction at t's pc (t stopped on it): emulated when possible (returns the
  // outcome), else single-stepped in FlowStep mode (returns nullopt; flow_step_done follows).
  std::optional<FlowOutcome> execute_flow(Thread& t, const FlowInsn& insn);
  Result<FlowOutcome> emulate(Thread& t, const FlowInsn& insn);
  void flow_done(Thread& t, const FlowInsn& insn, const FlowOutcome& outcome);
  void flow_step_done(Thread& t);
  void proceed(Thread& t);                     // carry on in t's mode after a flow insn
  void internal_hit(Thread& t, uint64_t addr);
  void deliver_traced_signal(Thread& t, int signo);
  std::optional<uint64_t> insn_before_pc(Thread& t, uint64_t pc);
  void record_step(Thread& t, uint64_t pc);
  void stepbranch_run(Thread& t);
  void stepbranch_singleblock_done(Thread& t);
  void stepbranch_step_done(Thread& t);        // one watch-checked step of a stepbranch

  // ---- emulated watchpoints ----
  bool watch_stepping() const { return watch_emulation_ && watch_.active(); }
  StopEvent watch_event(pid_t tid, const WatchHit& hit) const;
  bool at_syscall(pid_t tid);  // the instruction at the thread's pc is a syscall
  bool watch_emulate_flow(Thread& t, uint64_t addr);
  void settle_threads();                       // at a reported stop: commit plans, disarm

  pid_t pid_ = 0;
  bool attached_ = false;
  bool alive_ = true;
  bool exit_unreported_ = false;  // set with the exit status, cleared when poll_events returns it
  std::chrono::steady_clock::time_point next_zombie_check_{};
  bool report_forks_ = false;
  bool report_vforks_ = false;
  std::set<pid_t> held_children_;  // reported fork children, stopped until the client decides
  bool running_ = false;
  bool interrupt_requested_ = false;
  std::map<pid_t, Thread> threads_;
  std::map<pid_t, ResumeAction> deferred_;  // waiting while a step-over runs
  std::optional<StopEvent> event_;          // chosen event while the others are stopping
  std::optional<StopEvent> ready_event_;    // a pending event taken at resume
  StopEvent last_stop_;
  std::set<int> pass_signals_, program_signals_;
  bool catch_syscalls_ = false;      // continue with PTRACE_SYSCALL (QCatchSyscalls:1)
  std::set<int> caught_syscalls_;    // empty: every syscall
  bool program_signals_set_ = false;
  RegisterLayout layout_;
  ProcMemory mem_;
  SoftwareBreakpoints breakpoints_;
  DebugRegisters debug_;
  std::unique_ptr<TraceManager> tracer_;
  BlockCache code_cache_;
  RegisterFile scratch_regs_;          // emulate(): reused register file
  bool wants_poll_ = false;
  std::optional<bool> btf_works_;      // PTRACE_SINGLEBLOCK really stops on branches (probed once)
  bool step_over_clients_ = true;      // of the current resume (ResumePlan)
  bool watch_emulation_ = false;
  WatchEmulator watch_;
  WatchEmulator::Reader watch_reader_;  // memory as the program sees it (shadows removed)
  CodeBytesReader code_reader_;          // the same, for code
  uint64_t watch_runs_ahead_ = 0;        // straight-line runs without a stop per instruction
  uint64_t ptrace_stops_ = 0;
  uint64_t emulated_flows_ = 0;
};

}  // namespace backend
