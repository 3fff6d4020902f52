// The ptrace loop of LinuxProcess: creation, resuming, the stop dispatcher, stopping,
// detach/kill, fork children. Registers, memory, breakpoints and information are in
// linux_process_access.cc; software tracing and stepbranch in branch_stepper.cc.
#include "backend/linux/linux_process.h"

#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "backend/ptrace/launch.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/ptrace_requests.h"
#include "backend/ptrace/thread_signal.h"

namespace backend {

namespace {

constexpr long kTraceOptions = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK |
                               PTRACE_O_TRACEVFORK | PTRACE_O_TRACEVFORKDONE | PTRACE_O_TRACESYSGOOD;

// struct ptrace_syscall_info of <linux/ptrace.h> (which cannot be included next to glibc's
// <sys/ptrace.h>); PTRACE_GET_SYSCALL_INFO fills it since Linux 5.3.
struct SyscallInfo {
  uint8_t op;
  uint8_t pad[3];
  uint32_t arch;
  uint64_t instruction_pointer;
  uint64_t stack_pointer;
  union {
    struct { uint64_t nr; uint64_t args[6]; } entry;
    struct { int64_t rval; uint8_t is_error; } exit;
  };
};
constexpr uint8_t kSyscallInfoEntry = 1, kSyscallInfoExit = 2;

// A traced run hands back to the server's loop after this many wait statuses (bounded slices).
constexpr int kStatusesPerSlice = 256;

const char* request_name(long request) {
  switch (request) {
    case PTRACE_CONT: return "PTRACE_CONT";
    case PTRACE_SINGLESTEP: return "PTRACE_SINGLESTEP";
    case PTRACE_SYSCALL: return "PTRACE_SYSCALL";
    case kPtraceSingleblock: return "PTRACE_SINGLEBLOCK";
    default: return "ptrace";
  }
}

const char* kind_name(StopKind kind) {
  switch (kind) {
    case StopKind::Signal: return "signal";
    case StopKind::Breakpoint: return "breakpoint";
    case StopKind::HwBreakpoint: return "hardware breakpoint";
    case StopKind::Watchpoint: return "watchpoint";
    case StopKind::Step: return "step";
    case StopKind::StepBranch: return "stepbranch";
    case StopKind::Exited: return "exited";
    case StopKind::Killed: return "killed";
    case StopKind::Fork: return "fork";
    case StopKind::VFork: return "vfork";
    case StopKind::VForkDone: return "vforkdone";
    case StopKind::Exec: return "exec";
    case StopKind::SyscallEntry: return "syscall entry";
    case StopKind::SyscallReturn: return "syscall return";
    case StopKind::NoResumed: return "no resumed";
    case StopKind::ThreadCreated: return "thread created";
    case StopKind::ThreadExited: return "thread exited";
  }
  return "?";
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by {}", strsignal(WTERMSIG(status)));
  if (!WIFSTOPPED(status)) return fmt::format("status {:#x}", status);
  int sig = WSTOPSIG(status), event = status >> 16;
  if (sig == (SIGTRAP | 0x80)) return "syscall stop";
  if (event) return fmt::format("ptrace event {}", event);
  return fmt::format("stopped by {}", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
}

}  // namespace

const char* mode_name(const RunMode& mode) {
  struct Name {
    const char* operator()(const run::Normal&) const { return "normal"; }
    const char* operator()(const run::RangeStep&) const { return "range-step"; }
    const char* operator()(const run::StepOver&) const { return "step-over"; }
    const char* operator()(const run::Traced&) const { return "traced"; }
    const char* operator()(const run::StepBranch&) const { return "stepbranch"; }
    const char* operator()(const run::WatchStep&) const { return "watch-step"; }
  };
  return std::visit(Name{}, mode);
}

// ---------------------------------------------------------------- creation

Result<std::unique_ptr<Process>> Process::launch(const LaunchOptions& options) {
  auto p = LinuxProcess::launch_process(options);
  if (!p) return p.error();
  return std::unique_ptr<Process>(std::move(p.value()));
}

Result<std::unique_ptr<Process>> Process::attach(pid_t pid) {
  auto p = LinuxProcess::attach_process(pid);
  if (!p) return p.error();
  return std::unique_ptr<Process>(std::move(p.value()));
}

LinuxProcess::LinuxProcess(pid_t pid, bool attached)
    : pid_(pid), attached_(attached), layout_(make_register_layout(host_xcr0())), mem_(pid),
      tracer_(std::make_unique<TraceManager>(TraceSource::Auto, [this](pid_t tid) { return get_pc(tid); })),
      code_cache_([this](uint64_t addr, std::span<uint8_t> out) -> size_t {
        if (alive_ && stepper_.patch_read_code(addr, out)) return out.size();
        auto n = read_memory(addr, out);  // through the breakpoint shadow: original bytes
        return n ? *n : 0;
      }),
      stepper_(*this, breakpoints_, mem_, code_cache_, tracer_, layout_),
      watch_reader_([this](uint64_t addr, std::span<uint8_t> out) {
        auto n = mem_.read(addr, out);
        if (!n || *n != out.size()) return false;
        breakpoints_.unshadow(addr, out);
        return true;
      }),
      code_reader_([this](uint64_t addr, std::span<uint8_t> out) -> size_t {
        auto n = read_memory(addr, out);
        return n ? *n : 0;
      }) {}

void LinuxProcess::configure(const ProcessSettings& settings) {
  settings_ = settings;
  uint64_t size = tracer_->buffer_size(0);
  tracer_ = std::make_unique<TraceManager>(settings.trace_source, [this](pid_t tid) { return get_pc(tid); });
  tracer_->set_buffer_size(size);
  TraceSetup setup = settings.trace_setup;
  setup.code = [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = read_memory(addr, out);  // our breakpoints hidden
    return n ? *n : 0;
  };
  tracer_->configure(setup);
}

LinuxProcess::~LinuxProcess() {
  // Launched programs die with us (as gdbserver's do); attached ones are let go. Fork children
  // not handed over go the same way (their own destructors).
  fork_children_.clear();
  if (!alive_) return;
  if (attached_) (void)detach();
  else (void)kill();
}

void LinuxProcess::set_trace_options(pid_t tid) {
  // EXITKILL only for what we launched: an attached program must survive the server.
  long opts = kTraceOptions | (attached_ ? 0 : PTRACE_O_EXITKILL);
  ::ptrace(PTRACE_SETOPTIONS, tid, nullptr, reinterpret_cast<void*>(opts));
}

Result<std::unique_ptr<LinuxProcess>> LinuxProcess::launch_process(const LaunchOptions& options) {
  auto pid = launch_traced(options);
  if (!pid) return pid.error();
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(*pid, false));
  p->set_trace_options(*pid);
  p->threads_.emplace(*pid, LinuxThread{*pid});
  p->last_stop_ = p->make_event(StopKind::Signal, *pid, SIGTRAP);
  return p;
}

Result<std::unique_ptr<LinuxProcess>> LinuxProcess::attach_process(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
    return Error{ESRCH, fmt::format("Cannot attach to process {}: No such process.", pid)};
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(pid, true));
  p->fresh_attach_ = true;
  int first_signal = 0;
  pid_t first_signal_tid = pid;
  // Threads may be created while we attach: re-scan until no new one shows up.
  for (bool added = true; added;) {
    added = false;
    for (pid_t tid : list_tasks(pid)) {
      if (p->threads_.count(tid)) continue;
      if (::ptrace(PTRACE_ATTACH, tid, nullptr, nullptr) != 0) {
        int e = errno;
        if (e == ESRCH && tid != pid) continue;  // the thread exited meanwhile
        p->alive_ = false;
        for (auto& [other, t] : p->threads_) ::ptrace(PTRACE_DETACH, other, nullptr, nullptr);
        if (e == EPERM)
          return Error{EPERM, fmt::format("Cannot attach to process {}: Operation not permitted (is it already "
                                          "traced, owned by another user, or does "
                                          "/proc/sys/kernel/yama/ptrace_scope forbid it?).", pid)};
        return errno_error(fmt::format("Cannot attach to process {}", pid), e);
      }
      // Wait for the attach SIGSTOP. A signal that comes first is what the attach stop reports
      // (as gdbserver does); the client decides whether to pass it on.
      for (;;) {
        int status = 0;
        if (::waitpid(tid, &status, __WALL) < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (!WIFSTOPPED(status)) break;
        if (WSTOPSIG(status) == SIGSTOP) break;
        if (WSTOPSIG(status) != SIGTRAP && !first_signal) {
          first_signal = WSTOPSIG(status);
          first_signal_tid = tid;
        }
        ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
      }
      p->threads_.emplace(tid, LinuxThread{tid});
      added = true;
    }
  }
  if (!p->threads_.count(pid)) {
    p->alive_ = false;
    return Error{ESRCH, fmt::format("Cannot attach to process {}: No such process.", pid)};
  }
  for (auto& [tid, t] : p->threads_) p->set_trace_options(tid);
  if (first_signal && p->threads_.count(first_signal_tid)) {
    p->last_stop_ = p->make_event(StopKind::Signal, first_signal_tid, first_signal);
    p->threads_.at(first_signal_tid).last_signal = first_signal;
  } else {
    p->last_stop_ = p->make_event(StopKind::Signal, pid, 0);  // GDB shows T00 after attach
  }
  return p;
}

// ---------------------------------------------------------------- small helpers

std::vector<pid_t> LinuxProcess::threads() const {
  std::vector<pid_t> out;
  if (has_thread(pid_)) out.push_back(pid_);
  for (const auto& [tid, t] : threads_)
    if (tid != pid_) out.push_back(tid);
  return out;
}

std::string LinuxProcess::thread_name(pid_t tid) const { return read_thread_name(pid_, tid); }
int LinuxProcess::thread_core(pid_t tid) const { return read_thread_core(pid_, tid); }

LinuxThread* LinuxProcess::find(pid_t tid) {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

uint64_t LinuxProcess::get_pc(pid_t tid) const {
  errno = 0;
  long v = ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

void LinuxProcess::set_pc(pid_t tid, uint64_t pc) const {
  ::ptrace(PTRACE_POKEUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), reinterpret_cast<void*>(pc));
}

void LinuxProcess::set_mode(LinuxThread& t, RunMode mode) {
  if (settings_.log && mode.index() != t.mode.index())
    log("thread {}: {} -> {}", t.tid, mode_name(t.mode), mode_name(mode));
  t.mode = std::move(mode);
}

StopEvent LinuxProcess::make_event(StopKind kind, pid_t tid, int signo) const {
  StopEvent ev;
  ev.kind = kind;
  ev.pid = pid_;
  ev.tid = tid;
  ev.signo = signo;
  return ev;
}

bool LinuxProcess::all_stopped() const {
  for (const auto& [tid, t] : threads_)
    if (t.running) return false;
  return true;
}

bool LinuxProcess::leader_is_zombie(LinuxThread& leader) {
  if (leader.zombie) return true;
  if (leader.tid != pid_ || threads_.size() < 2) return false;
  char state = read_thread_state(pid_, pid_);
  if (state != 'Z' && state != 'X') return false;
  log("thread {}: the leader exited (zombie); no longer waited for", pid_);
  leader.zombie = true;
  leader.running = false;
  leader.sigstop_expected = false;
  if (non_stop_ && leader.resumed) {
    // Non-stop: the leader is gone for the client as any exited thread (gdbserver drops it
    // from the list too); nothing of it will ever be reported.
    leader.resumed = false;
    deferred_.erase(leader.tid);
    if (thread_events_) {
      ns_events_.push_back(make_event(StopKind::ThreadExited, leader.tid, 0));
    } else {
      resumed_thread_gone_ = true;
    }
    wants_poll_ = true;
  }
  return true;
}

bool LinuxProcess::lifted_elsewhere(const LinuxThread& t, uint64_t addr) const {
  for (const auto& [tid, other] : threads_)
    if (&other != &t && other.lifted_step && other.lifted_step->lifted == addr) return true;
  return false;
}

// ---------------------------------------------------------------- execution

Result<void> LinuxProcess::resume(const ResumePlan& plan) {
  fresh_attach_ = false;
  if (!alive_ && exit_unreported_) {  // it exited while paused: that is the event now
    ready_event_ = last_stop_;
    phase_ = Phase::Running;
    return {};
  }
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (non_stop_) return resume_non_stop(plan);
  if (phase_ != Phase::Stopped) return Error{EBUSY, "The process is already running."};

  std::map<pid_t, ResumeAction> actions;
  for (const auto& [tid, t] : threads_) {
    if (t.zombie) continue;
    auto it = plan.threads.find(tid);
    std::optional<ResumeAction> a = it != plan.threads.end() ? std::optional(it->second) : plan.others;
    if (a && a->kind != ResumeKind::Stop) actions[tid] = *a;
  }
  for (const auto& [tid, a] : plan.threads)
    if (!threads_.count(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  if (actions.empty()) return Error{EINVAL, "No thread to resume."};

  // A thread that already has an event to report reports it now and nobody runs
  // (gdbserver's pending status). A breakpoint that was removed meanwhile is forgotten.
  for (auto& [tid, a] : actions) {
    LinuxThread& t = threads_.at(tid);
    if (!t.pending) continue;
    if (t.pending->kind == StopKind::Breakpoint && !breakpoints_.has_client(get_pc(tid))) {
      t.pending.reset();
      continue;
    }
    ready_event_ = *t.pending;
    t.pending.reset();
    phase_ = Phase::Running;
    return {};
  }

  step_over_clients_ = plan.step_over_client_breakpoints;
  for (auto& [tid, a] : actions) {
    LinuxThread& t = threads_.at(tid);
    t.action = a;
    if (a.signo == 0 && t.deliver_signal) a.signo = t.deliver_signal;
    t.deliver_signal = 0;
    t.last_signal = 0;
  }
  deferred_ = std::move(actions);
  phase_ = Phase::Running;
  start_deferred();
  return {};
}

// Resumes the deferred threads. A thread sitting on an int3 of ours (or of an LLDB client)
// first executes the instruction there: a control-flow instruction is emulated in place (so a
// shared int3 is never lifted while others run), anything else is stepped over with the int3
// lifted while the others wait. A GDB client's breakpoint at the pc is hit at once instead.
// Under emulated watchpoints every step is checked, so nothing is emulated: the step-over runs.
void LinuxProcess::start_deferred() {
  int emulations = 0;
  for (auto it = deferred_.begin(); it != deferred_.end();) {
    LinuxThread* t = find(it->first);
    if (!t) {
      it = deferred_.erase(it);
      continue;
    }
    uint64_t pc = get_pc(t->tid);
    bool passing = pass_once_ == std::pair{t->tid, pc};  // a hit that did not count (conditions)
    if (!breakpoints_.contains(pc) || (!step_over_clients_ && breakpoints_.has_client(pc) && !passing)) {
      ++it;
      continue;
    }
    int signo = it->second.signo;
    if (signo == 0 && it->second.kind != ResumeKind::Stop && !watch_stepping()) {
      auto insn = code_cache_.insn_at(pc);
      if (insn && insn->second && flow_is_emulatable(insn->second->kind)) {
        if (auto out = stepper_.emulate(*t, *insn->second)) {
          stepper_.flow_done(*t, *insn->second, *out);
          const ResumeAction& a = it->second;
          uint64_t now = out->next_pc;
          bool step_done = step_ends_action(a, now);
          if (step_done || (a.kind == ResumeKind::Continue && breakpoints_.has_client(now) && !conditions_.any_at(now))) {
            StopEvent ev = make_event(step_done ? StopKind::Step : StopKind::Breakpoint, t->tid, SIGTRAP);
            if (non_stop_) {  // this thread's event; the others start all the same
              it = deferred_.erase(it);
              report(*t, ev);
              continue;
            }
            // All-stop: nobody ran; the emulated step (or the branch straight onto a client
            // breakpoint) alone is the event.
            deferred_.clear();
            return report(*t, ev);
          }
          if (++emulations < 4096) continue;  // same thread again: its new pc may hold an int3 too
          pc = now;
        }
      }
    }
    t->action.signo = 0;  // the signal goes with the step-over
    deferred_.erase(it);
    if (non_stop_) begin_step_over(*t);  // the running threads must not pass the lifted int3
    if (!breakpoints_.lift(mem_, pc)) {
      if (non_stop_) {
        step_over_tid_ = 0;
        resume_paused(std::exchange(step_over_paused_, {}));
      }
      continue;
    }
    set_mode(*t, run::StepOver{pc});
    resume_thread(*t, signo);
    return;
  }
  auto todo = std::move(deferred_);
  deferred_.clear();
  for (auto& [tid, a] : todo) {
    LinuxThread* t = find(tid);
    if (!t) continue;
    if (a.kind == ResumeKind::Continue && stepper_.traced(tid)) {
      if (a.signo && signal_is_caught(pid_, a.signo)) stepper_.deliver_traced_signal(*t, a.signo);
      else stepper_.continue_traced(*t, a.signo);
      continue;
    }
    set_mode(*t, a.kind == ResumeKind::RangeStep ? RunMode{run::RangeStep{}} : RunMode{run::Normal{}});
    resume_thread(*t, a.signo);
  }
}

// Issues the ptrace resume for t's mode. A watchpoint hit found by t's last checked step is
// reported instead: whatever the mode meant to do next comes after it.
void LinuxProcess::resume_thread(LinuxThread& t, int signo) {
  if (stopping()) return;  // everybody is being stopped for a reported event: stay stopped
  if (non_stop_) {
    if (!t.resumed || t.paused) return;  // the client's stopped threads never run
    // A stop the client asked for: here, between two pieces of internal work, is a clean place.
    if (t.stop_requested) return report(t, make_event(StopKind::Signal, t.tid, t.stop_signal));
  }
  if (t.watch_hit) return report(t, watch_event(t.tid, *t.watch_hit));
  if (watch_stepping() && !t.overlaid() &&
      (t.in<run::Traced>() || (t.in<run::Normal>() && t.action.kind == ResumeKind::Continue))) {
    // A continue becomes checked single steps; a traced thread records each step's branch.
    stepper_.arm(t, 0);
    set_mode(t, run::WatchStep{});
  }
  auto* sb = std::get_if<run::StepBranch>(&t.mode);
  bool block = sb && sb->singleblock && !t.overlaid();
  if (block) {
    // What classify_block_step needs to read the stop: the start (eflags: the kernel single-steps
    // when the program set TF) and a DR6 whose BS bit only this step can set.
    user_regs_struct gp{};
    if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) == 0) sb->block = BlockStepStart{gp.rip, gp.eflags};
    DebugRegisters::clear_dr6(t.tid);
  }
  bool single = t.overlaid() || t.in<run::StepOver>() || t.in<run::RangeStep>() || t.in<run::WatchStep>() ||
                (t.in<run::Normal>() && t.action.kind == ResumeKind::Step) || (sb && watch_stepping());
  if (single && stepper_.traced(t.tid) && !t.overlaid()) {
    // A client step of a traced thread: remember where it was to record a branch it takes.
    // From a syscall's entry stop a step only finishes the syscall: nothing to record.
    uint64_t pc = get_pc(t.tid);
    t.cursor.step_from = t.in_syscall ? 0 : pc;
    t.cursor.step_into_handler = signo != 0 && signal_is_caught(pid_, signo);
    if (t.cursor.step_into_handler) t.cursor.signal_from = stepper_.insn_before_pc(t, pc).value_or(0);
  }
  bool run_ahead = false;
  if (watch_stepping() && !block) {
    auto how = prepare_watch_step(t, signo);
    if (how == WatchRun::Gone) return;  // its exit status will tell
    run_ahead = how == WatchRun::Ahead;
    single = !run_ahead;
  }
  // A plain continue stops at syscalls while the client catches them; so does a checked
  // step over a syscall instruction (a single step would run through the syscall unseen).
  // A traced thread too: the syscall instruction ending its block runs lifted, under
  // PTRACE_SYSCALL rather than a single step, and untraced stretches run under it.
  bool lifted_syscall = t.lifted_step && !t.signal_entry && t.lifted_step->insn.kind == FlowKind::Syscall;
  bool syscall_stops = catch_syscalls_ &&
                       ((!t.overlaid() && (t.in<run::Normal>() || t.in<run::Traced>() ||
                                           (t.in<run::WatchStep>() && !run_ahead && (t.in_syscall || at_syscall(t.tid))))) ||
                        (lifted_syscall && !t.in<run::WatchStep>() && !t.in<run::StepBranch>()));
  long request = block ? kPtraceSingleblock
                 : syscall_stops && (!single || t.in<run::WatchStep>() || lifted_syscall) ? long{PTRACE_SYSCALL}
                 : single ? long{PTRACE_SINGLESTEP}
                          : long{PTRACE_CONT};
  // Resumed from a syscall's entry stop with no syscall or step stop to come (the client no
  // longer catches syscalls): the instruction is done as far as the trace can tell.
  if (t.syscall_flow && request != PTRACE_SYSCALL && request != PTRACE_SINGLESTEP) finish_syscall_flow(t);
  if (request != PTRACE_SYSCALL) t.in_syscall = false;  // no exit stop will tell (the syscall ends unseen)
  if (::ptrace(static_cast<__ptrace_request>(request), t.tid, nullptr,
               reinterpret_cast<void*>(static_cast<long>(signo))) != 0)
    return;  // ESRCH: the thread is gone; its exit status will tell
  if (settings_.log && !t.in<run::Traced>() && !t.in<run::WatchStep>())  // those two resume per block: too many lines
    log("thread {}: {} (signal {}), mode {}", t.tid, request_name(request), signo, mode_name(t.mode));
  t.stepping = request == PTRACE_SINGLESTEP || request == kPtraceSingleblock;
  t.running = true;
  t.request = request;
}

// A step of the client's action ended at pc: is the action done? A step is; a range step when
// pc leaves the range or reaches a client breakpoint (GDB then sees it as reached).
bool LinuxProcess::step_ends_action(const ResumeAction& a, uint64_t pc) const {
  if (a.kind == ResumeKind::Step) return true;
  if (a.kind != ResumeKind::RangeStep) return false;
  return pc < a.range_start || pc >= a.range_end || breakpoints_.has_client(pc);
}

bool LinuxProcess::at_syscall(pid_t tid) {
  auto insn = code_cache_.insn_at(get_pc(tid));
  return insn && insn->second && insn->second->kind == FlowKind::Syscall;
}

// Carries on in t's mode after internal work (an emulated or lifted control-flow instruction).
void LinuxProcess::proceed(LinuxThread& t) {
  if (stopping()) return;  // stays where it is; the next resume carries on
  if (t.in<run::Traced>()) return stepper_.continue_traced(t, 0);
  if (t.in<run::StepBranch>()) return stepper_.stepbranch_run(t);
  if (step_ends_action(t.action, get_pc(t.tid))) return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
  resume_thread(t, 0);
}

Result<void> LinuxProcess::step_branch(pid_t tid, uint32_t count) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (non_stop_) return Error{EOPNOTSUPP, "stepbranch needs all-stop mode (set non-stop off)."};
  if (phase_ != Phase::Stopped) return Error{EBUSY, "The process is already running."};
  LinuxThread* t = find(tid);
  if (!t) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  if (t->pending) {  // an event already waiting for this thread comes first
    ready_event_ = *t->pending;
    t->pending.reset();
    phase_ = Phase::Running;
    return {};
  }
  t->action = ResumeAction{ResumeKind::Continue, 0};
  t->last_signal = 0;
  phase_ = Phase::Running;
  log("thread {}: stepbranch {}", tid, count);
  // Checked steps (emulated watchpoints) need one instruction at a time: no single-block steps.
  stepper_.start_step_branch(*t, count, settings_.singleblock && !watch_stepping());
  return {};
}

void LinuxProcess::interrupt() {
  if (non_stop_) {
    // vCtrlC: one running thread (the leader if it runs) stops with SIGINT, as gdbserver's
    // SIGINT to the process stops the thread that takes it.
    LinuxThread* target = find(pid_);
    if (!target || !target->resumed || target->zombie) {
      target = nullptr;
      for (auto& [tid, t] : threads_)
        if (t.resumed && !t.zombie) {
          target = &t;
          break;
        }
    }
    if (target) request_stop(*target, SIGINT);
    return;
  }
  if (!alive_ || phase_ != Phase::Running || ready_event_) return;
  // A SIGSTOP of ours, reported as SIGINT: nothing stale is left to deliver afterwards.
  LinuxThread* target = find(pid_);
  if (!target || !target->running || leader_is_zombie(*target)) {
    target = nullptr;
    for (auto& [tid, t] : threads_)
      if (t.running) {
        target = &t;
        break;
      }
  }
  if (!target) return;
  interrupt_requested_ = true;
  if (!target->sigstop_expected && signal_thread(pid_, target->tid, SIGSTOP) == 0) target->sigstop_expected = true;
}

// ---------------------------------------------------------------- waiting

StopEvent LinuxProcess::finish(StopEvent ev) {
  settle_threads();
  chosen_.reset();
  ready_event_.reset();
  phase_ = Phase::Stopped;
  interrupt_requested_ = false;
  if (ev.kind == StopKind::Exited || ev.kind == StopKind::Killed) exit_unreported_ = false;
  if (ev.kind != StopKind::NoResumed) last_stop_ = ev;
  log("process {}: stop reported: {} thread {} signal {}", pid_, kind_name(ev.kind), ev.tid, ev.signo);
  return ev;
}

std::optional<StopEvent> LinuxProcess::poll_events() {
  wants_poll_ = false;
  if (ready_event_) return finish(*ready_event_);
  if (!alive_) return std::nullopt;
  if (!stashed_.empty()) handle_stashed();

  // Per-thread waits (not waitpid(-1)): other children of the server are none of our business.
  // A traced run can produce statuses forever: hand back to the loop after a bounded slice.
  int handled = 0;
  // A thread resumed internally (a traced block, a step) usually stops again within
  // microseconds: wait for it here a little rather than sleeping in the event loop, which
  // costs two context switches a stop.
  auto spin_until = std::chrono::steady_clock::now();
  for (bool progress = true; alive_;) {
    if (handled >= kStatusesPerSlice && !(stopping() && all_stopped())) {
      wants_poll_ = true;
      return std::nullopt;
    }
    progress = false;
    std::vector<pid_t> tids;
    tids.reserve(threads_.size());
    for (const auto& [tid, t] : threads_) tids.push_back(tid);
    for (pid_t tid : tids) {
      if (!alive_) break;
      int status = 0;
      pid_t w = ::waitpid(tid, &status, WNOHANG | __WALL);
      if (w == 0) continue;
      if (w < 0) {
        if (errno == ECHILD && tid != pid_) {
          // Vanished: a thread exec'd (this one, whose tid becomes the leader's, or another).
          // The leader's exec event is on its way; until it comes, nothing is "no resumed".
          threads_.erase(tid);
          exec_expected_until_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
        }
        continue;
      }
      progress = true;
      ++handled;
      handle_stop(tid, status);
    }
    if (progress) {
      spin_until = std::chrono::steady_clock::now() + settings_.busy_poll;
      continue;
    }
    if (handled > 0 && phase_ == Phase::Running && std::chrono::steady_clock::now() < spin_until) {
      ::sched_yield();  // let the inferior have the CPU if it shares ours
      continue;
    }
    break;
  }
  if (!alive_) {
    ns_events_.clear();  // their threads are gone with the process
    return finish(last_stop_);  // forget_process() put the exit event there
  }
  if (non_stop_) {
    if (handled == 0) {
      LinuxThread* leader = find(pid_);
      auto now = std::chrono::steady_clock::now();
      if (leader && leader->running && now >= next_zombie_check_) {
        next_zombie_check_ = now + std::chrono::milliseconds(20);
        (void)leader_is_zombie(*leader);
      }
    }
    return next_non_stop_event();
  }
  if (phase_ == Phase::Running && handled == 0) {
    // A running leader that called pthread_exit becomes a zombie without any wait status;
    // look for it now and then (not on every poll: it costs a /proc read).
    auto now = std::chrono::steady_clock::now();
    LinuxThread* leader = find(pid_);
    if (leader && leader->running && now >= next_zombie_check_) {
      next_zombie_check_ = now + std::chrono::milliseconds(20);
      (void)leader_is_zombie(*leader);
    }
  }
  if (stopping() && chosen_ && all_stopped()) return finish(*chosen_);
  // Every thread the client resumed has exited (the others it left stopped): nothing will ever
  // report otherwise (gdbserver's "no resumed" stop).
  if (phase_ == Phase::Running && deferred_.empty() && all_stopped() &&
      std::chrono::steady_clock::now() >= exec_expected_until_)
    return finish(make_event(StopKind::NoResumed, 0));
  return std::nullopt;
}

// ---------------------------------------------------------------- the stop dispatcher

void LinuxProcess::handle_stop(pid_t tid, int status) {
  LinuxThread* t = find(tid);
  if (!t) return;
  ++ptrace_stops_;
  if (settings_.log && !t->in<run::Traced>() && !t->in<run::WatchStep>())
    log("thread {}: {} (mode {})", tid, describe_status(status), mode_name(t->mode));
  if (WIFEXITED(status) || WIFSIGNALED(status)) return handle_exit(*t, status);
  if (!WIFSTOPPED(status)) return;
  t->running = false;
  if (stepper_.patch_stop(*t, status)) return;  // block patching's own stop (a full ring, a stub's miss)
  int sig = WSTOPSIG(status), event = status >> 16;
  if (sig == SIGTRAP && event != 0) return handle_ptrace_event(*t, event);
  if (sig == (SIGTRAP | 0x80)) return handle_syscall_stop(*t);
  if (sig == SIGSTOP && t->sigstop_expected) {
    t->sigstop_expected = false;
    if (interrupt_requested_ && !stopping()) {
      interrupt_requested_ = false;
      return report(*t, make_event(StopKind::Signal, t->tid, SIGINT));
    }
    if (non_stop_ && t->stop_requested && !stopping())
      return report(*t, make_event(StopKind::Signal, t->tid, t->stop_signal));
    if (!stopping()) resume_thread(*t, 0);  // a leftover stop of ours: carry on in the same mode
    return;
  }
  if (sig == SIGTRAP) return handle_trap(*t);
  handle_signal(*t, sig);
}

void LinuxProcess::handle_exit(LinuxThread& t, int status) {
  pid_t tid = t.tid;
  if (tid == pid_) {
    // The leader is reaped last (after every other thread): the whole process is gone.
    StopEvent ev = WIFEXITED(status) ? make_event(StopKind::Exited, tid) : make_event(StopKind::Killed, tid, WTERMSIG(status));
    ev.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    forget_process(ev);
    exit_unreported_ = true;
    return;
  }
  thread_exited(t, status);
}

void LinuxProcess::handle_signal(LinuxThread& t, int sig) {
  // Signals to pass without telling the client are re-delivered at once.
  if (!pass_signals_.count(sig)) {
    t.last_signal = sig;
    return report(t, make_event(StopKind::Signal, t.tid, sig));
  }
  if (stopping()) {
    t.deliver_signal = sig;
    if (auto* over = std::get_if<run::StepOver>(&t.mode)) {
      (void)breakpoints_.lower(mem_, over->addr);
      set_mode(t, run::Normal{});
    }
    return;
  }
  if (t.in<run::Traced>()) {
    stepper_.commit_plan(t, get_pc(t.tid));
    if (signal_is_caught(pid_, sig)) return stepper_.deliver_traced_signal(t, sig);
    return stepper_.continue_traced(t, sig);
  }
  resume_thread(t, sig);
}

void LinuxProcess::handle_trap(LinuxThread& t) {
  siginfo_t si{};
  ::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si);
  // A block step's DR6 (BS) before take_hit() clears it.
  const auto* sb = std::get_if<run::StepBranch>(&t.mode);
  std::optional<uint64_t> dr6;
  if (t.stepping && sb && sb->singleblock) dr6 = DebugRegisters::read_dr6(t.tid);
  // Hardware breakpoints and watchpoints first (DR6 says which slot fired).
  if (auto hit = debug_.take_hit(t.tid)) {
    if (hit->kind == HwKind::Execute) {
      if (conditions_.any_at(hit->addr) && !client_hit_reported(t, hit->addr, false)) return;
      return report(t, make_event(StopKind::HwBreakpoint, t.tid, SIGTRAP));
    }
    return report(t, watch_event(t.tid, WatchHit{hit->kind, hit->addr}));
  }
  bool step_trap = t.stepping && si.si_code > 0 && si.si_code != SI_KERNEL;
  // A checked step that ended in anything but a step trap (an int3 ran instead) checks nothing.
  if (!step_trap) t.watch_step.reset();
  uint64_t pc = get_pc(t.tid);
  if (t.lifted_step && si.si_code == SI_KERNEL && t.lifted_step->lifted && pc - 1 == t.lifted_step->lifted) {
    // The lifted instruction is the program's own int3 (a Trap we let the CPU run).
    (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
    t.lifted_step.reset();
    t.last_signal = SIGTRAP;
    return report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
  }
  if (si.si_code == SI_KERNEL && breakpoints_.contains(pc - 1)) {
    // int3 leaves pc after itself: rewind to the breakpoint address.
    set_pc(t.tid, pc - 1);
    if (!breakpoints_.has_client(pc - 1)) return handle_internal_int3(t, pc - 1);
    if (conditions_.any_at(pc - 1) && !client_hit_reported(t, pc - 1, true)) return;
    bool hardware = breakpoints_.client_is_hardware(pc - 1);
    return report(t, make_event(hardware ? StopKind::HwBreakpoint : StopKind::Breakpoint, t.tid, SIGTRAP));
  }
  if (step_trap) return handle_step_done(t, si.si_code, dr6);
  if (si.si_code == SI_KERNEL && vanished_breakpoint(pc - 1)) {
    // One of our int3s was hit, then removed (another thread disarmed it) before this status
    // was read: the program never saw it. Run the original instruction as if nothing happened.
    set_pc(t.tid, pc - 1);
    if (stopping()) return;  // the process is stopping anyway: the thread waits here
    if (!t.overlaid() && (t.in<run::Traced>() || t.in<run::Normal>())) return stepper_.continue_traced(t, 0);
    if (!t.overlaid() && t.in<run::StepBranch>()) return stepper_.stepbranch_run(t);
    return resume_thread(t, 0);
  }
  // Anything else is the program's own trap (its int3, raise(SIGTRAP)).
  t.last_signal = SIGTRAP;
  report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
}

void LinuxProcess::handle_internal_int3(LinuxThread& t, uint64_t addr) {
  if (t.overlaid()) return report(t, make_event(StopKind::Breakpoint, t.tid, SIGTRAP));
  if (t.in<run::WatchStep>()) {
    if (t.armed == addr) {  // the end of a run ahead: that instruction is checked next
      stepper_.arm(t, 0);
      if (!stopping() && !watch_emulate_flow(t, addr)) resume_thread(t, 0);
      return;
    }
    // Someone else's int3: the instruction under it runs lifted, checked as any step.
    FlowInsn one;
    one.addr = addr;
    one.kind = FlowKind::Trap;
    if (auto d = code_cache_.insn_at(addr)) one.len = d->first;
    if (!stopping()) (void)stepper_.execute_flow(t, one);
    return;
  }
  if (t.in<run::Traced>() || t.in<run::Normal>() || t.in<run::RangeStep>()) return stepper_.internal_hit(t, addr);
  if (t.in<run::StepBranch>()) {
    stepper_.arm(t, 0);
    if (!stopping()) stepper_.stepbranch_run(t);
    return;
  }
  report(t, make_event(StopKind::Breakpoint, t.tid, SIGTRAP));
}

bool LinuxProcess::vanished_breakpoint(uint64_t addr) const {
  // Ours once, and no int3 there now (the program's own int3s stay in memory; `int $3`, CD 03,
  // also traps with SI_KERNEL but was never one of our addresses).
  if (!breakpoints_.ever_inserted(addr)) return false;
  uint8_t byte = 0;
  auto n = mem_.read(addr, std::span<uint8_t>(&byte, 1));
  return n && *n == 1 && byte != 0xcc;
}

void LinuxProcess::handle_step_done(LinuxThread& t, int si_code, std::optional<uint64_t> dr6) {
  if (t.watch_step) {
    // Whatever the mode does next, a hit stops the thread here: report() and resume_thread()
    // both give way to it.
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  if (t.lifted_step) return stepper_.lifted_step_done(t);
  if (t.signal_entry) return stepper_.signal_entry_done(t);
  if (t.syscall_flow) {
    // A step from a syscall's entry stop ends after its exit: that finishes the syscall; the
    // step itself executed nothing more.
    finish_syscall_flow(t);
    t.cursor.step_from = 0;
    if (t.in<run::Normal>() || t.in<run::Traced>()) return proceed(t);
  }
  if (auto* sb = std::get_if<run::StepBranch>(&t.mode))
    return sb->singleblock ? stepper_.stepbranch_singleblock_done(t, si_code, dr6) : stepper_.stepbranch_step_done(t);
  uint64_t pc = get_pc(t.tid);
  if (stepper_.traced(t.tid)) stepper_.record_step(t, pc);
  if (t.in<run::WatchStep>()) {
    if (!stopping()) resume_thread(t, 0);
    return;
  }
  if (auto* over = std::get_if<run::StepOver>(&t.mode)) {
    (void)breakpoints_.lower(mem_, over->addr);
    set_mode(t, run::Normal{});
    if (step_ends_action(t.action, pc)) {
      if (non_stop_) {  // this thread's event; the paused and waiting ones go on
        step_over_tid_ = 0;
        report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
        return end_step_over();
      }
      deferred_.clear();  // the others never ran: the step alone is the event
      return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
    }
    ResumeAction next = t.action;
    next.signo = 0;
    deferred_[t.tid] = next;
    if (non_stop_) return end_step_over();  // resumes the paused ones, then start_deferred
    if (!stopping()) start_deferred();
    return;
  }
  if (t.in<run::RangeStep>() && !step_ends_action(t.action, pc)) {
    if (!stopping()) resume_thread(t, 0);
    return;
  }
  report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
}

void LinuxProcess::handle_ptrace_event(LinuxThread& t, int event) {
  unsigned long msg = 0;
  ::ptrace(PTRACE_GETEVENTMSG, t.tid, nullptr, &msg);
  const pid_t child = static_cast<pid_t>(msg);
  bool keep_going = !stopping();
  switch (event) {
    case PTRACE_EVENT_CLONE: {
      // A lone thread running ahead of its watch checks has an int3 in shared memory: the new
      // thread could meet it. From now on both step.
      if (t.in<run::WatchStep>()) stepper_.arm(t, 0);
      // The new thread starts with a SIGSTOP; take it now so the thread is known and stopped.
      int status = 0;
      while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
      log("thread {}: new thread {}", t.tid, child);
      (void)debug_.apply(child);
      LinuxThread& nt = threads_.emplace(child, LinuxThread{child}).first->second;
      stepper_.patch_thread_created(child, non_stop_);  // block patching: a ring of its own
      nt.action = ResumeAction{};  // new threads continue
      nt.resumed = non_stop_;           // running as its parent, for the client too
      tracer_->thread_created(child);  // coverage traces new threads from their first instruction
      if (thread_events_) {
        // QThreadEvents: the new thread stays stopped and is reported (all-stop: like any event).
        nt.resumed = true;
        report(nt, make_event(StopKind::ThreadCreated, child, SIGTRAP));
      } else if (!deferred_.empty() || step_over_tid_) {
        deferred_[child] = ResumeAction{};
      } else if (keep_going) {
        stepper_.continue_traced(nt, 0);  // traced (coverage) or plain
      }
      break;
    }
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
      return handle_fork(t, event, child);
    case PTRACE_EVENT_VFORK_DONE:
      breakpoints_.set_shared_with_vfork_child(false);
      breakpoints_.reinsert_all(mem_);
      if (report_vforks_) return report(t, make_event(StopKind::VForkDone, t.tid, SIGTRAP));
      break;
    case PTRACE_EVENT_EXEC:
      return handle_exec();
    default:
      break;
  }
  if (keep_going && !stopping()) resume_thread(t, 0);  // it was running (maybe stepping over): carry on
}

void LinuxProcess::handle_fork(LinuxThread& t, int event, pid_t child) {
  // The child starts stopped and traced. Our int3s and debug registers come out of it first
  // (a vfork child shares our memory until it execs or exits: they go back in at VFORK_DONE);
  // then it is reported (a process of its own, handed over with take_fork_children), or let go.
  int status = 0;
  while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
  if (event == PTRACE_EVENT_FORK) {
    ProcMemory child_mem(child);
    breakpoints_.restore_into(child_mem);
    stepper_.patch_restore_into(child_mem);
  } else {
    breakpoints_.restore_into(mem_);
    breakpoints_.set_shared_with_vfork_child(true);  // int3s armed meanwhile wait for VFORK_DONE
    stepper_.patch_suspend(&t);  // the child runs in our memory: original code
  }
  DebugRegisters::clear_thread(child);
  bool tell = event == PTRACE_EVENT_FORK ? report_forks_ : report_vforks_;
  log("thread {}: {} child {}{}", t.tid, event == PTRACE_EVENT_FORK ? "fork" : "vfork", child,
      tell && WIFSTOPPED(status) ? ", reported" : ", let go");
  if (!tell || !WIFSTOPPED(status)) {
    ::ptrace(PTRACE_DETACH, child, nullptr, nullptr);
    if (!stopping()) resume_thread(t, 0);
    return;
  }
  // Already traced with our options (inherited from the fork) and stopped; its memory holds
  // none of our int3s.
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(child, attached_));
  p->threads_.emplace(child, LinuxThread{child});
  p->last_stop_ = p->make_event(StopKind::Signal, child, SIGTRAP);
  p->configure(settings_);
  if (non_stop_) (void)p->set_non_stop(true);  // a child of a non-stop session is non-stop too
  p->thread_events_ = thread_events_;
  fork_children_.push_back(std::move(p));
  StopEvent ev = make_event(event == PTRACE_EVENT_FORK ? StopKind::Fork : StopKind::VFork, t.tid, SIGTRAP);
  ev.child_pid = child;
  report(t, ev);
}

void LinuxProcess::handle_exec() {
  exec_expected_until_ = {};
  // The image changed: breakpoints are gone, only the thread that exec'd remains, as the leader.
  // Reported as an exec; a client that did not ask for exec events sees a SIGTRAP.
  for (const auto& [tid, old] : threads_)
    if (tid != pid_) tracer_->thread_exited(tid);
  threads_.clear();
  deferred_.clear();
  chosen_.reset();
  phase_ = Phase::Running;
  // Non-stop: the other threads are gone, with their unreported events and any pause.
  ns_events_.clear();
  stashed_.clear();
  step_over_tid_ = 0;
  step_over_paused_.clear();
  LinuxThread& leader = threads_.emplace(pid_, LinuxThread{pid_}).first->second;
  leader.resumed = non_stop_;
  breakpoints_.clear();
  conditions_.clear();
  code_cache_.clear();
  stepper_.patch_reset();
  watch_.forget_code();
  mem_.open(pid_);
  (void)debug_.apply(pid_);
  StopEvent ev = make_event(StopKind::Exec, pid_, SIGTRAP);
  if (auto path = read_exe_path(pid_)) ev.exec_path = *path;
  log("process {}: exec {}", pid_, ev.exec_path);
  report(leader, ev);
}

void LinuxProcess::set_catch_syscalls(bool on, std::set<int> syscalls) {
  catch_syscalls_ = on;
  caught_syscalls_ = on ? std::move(syscalls) : std::set<int>{};
}

void LinuxProcess::finish_syscall_flow(LinuxThread& t) {
  FlowInsn insn = *t.syscall_flow;
  t.syscall_flow.reset();
  uint64_t pc = get_pc(t.tid);
  // Elsewhere than after the instruction: rt_sigreturn, or a handler entered at syscall exit.
  stepper_.flow_done(t, insn, FlowOutcome{pc, insn.len != 0 && pc != insn.addr + insn.len});
}

void LinuxProcess::handle_syscall_stop(LinuxThread& t) {
  // Entry or exit? The kernel says so since 5.3; before that, alternate (a step from an
  // entry stop ends the syscall without an exit stop, so the toggle is only a fallback).
  SyscallInfo info{};
  long n = ::ptrace(PTRACE_GET_SYSCALL_INFO, t.tid, reinterpret_cast<void*>(sizeof info), &info);
  bool entry = n > 0 ? info.op == kSyscallInfoEntry : !t.in_syscall;
  bool known = n <= 0 || info.op == kSyscallInfoEntry || info.op == kSyscallInfoExit;
  if (entry && n > 0) {
    t.syscall_nr = static_cast<int>(info.entry.nr);
  } else {
    // orig_rax holds the number at any syscall stop: the entry of an old kernel, and the exit
    // of a syscall whose entry we did not see (entered before syscalls were caught, or an
    // execve that rebuilt our thread state).
    errno = 0;
    long nr = ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
    t.syscall_nr = errno ? (entry ? -1 : t.syscall_nr) : static_cast<int>(nr);
  }
  t.in_syscall = entry;
  if (entry && t.lifted_step && !t.signal_entry && t.lifted_step->insn.kind == FlowKind::Syscall) {
    // The lifted syscall instruction has run up to its entry: our int3 goes back now (as after
    // a lifted step); the exit stop records it.
    if (t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
    t.syscall_flow = t.lifted_step->insn;
    t.lifted_step.reset();
  }
  bool finished_flow = !entry && t.syscall_flow;
  if (finished_flow) finish_syscall_flow(t);
  if (!entry && t.watch_step) {  // the checked step over a syscall instruction ends here
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  int nr = t.syscall_nr;
  bool wanted = known && catch_syscalls_ && nr >= 0 && (caught_syscalls_.empty() || caught_syscalls_.count(nr));
  if (!wanted) {
    if (stopping()) return;
    if (finished_flow) return proceed(t);  // a traced thread plans its next block
    resume_thread(t, 0);
    return;
  }
  StopEvent ev = make_event(entry ? StopKind::SyscallEntry : StopKind::SyscallReturn, t.tid, SIGTRAP);
  ev.syscall_no = nr;
  report(t, ev);
}

// ---------------------------------------------------------------- stopping

// A client-visible event: the first one stops everybody (the process is Stopping until every
// thread is stopped); later ones wait as the thread's pending event.
void LinuxProcess::report(LinuxThread& t, StopEvent ev) {
  // An emulated watchpoint fired on the step that led here: the hardware's trap would have
  // come first (after that instruction), so it is the event.
  if (t.watch_hit) ev = watch_event(t.tid, *t.watch_hit);
  t.watch_hit.reset();
  t.watch_step.reset();
  if (auto* over = std::get_if<run::StepOver>(&t.mode)) {
    (void)breakpoints_.lower(mem_, over->addr);
    set_mode(t, run::Normal{});
  }
  if (t.lifted_step && t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
  t.lifted_step.reset();
  t.signal_entry.reset();
  if (t.in<run::StepBranch>() || t.in<run::WatchStep>()) set_mode(t, run::Normal{});
  if (stopping()) {
    log("thread {}: {} kept pending", t.tid, kind_name(ev.kind));
    t.pending = std::move(ev);
    return;
  }
  if (non_stop_) return report_non_stop(t, std::move(ev));
  log("thread {}: {} (signal {}): stopping the others", t.tid, kind_name(ev.kind), ev.signo);
  chosen_ = std::move(ev);
  phase_ = Phase::Stopping;
  deferred_.clear();  // threads waiting for a step-over never ran; they stay stopped
  stop_others();
}

void LinuxProcess::stop_others() {
  for (auto& [tid, t] : threads_) {
    if (!t.running || t.sigstop_expected || leader_is_zombie(t)) continue;
    if (signal_thread(pid_, tid, SIGSTOP) == 0) t.sigstop_expected = true;
  }
}

// At a reported stop: record what the traced threads passed, take our int3s out, and put
// threads caught in the middle of internal work back to a plain state.
void LinuxProcess::settle_threads() {
  for (auto& [tid, t] : threads_) {
    // A watchpoint another thread hit while this stop was being reported waits for the next
    // resume, like any other event of a thread that was not reported.
    if (t.watch_hit && !t.pending) t.pending = watch_event(tid, *t.watch_hit);
    t.watch_hit.reset();
    t.watch_step.reset();
    stepper_.settle(t);
    if (!t.in<run::RangeStep>() && !t.in<run::StepOver>()) set_mode(t, run::Normal{});
    tracer_->thread_stopped(tid);
  }
  if (!non_stop_) release_patches(false);  // the last recorded thread gone
}

void LinuxProcess::release_patches(bool always) {
  if (!alive_ || !stepper_.patcher()) return;
  pid_t runner = 0;
  for (auto& [tid, t] : threads_) {
    if (t.running || (!always && tracer_->patch_traced(tid))) return;
    if (!leader_is_zombie(t) && (!runner || !t.sigstop_expected)) runner = tid;  // one that can run it
  }
  if (!runner) return;
  if (!stepper_.patch_release(runner)) log("process {}: block patching: an area could not be unmapped", pid_);
}

// Stops every running thread right now (for detach/kill while running, and the server's
// all-stop across processes): what happens meanwhile stays pending.
void LinuxProcess::stop_all_sync() {
  if (phase_ == Phase::Stopped) return;
  phase_ = Phase::Stopping;  // every handler now leaves threads where they stop
  stop_others();
  while (alive_ && !all_stopped()) {
    bool progress = false;
    std::vector<pid_t> tids;
    for (const auto& [tid, t] : threads_)
      if (t.running) tids.push_back(tid);
    for (pid_t tid : tids) {
      int status = 0;
      if (::waitpid(tid, &status, __WALL) == tid) {
        progress = true;
        handle_stop(tid, status);
        if (!alive_) break;
        stop_others();  // handle_stop may have resumed someone
      }
    }
    if (!progress) break;
  }
  // An event chosen meanwhile (or taken at resume) is the thread's again, for the next resume.
  std::optional<StopEvent> unreported = chosen_ ? chosen_ : ready_event_;
  if (unreported && alive_)
    if (LinuxThread* t = find(unreported->tid); t && !t->pending) t->pending = unreported;
  if (alive_) stepper_.patch_suspend(nullptr);  // stopped without a report: no patch shows either
  chosen_.reset();
  ready_event_.reset();
  phase_ = Phase::Stopped;
}

void LinuxProcess::forget_process(StopEvent exit_event) {
  log("process {}: gone ({})", pid_, exit_event.kind == StopKind::Killed ? "killed" : "exited");
  for (const auto& [tid, t] : threads_) tracer_->thread_exited(tid);
  code_cache_.clear();
  alive_ = false;
  threads_.clear();
  deferred_.clear();
  chosen_.reset();
  mem_.close();
  breakpoints_.clear();
  conditions_.clear();
  debug_.clear();
  watch_.clear();
  last_stop_ = std::move(exit_event);
}

Result<void> LinuxProcess::detach() {
  if (!alive_) return {};
  stop_all_sync();
  if (!alive_) return {};
  release_patches(true);  // the program goes on with its own code and no areas of ours
  breakpoints_.restore_all(mem_);
  for (auto& [tid, t] : threads_) {
    DebugRegisters::clear_thread(tid);
    int sig = t.deliver_signal;
    if (!sig && t.pending && t.pending->kind == StopKind::Signal) sig = t.pending->signo;
    if (!sig && t.last_signal && t.last_signal != SIGTRAP &&
        (!program_signals_set_ || program_signals_.count(t.last_signal)))
      sig = t.last_signal;
    // Our SIGSTOP is still queued: collect it first, or the program would stop untraced.
    if (t.sigstop_expected && ::ptrace(PTRACE_CONT, tid, nullptr, nullptr) == 0) {
      for (;;) {
        int status = 0;
        if (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) continue;
        if (!WIFSTOPPED(status) || WSTOPSIG(status) == SIGSTOP) break;
        if (WSTOPSIG(status) != SIGTRAP) sig = WSTOPSIG(status);
        ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
      }
    }
    ::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
  }
  forget_process(make_event(StopKind::Exited, pid_));
  exit_unreported_ = false;
  return {};
}

Result<void> LinuxProcess::kill() {
  if (!alive_) return {};
  ::kill(pid_, SIGKILL);
  // Reap every thread, the leader last, so nothing is left as a zombie.
  for (auto& [tid, t] : threads_) {
    if (tid == pid_) continue;
    int status = 0;
    while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
  }
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid_, &status, __WALL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 || WIFEXITED(status) || WIFSIGNALED(status)) break;
  }
  phase_ = Phase::Stopped;
  forget_process(make_event(StopKind::Killed, pid_, SIGKILL));
  exit_unreported_ = false;
  return {};
}

std::vector<std::unique_ptr<Process>> LinuxProcess::take_fork_children() {
  std::vector<std::unique_ptr<Process>> out;
  for (auto& child : fork_children_) out.push_back(std::move(child));
  fork_children_.clear();
  return out;
}

// ---------------------------------------------------------------- emulated watchpoints

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
  auto out = stepper_.emulate(t, *insn->second);
  if (!out) return false;
  stepper_.flow_done(t, *insn->second, *out);
  resume_thread(t, 0);
  return true;
}

}  // namespace backend
