// backend::Process on Linux x86-64 with ptrace, all-stop or non-stop.
//
// Every wait status goes through one dispatcher, handle_stop(), which finishes internal work
// there (stepping over a breakpoint, range stepping, suppressing our own SIGSTOPs, passing
// signals, clone/fork events, the branch stepper's blocks, emulated-watchpoint steps) and
// resumes the thread; only a client-visible event stops the whole process: the process then
// is Stopping (the other threads get a SIGSTOP that is swallowed) until every thread is
// stopped, and poll_events() returns the event.
//
// Non-stop keeps the same dispatcher: report() stops the event's thread alone and queues the
// event; a resume names threads while others run; threads are paused only for an instant (a
// multi-byte write, debug registers, a step-over with an int3 lifted).
//
// A thread's run mode (linux_thread.h) says how it is resumed (resume_thread) and what its
// next stop means; software tracing and stepbranch live in BranchStepper (branch_stepper.h),
// emulated watchpoints in WatchEmulator (watch_emulator.h).
//
// One job a file:
//   linux_process.cc             creation (launch, attach), detach and kill, thread queries,
//                                small helpers (pc, run mode, events)
//   linux_process_resume.cc      the client's resume (all-stop), deferred starts off our
//                                int3s, resume_thread(), step_branch()
//   linux_process_dispatch.cc    poll_events() and handle_stop() with what it calls: traps,
//                                steps, signals, clone, thread exits
//   linux_process_children.cc    fork and vfork children, exec, take_fork_children()
//   linux_process_syscalls.cc    QCatchSyscalls and the PTRACE_SYSCALL stops
//   linux_process_all_stop.cc    report(), interrupt(), stopping the other threads, finish()
//                                and settling at a reported stop, stop_all_sync()
//   linux_process_non_stop.cc    non-stop: per-thread resume and stop, the event queue,
//                                pauses of running threads
//   linux_process_watch.cc       glue to WatchEmulator: checked steps, runs ahead, hit events
//   linux_process_access.cc      siginfo, registers, memory, breakpoints, /proc information
//   linux_process_conditions.cc  target-side breakpoint conditions and commands
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "backend/linux/branch_stepper.h"
#include "backend/points/software_breakpoints.h"
#include "backend/btrace/trace_manager.h"
#include "backend/x86/block_cache.h"
#include "backend/points/debug_registers.h"
#include "backend/linux/linux_thread.h"
#include "backend/trace/fast_pad.h"
#include "backend/linux/syscall_interceptor.h"
#include "backend/ptrace/proc_memory.h"
#include "backend/process.h"
#include "backend/points/watch_emulator.h"
#include "backend/points/page_watch.h"

namespace backend {

class LinuxProcess final : public Process, private BranchStepper::Host {
 public:
  static Result<std::unique_ptr<LinuxProcess>> launch_process(const LaunchOptions& options);
  static Result<std::unique_ptr<LinuxProcess>> attach_process(pid_t pid);
  // A fork child made by fork_stopped(): traced with our options, stopped, clean. Killed with
  // the object, as a launched program (linux_process_children.cc).
  static std::unique_ptr<LinuxProcess> adopt_stopped_child(pid_t child);
  ~LinuxProcess() override;

  // A copy of the stopped single-threaded process (replay's checkpoints, backend/replay/
  // timeline.h): a fork made by a syscall run in it, left stopped at the same pc with the same
  // registers, without our int3s, patches or debug registers. Its parent is the program.
  Result<pid_t> fork_stopped();

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
  bool running() const override;
  bool wants_poll() const override { return wants_poll_; }
  Result<void> step_branch(pid_t tid, uint32_t count) override;

  void set_fork_reporting(bool fork, bool vfork) override {
    report_forks_ = fork;
    report_vforks_ = vfork;
  }
  std::vector<std::unique_ptr<Process>> take_fork_children() override;
  void pause() override { stop_all_sync(); }
  void recording_stopped(pid_t /*tid*/) override { release_patches(false); }

  // ---- non-stop (linux_process_non_stop.cc) ----
  Result<void> set_non_stop(bool on) override;
  bool non_stop() const override { return non_stop_; }
  std::vector<StopEvent> stopped_threads() const override;
  bool thread_running(pid_t tid) const override;
  void set_thread_events(bool on) override { thread_events_ = on; }
  void set_thread_options(pid_t tid, ThreadOptions options) override {
    if (LinuxThread* t = find(tid)) t->options = options;
  }
  ThreadOptions thread_options(pid_t tid) const override {
    auto it = threads_.find(tid);
    return it != threads_.end() ? it->second.options : ThreadOptions{};
  }
  void hold_attach_stops() override;

  Result<void> detach() override;
  Result<void> kill() override;

  void set_pass_signals(std::set<int> signals) override { pass_signals_ = std::move(signals); }
  void set_program_signals(std::set<int> signals) override {
    program_signals_ = std::move(signals);
    program_signals_set_ = true;
  }
  void set_catch_syscalls(bool on, std::set<int> syscalls) override;
  // Record/replay: every syscall and signal goes through `hook` first (syscall_interceptor.h).
  void set_syscall_interceptor(std::unique_ptr<SyscallInterceptor> hook) {
    interceptor_ = std::move(hook);
    code_cache_.set_stop_at_nondeterministic(interceptor_ != nullptr);  // take_instruction() sees each one
    sync_interceptor_watch();
  }
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
  bool has_client_breakpoint(BreakpointKind kind, uint64_t addr) const override;
  Result<void> set_breakpoint_program(BreakpointKind kind, uint64_t addr, BreakpointProgram program) override;
  std::string take_console_output() override { return std::exchange(console_output_, {}); }
  Result<void> set_trace_experiment(trace::TraceExperiment* experiment) override;
  void sync_tracepoints() override;
  void drain_tracepoints() override;
  std::string tracepoint_mechanism(uint64_t addr) const override;

  Result<std::vector<uint8_t>> auxv() override;
  Result<std::string> exe_path() override;
  Result<std::vector<MemoryRegion>> memory_map() override;
  Result<std::vector<LibraryInfo>> libraries(uint64_t* main_lm) override;

  BranchTracer& tracer() override { return *tracer_; }
  void configure(const ProcessSettings& settings) override;
  const ProcessSettings& settings() const override { return settings_; }

  // Counters for tests and benchmarks: every wait status handled, control-flow instructions
  // executed by emulation instead of by the CPU, straight-line runs under emulated watchpoints.
  uint64_t ptrace_stops() const { return ptrace_stops_; }
  uint64_t emulated_flows() const { return stepper_.emulated_flows(); }

  // Replay's watch (SyscallInterceptor::watch_pc) moved outside an interceptor call: its int3
  // goes where the watch now is. Not before the patches are in (the first run puts them in):
  // until then the ring's budget cannot hold the int3 back, and the next interceptor call or
  // the budget's stop places it.
  void interceptor_watch_changed() {
    if (stepper_.patch_counting(pid_) || !counts_through_patches(pid_)) sync_interceptor_watch();
  }
  // tid's branches are counted through block patching (its ring; budgets apply), or will be
  // from its next run (the patches go in at the first run).
  bool counts_through_patches(pid_t tid) const {
    const PatchTracer* p = stepper_.patcher();
    return tracer_ && tracer_->patch_traced(tid) && (!p || p->disabled_reason().empty());
  }

 private:
  // Stopped: every thread stopped, the client knows. Running: resumed, nothing to report yet.
  // Stopping: an event was chosen (or the server pauses us): threads that still run get a
  // SIGSTOP, and every handler leaves threads where they stop.
  enum class Phase { Stopped, Running, Stopping };

  // ---- construction and small helpers (linux_process.cc) ----
  LinuxProcess(pid_t pid, bool attached);
  void set_trace_options(pid_t tid);
  LinuxThread* find(pid_t tid);
  uint64_t get_pc(pid_t tid) const;
  void set_pc(pid_t tid, uint64_t pc) const;
  void set_mode(LinuxThread& t, RunMode mode);
  StopEvent make_event(StopKind kind, pid_t tid, int signo = 0) const;
  void forget_process(StopEvent exit_event);
  template <typename... Args>
  void log(fmt::format_string<Args...> format, Args&&... args) const {
    if (settings_.log) settings_.log(fmt::format(format, std::forward<Args>(args)...));
  }

  // ---- BranchStepper::Host ----
  void resume(LinuxThread& t, int signo) override { resume_thread(t, signo); }
  void report(LinuxThread& t, StopEvent ev) override;
  void proceed(LinuxThread& t) override;
  bool stopping() const override { return phase_ == Phase::Stopping; }
  StopEvent event(StopKind kind, pid_t tid, int signo) const override { return make_event(kind, tid, signo); }
  uint64_t pc(pid_t tid) const override { return get_pc(tid); }
  bool lifted_elsewhere(const LinuxThread& t, uint64_t addr) const override;
  bool run_syscall_displaced(LinuxThread& t, const FlowInsn& insn) override;
  // Emulated watchpoints step the program, unless protected pages watch for them (page_).
  bool watch_stepping() const override {
    return settings_.watch_emulation && watch_.active() && !page_.armed && !page_.held_open;
  }
  bool hw_breakpoint_at(uint64_t addr) const override { return debug_.contains(HwKind::Execute, addr); }
  bool non_stop_mode() const override { return non_stop_; }
  bool exact_stop_at(uint64_t addr) const override { return interceptor_watch_ && addr == interceptor_watch_; }
  uint64_t branch_budget(pid_t tid) override;
  bool exact_stop_changed() override {
    uint64_t before = interceptor_watch_;
    sync_interceptor_watch();
    return interceptor_watch_ != before;
  }
  Taken take_nondeterministic(LinuxThread& t) override;
  std::vector<pid_t> pause_others(LinuxThread& t) override { return pause_running(t.tid); }
  void resume_others(const std::vector<pid_t>& paused) override { resume_paused(paused); }
  bool client_breakpoint_stops(LinuxThread& t, uint64_t addr) override {
    return !conditions_.any_at(addr) || hit_counts(t, addr);
  }
  bool logging() const override { return static_cast<bool>(settings_.log); }
  void log_line(std::string_view line) const override {
    if (settings_.log) settings_.log(line);
  }

  // ---- resuming (linux_process_resume.cc) ----
  void start_deferred();
  void resume_thread(LinuxThread& t, int signo);
  bool step_ends_action(const ResumeAction& a, uint64_t pc) const;

  // ---- the stop dispatcher: one wait status (linux_process_dispatch.cc) ----
  void handle_stop(pid_t tid, int status);
  void handle_exit(LinuxThread& t, int status);
  void thread_exited(LinuxThread& t, int status);  // a thread other than the leader exited
  bool thread_exits_untold() const;  // exit-option exits to report before the process's
  bool option_exit(const StopEvent& ev) const {
    return ev.kind == StopKind::ThreadExited && option_exits_.count(ev.tid) != 0;
  }
  void exit_held_leader();           // the process's exit, held back behind them, now
  void handle_signal(LinuxThread& t, int sig);
  void handle_trap(LinuxThread& t);
  void handle_ptrace_event(LinuxThread& t, int event);
  // The thread's step ended (si_code of its SIGTRAP; DR6 as read for a block step).
  void handle_step_done(LinuxThread& t, int si_code, std::optional<uint64_t> dr6);
  // An int3 of ours (and no client's) at addr was hit.
  void handle_internal_int3(LinuxThread& t, uint64_t addr);
  // An int3 trap at addr whose breakpoint was removed before the trap was reported.
  bool vanished_breakpoint(uint64_t addr) const;

  // ---- fork, vfork and exec (linux_process_children.cc) ----
  void handle_fork(LinuxThread& t, int event, pid_t child);
  void handle_exec();

  // ---- syscall stops (linux_process_syscalls.cc) ----
  void handle_syscall_stop(LinuxThread& t);  // PTRACE_SYSCALL stop (SIGTRAP|0x80)
  LinuxThread::SyscallStop read_syscall_stop(const LinuxThread& t) const;
  void finish_syscall_flow(LinuxThread& t);  // the exit of a lifted syscall (syscall_flow)
  // A single step over the cpuid at t's pc, done here (cpuid run by the server for the
  // thread's leaf and subleaf): for hosts that drop the step's trap after cpuid. false when
  // the instruction there is not cpuid (or the registers could not be had).
  bool step_cpuid_here(LinuxThread& t);
  // Displaced syscalls (run_syscall_displaced): the page with the copy, mapped at first use;
  // a thread stopped before its copy ran goes back to the original instruction.
  uint64_t displaced_page(LinuxThread& t);
  void undo_displaced(LinuxThread& t);
  bool at_syscall(pid_t tid);  // the instruction at the thread's pc is a syscall

  // ---- all-stop: stopping the others, settling (linux_process_all_stop.cc) ----
  void stop_others();
  bool all_stopped() const;
  // The leader exited while other threads live (main called pthread_exit): it stays a zombie
  // the kernel reports only with the whole group. It is no thread of ours any more.
  bool leader_is_zombie(LinuxThread& leader);
  StopEvent finish(StopEvent ev);   // poll_events() returns this stop
  void settle_threads();           // at a reported stop: plans committed, int3s out, modes reset
  // Block patching's areas unmapped and the original code back, when every thread is stopped
  // and (unless `always`: detach) none records through patches any more.
  void release_patches(bool always);
  void stop_all_sync();

  // ---- breakpoints (linux_process_access.cc) ----
  Result<void> remove_client_point(BreakpointKind kind, uint64_t addr, uint64_t len);

  // ---- target-side conditions and commands (linux_process_conditions.cc) ----
  // t hit the client breakpoint at addr (pc rewound; `int3`: ours, else a debug register):
  // true when the hit is reported. Otherwise it is already dealt with: passed, or left on the
  // breakpoint to be hit (and evaluated) again at the next resume while the process stops.
  bool client_hit_reported(LinuxThread& t, uint64_t addr, bool int3);
  // ---- tracepoints (linux_process_tracepoints.cc) ----
  // A hit of a tracepoint site: collected; true when the thread was taken care of (passed on,
  // or left waiting on the site while the process stops), false when the client's breakpoint
  // or another int3 of ours there decides what follows.
  bool tracepoint_hit(LinuxThread& t, uint64_t addr);
  // A while-stepping step ended (t.trace_steps): collect, step again or go on as before.
  void trace_step_done(LinuxThread& t);
  void step_onto_tracepoint(LinuxThread& t);
  trace::HitSite hit_site(LinuxThread& t);
  // ---- fast tracepoints (linux_process_fast_tracepoints.cc) ----
  Result<void> map_fast_areas(pid_t tid, uint64_t near);
  void prepare_fast_sites();                 // pads for the experiment's fast tracepoints
  bool fast_jumps_allowed(const std::map<pid_t, ResumeAction>& actions) const;
  void arm_fast_sites(bool jumps);           // jumps in (a plain continue) or int3s again
  bool in_fast_pad(uint64_t pc) const;
  void leave_fast_pads(pid_t except = 0);    // stopped threads single-stepped out of the pads
  bool at_fast_retry(LinuxThread& t);
  void fast_area_full(LinuxThread& t, uint64_t trap);  // a pad met a full area: drain it, retry
  void drain_fast_frames(bool reset);
  void settle_fast_sites();                  // at a stop: out of the pads, frames drained, int3s
  void forget_fast_sites();                  // exec: the pads went with the old image
  void restore_fast_sites_into(const ProcMemory& child) const;
  // Evaluates the program at addr for t's hit (commands run, output kept): true to report it.
  bool hit_counts(LinuxThread& t, uint64_t addr);
  // Steps t over the int3 at addr and lets it go on in its mode, without a stop.
  // `while_stopped` runs once every thread is stopped, before they go on.
  void pass_client_breakpoint(LinuxThread& t, uint64_t addr, const std::function<void()>& while_stopped = {});

  // ---- non-stop (linux_process_non_stop.cc) ----
  Result<void> resume_non_stop(const ResumePlan& plan);
  // vCont;t / vCtrlC: the thread stops at the next chance, reported with `signo`.
  void request_stop(LinuxThread& t, int signo);
  // report() in non-stop: t alone stops, its event is queued for poll_events().
  void report_non_stop(LinuxThread& t, StopEvent ev);
  void settle_thread(LinuxThread& t);
  // Stops every running thread (but `except`) for an instant; statuses that are not our
  // SIGSTOP are kept for the next poll. Returns the threads paused, for resume_paused().
  std::vector<pid_t> pause_running(pid_t except = 0);
  void resume_paused(const std::vector<pid_t>& tids);
  // A step-over (int3 lifted) in non-stop runs with the other threads paused.
  void begin_step_over(LinuxThread& t);
  void end_step_over();
  void handle_stashed();
  // poll_events() in non-stop, after the wait statuses were handled.
  std::optional<StopEvent> next_non_stop_event();
  bool waits_for_resume() const;  // non-stop: nothing to wait for until the client resumes it

  // ---- emulated watchpoints (linux_process_watch.cc) ----
  StopEvent watch_event(pid_t tid, const WatchHit& hit) const;
  // A checked step (or a run ahead to the next instruction that needs one) of t.
  enum class WatchRun { Step, Ahead, Gone };
  WatchRun prepare_watch_step(LinuxThread& t, int signo);
  bool watch_emulate_flow(LinuxThread& t, uint64_t addr);

  // ---- emulated watchpoints by page protection, in replays (linux_process_page_watch.cc) ----
  struct PageWatch {
    std::optional<PageProtection> armed;  // protected now
    bool held_open = false;  // opened for a system call the kernel runs, from its entry to its exit
    std::vector<WatchedRange> planned_for;  // the ranges `plan` is for
    std::optional<Result<PageProtection>> plan;  // what to protect, or why nothing
    bool maps_stale = true;  // plan again: the mappings may have changed
    std::string refused;     // given up in this image, and why
    uint64_t faults = 0, opened_for_syscalls = 0;
    // A page written every few branches costs a fault each (~300 us) where checked steps cost
    // ~45 us a straight-line run: after kHotFaults faults in a row that came within a few
    // branches (the ring's head barely moved since the page was protected), the next
    // `cool_steps` resumes are checked steps; the stretch doubles while the page stays hot.
    uint64_t head_at_arm = 0;
    int hot_faults = 0;
    uint64_t cool_steps = 0, cooldown = 0;
  };
  bool page_watch_wanted(const LinuxThread& t, bool continuing) const;
  // Protects or opens the pages to match what t's next run wants (false: t is gone).
  bool sync_page_watch(LinuxThread& t, bool continuing);
  bool set_page_protection(LinuxThread& t, const PageProtection& p, bool protect);
  // A SIGSEGV stop of t: true when it was an access to the protected pages, now dealt with.
  bool page_fault(LinuxThread& t);
  void page_watch_to_steps(LinuxThread& t);
  // An entry stop of a call the kernel will run: the pages opened if it may touch them.
  void page_watch_syscall_entry(LinuxThread& t);
  void restore_pages_into(pid_t child, const ProcMemory& mem) const;

  pid_t pid_ = 0;
  bool attached_ = false;
  bool alive_ = true;
  bool exit_unreported_ = false;  // set with the exit status, cleared when poll_events returns it
  Phase phase_ = Phase::Stopped;
  std::optional<StopEvent> chosen_;       // Stopping for this event (none: a pause)
  std::optional<StopEvent> ready_event_;  // a pending event taken at resume: reported at once
  // Exits reported for the QThreadOptions exit option are never lost (gdbserver 15 keeps a
  // dead LWP's status): the threads whose exit event is not out yet; all-stop: such exits
  // found while stopping for another event, told one per resume; and the leader's exit
  // status, held back until they are out. (QThreadEvents' exits stay as they were.)
  std::set<pid_t> option_exits_;
  std::vector<StopEvent> untold_exits_;
  std::optional<int> leader_exit_status_;
  bool interrupt_requested_ = false;
  bool report_forks_ = false;
  bool report_vforks_ = false;
  // Launched with rdtsc trapped (record/replay): a child it forks gets rdtsc back before it
  // runs on its own, as it would have natively (the flag is inherited, and kept across exec).
  bool tsc_trapped_ = false;
  std::vector<std::unique_ptr<LinuxProcess>> fork_children_;  // reported, not yet taken
  std::map<pid_t, LinuxThread> threads_;
  std::map<pid_t, ResumeAction> deferred_;  // waiting while a step-over runs
  bool step_over_clients_ = true;           // of the current resume (ResumePlan)
  StopEvent last_stop_;
  std::set<int> pass_signals_, program_signals_;
  bool program_signals_set_ = false;
  bool catch_syscalls_ = false;    // continue with PTRACE_SYSCALL (QCatchSyscalls:1)
  std::set<int> caught_syscalls_;  // empty: every syscall
  ProcessSettings settings_;
  RegisterLayout layout_;
  ProcMemory mem_;
  SoftwareBreakpoints breakpoints_;
  BreakpointConditions conditions_;
  trace::TraceExperiment* experiment_ = nullptr;
  std::set<uint64_t> tracepoint_sites_;  // the experiment's sites: int3s of ours, or jumps (fast)
  struct FastSite {
    uint32_t number = 0;
    uint64_t pad_addr = 0;
    trace::FastPad pad;
    bool jumped = false;  // its jump is in (only while the process runs)
  };
  struct FastAreas {
    uint64_t code = 0, code_used = 0;  // the pads
    uint64_t data = 0, data_size = 0;  // the frames the pads write (trace::DataHeader first)
    uint64_t drained = 0;              // offset of the first frame not handed to the experiment
  };
  std::map<uint64_t, FastSite> fast_sites_;
  std::map<uint64_t, std::string> fast_refused_;  // fast tracepoints left to int3s, and why
  FastAreas fast_;
  uint64_t displaced_page_ = 0;     // `syscall; int3` that only displaced syscalls run (0: none yet)
  bool displaced_refused_ = false;  // mapping it failed in this image: lift instead
  std::unique_ptr<SyscallInterceptor> interceptor_;  // replay's (set_syscall_interceptor)
  uint64_t interceptor_watch_ = 0;  // where its watch_pc() int3 is (0: none)
  // Moves the watch int3 to interceptor_->watch_pc() (after every interceptor call).
  void sync_interceptor_watch();
  // t hit the watch int3 at addr (pc already rewound): true when handled here.
  bool interceptor_watch_hit(LinuxThread& t, uint64_t addr);
  std::string console_output_;           // breakpoint commands' printf output, not yet taken
  std::optional<std::pair<pid_t, uint64_t>> pass_once_;  // start_deferred steps over this client int3
  DebugRegisters debug_;
  std::unique_ptr<TraceManager> tracer_;
  BlockCache code_cache_;
  BranchStepper stepper_;
  WatchEmulator watch_;
  WatchEmulator::Reader watch_reader_;  // memory as the program sees it (shadows removed)
  PageWatch page_;
  CodeBytesReader code_reader_;          // the same, for code
  bool wants_poll_ = false;
  std::chrono::steady_clock::time_point next_zombie_check_{};
  // Until then a thread that vanished (an exec in another thread's name) holds off the
  // "no resumed" stop: the exec event is still to come.
  std::chrono::steady_clock::time_point exec_expected_until_{};
  uint64_t ptrace_stops_ = 0;
  // ---- non-stop ----
  bool non_stop_ = false;
  bool thread_events_ = false;
  std::deque<StopEvent> ns_events_;        // reported, not yet returned by poll_events()
  std::vector<std::pair<pid_t, int>> stashed_;  // wait statuses read while pausing threads
  pid_t step_over_tid_ = 0;                // the thread stepping over a lifted int3 (0: none)
  std::vector<pid_t> step_over_paused_;    // the threads paused for it
  bool resumed_thread_gone_ = false;       // a resumed thread exited unreported: maybe 'N'
  bool fresh_attach_ = false;              // attached and never resumed since (set_non_stop)
};

}  // namespace backend
