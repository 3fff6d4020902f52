// A traced Linux process: launch/attach, threads, resume, stop events, registers, memory,
// breakpoints; all-stop (the default: any event stops every thread) or non-stop (an event
// stops its thread only, see set_non_stop). Knows nothing of packets. Every call must come from the thread that
// created the Process (ptrace rule); the server runs one io_context on one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/points/breakpoint_conditions.h"
#include "backend/btrace/branch_tracer.h"
#include "backend/error.h"
#include "backend/memory_region.h"
#include "backend/ptrace/launch.h"
#include "backend/ptrace/registers.h"
#include "backend/trace/trace_experiment.h"

namespace backend {

enum class StopKind {
  Signal,        // stopped with a signal (SIGINT after interrupt, SIGSEGV, SIGUSR1, SIGSTOP...)
  Breakpoint,    // hit one of our software breakpoints (pc already rewound)
  HwBreakpoint,
  Watchpoint,    // data watchpoint; watch_addr/watch_type set
  Step,          // single step / range step finished
  StepBranch,    // stepbranch finished: branch_from/branch_to set (0/0 if stopped for another reason)
  Exited,        // process exited: exit_status
  Killed,        // process killed by signal: signo
  Fork, VFork, VForkDone, Exec,
  SyscallEntry, SyscallReturn,
  NoResumed,     // every thread the client resumed is gone (exited) and nothing else happened
  // Thread events (set_thread_events): a new thread, stopped before its first instruction,
  // and a thread (not the last) that exited: exit_status.
  ThreadCreated, ThreadExited,
  // A thread with the clone option made a new thread (child_pid: its tid), which is left
  // stopped, never run, until the client resumes it.
  Clone,
  // A replay reached an end of its recorded history (resume_reverse at the first instruction,
  // or forward at the program's recorded end): nothing further to run in that direction.
  HistoryBegin, HistoryEnd,
};

enum class WatchType { Write, Read, Access };

struct StopEvent {
  StopKind kind = StopKind::Signal;
  pid_t pid = 0;
  pid_t tid = 0;
  int signo = 0;                // Linux signal number (Signal, Killed); SIGTRAP for traps
  int exit_status = 0;          // Exited
  uint64_t watch_addr = 0;
  WatchType watch_type = WatchType::Write;
  pid_t child_pid = 0;          // Fork/VFork: the child's pid; Clone: the new thread's tid
  std::string exec_path;        // Exec
  int syscall_no = 0;
  uint64_t branch_from = 0, branch_to = 0;   // StepBranch
  std::string step_mechanism;                // StepBranch: "singleblock" or "software"
};

// What one thread reports besides its stops (GDB's per-thread options): its clones, as Clone
// events of its own, and its exit, as ThreadExited. New threads start with none.
struct ThreadOptions {
  bool clone = false;
  bool exit = false;
  bool operator==(const ThreadOptions&) const = default;
};

enum class ResumeKind { Continue, Step, RangeStep, Stop };
struct ResumeAction {
  ResumeKind kind = ResumeKind::Continue;
  int signo = 0;                   // Linux signal to deliver, 0 = none
  uint64_t range_start = 0, range_end = 0;  // RangeStep: step while start <= pc < end
};
// Per-thread actions; threads not named get `others` (nullopt = stay stopped).
struct ResumePlan {
  std::map<pid_t, ResumeAction> threads;
  std::optional<ResumeAction> others;
  // A thread resumed from an address holding a client breakpoint first executes the
  // instruction there (LLDB expects that). GDB does its own step-overs and, resuming onto a
  // breakpoint it left inserted (`jump`, a signal delivered at a breakpoint), expects the
  // breakpoint to be hit at once, as gdbserver does.
  bool step_over_client_breakpoints = true;
};

enum class BreakpointKind { Software, Hardware, WriteWatch, ReadWatch, AccessWatch };

// Reverse execution (a replayed process only): back one instruction, or back to the last
// breakpoint, watchpoint or signal stop before now.
enum class ReverseKind { Step, Continue };
// Asked now and then during a long synchronous run (a reverse pass): true when the client
// interrupted it or is gone. The run then stops where it stands, reported as a SIGINT stop.
using CancelCheck = std::function<bool()>;

// Where a replay stands (`monitor when`, `monitor checkpoint`): rr's event and tick numbers.
struct ReplayPosition {
  uint64_t event = 0, events = 0;  // trace events consumed, of all the trace has
  uint64_t branches = 0;           // the thread's taken branches so far
  uint64_t pc = 0;
  bool at_end = false;             // held at the recorded exit
};

struct ProcessSettings {
  // The branch source (--btrace-source); auto picks the best that works per thread.
  TraceSource trace_source = TraceSource::Auto;
  // What the server found out once about LBR, PT and the TEST ONLY feeds (its `code` reader
  // is the process's own, set by the process).
  TraceSetup trace_setup;
  // Hardware breakpoints and watchpoints in software, for machines whose debug registers do
  // not trap: Z1 becomes an int3 reported as a hardware breakpoint, Z2/Z3/Z4 are checked on
  // every instruction of the threads that run while one is set. Same four slots as hardware.
  bool watch_emulation = false;
  // In a replay, emulated watchpoints protect the watched pages instead of stepping the
  // program (backend/points/page_watch.h); off: checked steps everywhere (--watchpoints=steps).
  bool page_watch = true;
  // stepbranch with PTRACE_SINGLEBLOCK: only where the server's probe saw BTF work.
  bool singleblock = false;
  // A single step over cpuid stops right after it (the server's probe). Where it does not (the
  // hypervisor drops the trap), such a step is done by the server: cpuid run here for the
  // thread's leaf and subleaf, its registers set, as record/replay does.
  bool cpuid_step_traps = true;
  // A thread resumed internally (a step, a traced block) usually stops again within
  // microseconds: poll for its status this long before going back to the event loop.
  std::chrono::microseconds busy_poll{200};
  // --debug: every wait status and mode change is told here (empty: nowhere).
  std::function<void(std::string_view)> log;
};

class Process {
 public:
  virtual ~Process() = default;

  // Starts the program stopped at its first instruction (after exec; ld.so entry).
  static Result<std::unique_ptr<Process>> launch(const LaunchOptions& options);
  // Attaches to every thread of pid and stops them (reported as SIGSTOP / signal 0).
  static Result<std::unique_ptr<Process>> attach(pid_t pid);

  virtual pid_t pid() const = 0;
  // The pid the system knows it by (/proc): a replay's pid() is the recorded one.
  virtual pid_t os_pid() const { return pid(); }
  virtual bool was_attached() const = 0;           // qAttached: 1 attached, 0 launched
  virtual bool alive() const = 0;                  // false after exit/kill reported
  // The process exited (or was killed) while it was being paused for another process's event:
  // its exit is reported at the next resume, like any pending event.
  virtual bool exit_unreported() const = 0;
  virtual std::vector<pid_t> threads() const = 0;  // live threads, main first
  virtual bool has_thread(pid_t tid) const = 0;
  virtual std::string thread_name(pid_t tid) const = 0;
  virtual int thread_core(pid_t tid) const = 0;    // -1 if unknown
  virtual StopEvent last_stop() const = 0;         // the stop the process is in now

  // ---- execution ----
  virtual Result<void> resume(const ResumePlan& plan) = 0;
  // Stop a running process: the next event is a Signal stop with SIGINT (as gdbserver).
  virtual void interrupt() = 0;
  // Called by the server's loop when SIGCHLD arrived (or periodically): reaps ptrace events and
  // drives internal work (stepping over breakpoints, range steps, traced runs). Returns a stop
  // once the whole process is stopped for a reason the client must see.
  virtual std::optional<StopEvent> poll_events() = 0;
  virtual bool running() const = 0;
  // True when the last poll_events() stopped early to bound its slice of work (a long traced
  // run): the server polls again right after serving the client, without waiting for SIGCHLD.
  virtual bool wants_poll() const { return false; }
  // stepbranch on one thread (others stay stopped); result comes through poll_events().
  virtual Result<void> step_branch(pid_t tid, uint32_t count) = 0;
  // Runs tid backwards (backend/replay/replay_process.h); the stop comes through
  // poll_events(), a HistoryBegin one at the start of the recording. Only a replay can.
  virtual bool can_reverse() const { return false; }
  // A replay's position now, and its checkpoints (oldest first); take_checkpoint keeps one here.
  virtual std::optional<ReplayPosition> replay_position() { return std::nullopt; }
  virtual std::vector<ReplayPosition> replay_checkpoints() const { return {}; }
  virtual Result<void> take_checkpoint() { return Error{EOPNOTSUPP, "Only a replay keeps checkpoints."}; }
  virtual Result<void> resume_reverse(pid_t /*tid*/, ReverseKind /*kind*/, const CancelCheck& /*cancelled*/) {
    return Error{EOPNOTSUPP, "Target does not support this operation."};
  }

  // ---- non-stop ----
  // Non-stop: resume() resumes the threads the plan names (or, with `others`, every stopped
  // thread) and leaves the running ones alone; a Stop action stops a running thread (reported
  // as signal 0); every event stops its thread only and poll_events() returns the events one
  // by one; interrupt() stops one thread with SIGINT. Switched only while nothing runs.
  virtual Result<void> set_non_stop(bool on) = 0;
  virtual bool non_stop() const = 0;
  // The threads stopped now, each with the stop it is in (its last reported event, signal 0
  // if none): what '?' lists in non-stop. All-stop: last_stop() alone unless running.
  virtual std::vector<StopEvent> stopped_threads() const = 0;
  // Whether tid runs (non-stop: resumed by the client and not stopped since).
  virtual bool thread_running(pid_t tid) const = 0;
  // Report thread creation (the new thread stays stopped) and thread exits (QThreadEvents).
  virtual void set_thread_events(bool on) = 0;
  // One thread's options (QThreadOptions); a thread it does not have is ignored.
  virtual void set_thread_options(pid_t tid, ThreadOptions options) = 0;
  virtual ThreadOptions thread_options(pid_t tid) const = 0;
  // Non-stop attach, as gdbserver: the threads (stopped by the attach) count as running for
  // the client until it stops them (vCont;t), each then reported with signal 0.
  virtual void hold_attach_stops() = 0;

  virtual Result<void> detach() = 0;   // removes our breakpoints, restores, detaches all threads
  virtual Result<void> kill() = 0;     // SIGKILL and reap; no stop event after this

  // ---- signals (Linux numbers) ----
  virtual void set_pass_signals(std::set<int> signals) = 0;     // delivered without stopping
  virtual void set_program_signals(std::set<int> signals) = 0;  // allowed to reach the program
  virtual void set_catch_syscalls(bool on, std::set<int> syscalls) = 0;
  virtual Result<std::vector<uint8_t>> siginfo(pid_t tid) = 0;  // 128-byte siginfo_t
  // Replaces the siginfo of the signal tid is stopped with (PTRACE_SETSIGINFO): delivering
  // that signal on the next resume hands the program these bytes. `info` is 128 bytes.
  virtual Result<void> set_siginfo(pid_t tid, std::span<const uint8_t> info) = 0;

  // ---- registers (in the layout of registers.h) ----
  virtual const RegisterLayout& register_layout() const = 0;
  virtual Result<RegisterFile> read_registers(pid_t tid, RegisterSet set = RegisterSet::All) = 0;
  virtual Result<void> write_registers(pid_t tid, const RegisterFile& regs) = 0;

  // ---- memory (breakpoint shadows are hidden: reads never show our int3) ----
  virtual Result<size_t> read_memory(uint64_t addr, std::span<uint8_t> out) = 0;
  virtual Result<size_t> write_memory(uint64_t addr, std::span<const uint8_t> data) = 0;

  // ---- breakpoints and watchpoints ----
  // A kind the machine cannot serve exactly fails with EOPNOTSUPP (the client is told the
  // packet is unsupported): read-only watchpoints with debug registers, which watch reads only
  // together with writes.
  virtual Result<void> insert_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) = 0;
  virtual Result<void> remove_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) = 0;
  virtual int hardware_slots() const = 0;  // 4 on x86
  // Whether the client has a code breakpoint (Software, Hardware) of that kind at addr: GDB's
  // Z at such an address only replaces its conditions (gdbserver keeps one breakpoint).
  virtual bool has_client_breakpoint(BreakpointKind /*kind*/, uint64_t /*addr*/) const { return false; }
  // Target-side conditions and commands of the client's code breakpoint at addr (after
  // insert_breakpoint), replacing earlier ones; an empty program makes it plain again. Each hit
  // is then evaluated in the server: one that does not count (or runs commands) is stepped
  // over without a stop (backend/points/breakpoint_conditions.h).
  virtual Result<void> set_breakpoint_program(BreakpointKind /*kind*/, uint64_t /*addr*/, BreakpointProgram /*p*/) {
    return Error{EOPNOTSUPP, "Target-side breakpoint conditions are not supported."};
  }
  // What breakpoint commands printed (dprintf-style agent) since the last call.
  virtual std::string take_console_output() { return {}; }

  // ---- tracepoints (backend/trace/) ----
  // The experiment whose tracepoints this process collects (null: none; the caller keeps it
  // alive while it is set). While it runs, a hit of one of its addresses is handed to it
  // without a stop the client hears of (a client breakpoint there still stops), and
  // while-stepping steps the thread on. sync_tracepoints(): its addresses changed (start,
  // stop, a tracepoint defined or enabled while it runs).
  virtual Result<void> set_trace_experiment(trace::TraceExperiment* /*experiment*/) {
    return Error{EOPNOTSUPP, "Target does not support tracepoints."};
  }
  virtual void sync_tracepoints() {}
  // Frames collected inside the program (fast tracepoints) handed to the experiment now (a
  // status or frame query); at stops this happens anyway.
  virtual void drain_tracepoints() {}
  // How the tracepoint at addr is collected, in words (monitor tracepoints).
  virtual std::string tracepoint_mechanism(uint64_t /*addr*/) const { return "not collected by this process"; }

  // ---- information ----
  virtual Result<std::vector<uint8_t>> auxv() = 0;
  virtual Result<std::string> exe_path() = 0;
  virtual Result<std::vector<MemoryRegion>> memory_map() = 0;
  virtual Result<std::vector<LibraryInfo>> libraries(uint64_t* main_lm) = 0;  // r_debug walk

  // ---- fork children ----
  // Whether fork / vfork children are reported (Fork / VFork stops with child_pid, then
  // VForkDone); otherwise they are let go at once, cleaned of our breakpoints. A reported
  // child is a process of its own, stopped and clean of our breakpoints, with its parent's
  // settings; take_fork_children() hands each over once (the server keeps every process in
  // one map and decides what becomes of it).
  virtual void set_fork_reporting(bool fork, bool vfork) = 0;
  virtual std::vector<std::unique_ptr<Process>> take_fork_children() = 0;
  // Stops every running thread without reporting anything: what happens meanwhile stays
  // pending for the next resume (all-stop across processes: another one stopped).
  virtual void pause() = 0;

  // ---- branch tracing ----
  virtual BranchTracer& tracer() = 0;
  // The client stopped recording tid (Qbtrace:off): a source that left something in the
  // program (block patching's stubs) takes it away once no thread records through it.
  virtual void recording_stopped(pid_t /*tid*/) {}

  // ---- how the server wants it run (set once, before anything else) ----
  virtual void configure(const ProcessSettings& settings) = 0;
  virtual const ProcessSettings& settings() const = 0;
};

}  // namespace backend
