#include "backend/linux_process.h"

#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

#include "backend/btrace/lbr_trace.h"
#include "backend/launch.h"
#include "backend/probe.h"
#include "backend/proc_info.h"

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

int tgkill(pid_t pid, pid_t tid, int sig) { return static_cast<int>(::syscall(SYS_tgkill, pid, tid, sig)); }

// A traced run hands back to the server's loop after this many wait statuses (bounded slices).
constexpr int kStatusesPerSlice = 256;
constexpr long kPtraceSingleblock = 33;  // PTRACE_SINGLEBLOCK (x86)

}  // namespace

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
        auto n = read_memory(addr, out);  // through the breakpoint shadow: original bytes
        return n ? *n : 0;
      }),
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

void LinuxProcess::set_trace_source(TraceSource source) {
  uint64_t size = tracer_->buffer_size(0);
  tracer_ = std::make_unique<TraceManager>(source, [this](pid_t tid) { return get_pc(tid); });
  tracer_->set_buffer_size(size);
  if (source == TraceSource::Lbr) {
    // Without the module the reader stays unset and enabling says why.
    if (auto device = LbrDevice::open())
      tracer_->set_lbr_reader(make_lbr_reader(std::make_shared<LbrDevice>(std::move(*device))));
  }
}

LinuxProcess::~LinuxProcess() {
  // Launched programs die with us (as gdbserver's do); attached ones are let go.
  release_held_children(!attached_);
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
  p->threads_[*pid] = Thread{*pid};
  p->last_stop_ = p->make_event(StopKind::Signal, *pid, SIGTRAP);
  return p;
}

Result<std::unique_ptr<LinuxProcess>> LinuxProcess::attach_process(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
    return Error{ESRCH, fmt::format("Cannot attach to process {}: No such process.", pid)};
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(pid, true));
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
      Thread t{tid};
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
      p->threads_[tid] = t;
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
    p->threads_[first_signal_tid].last_signal = first_signal;
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

bool LinuxProcess::leader_is_zombie(Thread& leader) {
  if (leader.zombie) return true;
  if (leader.tid != pid_ || threads_.size() < 2) return false;
  char state = read_thread_state(pid_, pid_);
  if (state != 'Z' && state != 'X') return false;
  leader.zombie = true;
  leader.running = false;
  leader.sigstop_expected = false;
  return true;
}

std::string LinuxProcess::thread_name(pid_t tid) const { return read_thread_name(pid_, tid); }
int LinuxProcess::thread_core(pid_t tid) const { return read_thread_core(pid_, tid); }

LinuxProcess::Thread* LinuxProcess::find(pid_t tid) {
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

StopEvent LinuxProcess::watch_event(pid_t tid, const WatchHit& hit) const {
  StopEvent ev = make_event(StopKind::Watchpoint, tid, SIGTRAP);
  ev.watch_addr = hit.addr;
  ev.watch_type = hit.kind == HwKind::Write ? WatchType::Write
                  : hit.kind == HwKind::Read ? WatchType::Read : WatchType::Access;
  return ev;
}

// A branch that ends a run ahead, emulated instead of stepped when what it accesses (a call's
// push, a ret's pop, an indirect target's load) is known and misses every watched region:
// one stop per straight-line run instead of two.
bool LinuxProcess::watch_emulate_flow(Thread& t, uint64_t addr) {
  auto insn = code_cache_.insn_at(addr);
  if (!insn || !insn->second || !flow_is_emulatable(insn->second->kind)) return false;
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return false;
  WatchEmulator::Step step = watch_.prepare(gp, true, watch_reader_);
  if (!step.exact) return false;
  for (const auto& access : step.accesses)
    if (watch_.touches(access)) return false;
  auto out = emulate(t, *insn->second);
  if (!out) return false;
  flow_done(t, *insn->second, *out);
  resume_thread(t, 0);
  return true;
}

bool LinuxProcess::at_syscall(pid_t tid) {
  auto insn = code_cache_.insn_at(get_pc(tid));
  return insn && insn->second && insn->second->kind == FlowKind::Syscall;
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

// ---------------------------------------------------------------- execution

Result<void> LinuxProcess::resume(const ResumePlan& plan) {
  if (!alive_ && exit_unreported_) {  // it exited while paused: that is the event now
    ready_event_ = last_stop_;
    running_ = true;
    return {};
  }
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (running_) return Error{EBUSY, "The process is already running."};

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
    Thread& t = threads_[tid];
    if (!t.pending) continue;
    if (t.pending->kind == StopKind::Breakpoint && !breakpoints_.has_client(get_pc(tid))) {
      t.pending.reset();
      continue;
    }
    ready_event_ = *t.pending;
    t.pending.reset();
    running_ = true;
    return {};
  }

  step_over_clients_ = plan.step_over_client_breakpoints;
  for (auto& [tid, a] : actions) {
    Thread& t = threads_[tid];
    t.action = a;
    if (a.signo == 0 && t.deliver_signal) actions[tid].signo = t.deliver_signal;
    t.deliver_signal = 0;
    t.last_signal = 0;
  }
  deferred_ = std::move(actions);
  running_ = true;
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
    Thread* t = find(it->first);
    if (!t) {
      it = deferred_.erase(it);
      continue;
    }
    uint64_t pc = get_pc(t->tid);
    if (!breakpoints_.contains(pc) || (!step_over_clients_ && breakpoints_.has_client(pc))) {
      ++it;
      continue;
    }
    int signo = it->second.signo;
    if (signo == 0 && it->second.kind != ResumeKind::Stop && !watch_stepping()) {
      auto insn = code_cache_.insn_at(pc);
      if (insn && insn->second && flow_is_emulatable(insn->second->kind)) {
        if (auto out = emulate(*t, *insn->second)) {
          flow_done(*t, *insn->second, *out);
          const ResumeAction& a = it->second;
          uint64_t now = out->next_pc;
          bool in_range = a.kind == ResumeKind::RangeStep && a.range_start <= now && now < a.range_end;
          if (a.kind == ResumeKind::Step || (a.kind == ResumeKind::RangeStep && (!in_range || breakpoints_.has_client(now)))) {
            deferred_.clear();  // nobody ran: the emulated step alone is the event
            return report(*t, make_event(StopKind::Step, t->tid, SIGTRAP));
          }
          if (a.kind == ResumeKind::Continue && breakpoints_.has_client(now)) {
            deferred_.clear();  // the branch led straight onto a client breakpoint
            return report(*t, make_event(StopKind::Breakpoint, t->tid, SIGTRAP));
          }
          if (++emulations < 4096) continue;  // same thread again: its new pc may hold an int3 too
          pc = now;
        }
      }
    }
    t->action.signo = 0;  // the signal goes with the step-over
    deferred_.erase(it);
    if (!breakpoints_.lift(mem_, pc)) continue;
    t->mode = RunMode::StepOverBreakpoint;
    t->step_over_addr = pc;
    resume_thread(*t, signo);
    return;
  }
  auto todo = std::move(deferred_);
  deferred_.clear();
  for (auto& [tid, a] : todo) {
    Thread* t = find(tid);
    if (!t) continue;
    if (a.kind == ResumeKind::Continue && traced(tid)) {
      if (a.signo && signal_is_caught(pid_, a.signo)) deliver_traced_signal(*t, a.signo);
      else continue_traced(*t, a.signo);
      continue;
    }
    t->mode = a.kind == ResumeKind::RangeStep ? RunMode::RangeStep : RunMode::Normal;
    resume_thread(*t, a.signo);
  }
}

void LinuxProcess::resume_thread(Thread& t, int signo) {
  if (event_) return;  // everybody is being stopped for a reported event: stay stopped
  if (t.watch_hit) return report(t, watch_event(t.tid, *t.watch_hit));
  if (watch_stepping() && (t.mode == RunMode::Traced ||
                           (t.mode == RunMode::Normal && t.action.kind == ResumeKind::Continue))) {
    // A continue becomes checked single steps; a traced thread records each step's branch.
    arm(t, 0);
    t.plan.clear();
    t.mode = RunMode::WatchStep;
  }
  bool single = t.mode == RunMode::StepOverBreakpoint || t.mode == RunMode::RangeStep ||
                t.mode == RunMode::FlowStep || t.mode == RunMode::SignalEntry || t.mode == RunMode::WatchStep ||
                (t.mode == RunMode::Normal && t.action.kind == ResumeKind::Step);
  bool block = t.mode == RunMode::StepBranch && t.singleblock;
  bool run_ahead = false;
  if (watch_stepping() && !block) {
    // Every instruction a thread runs while watchpoints are emulated is checked: work out what
    // this one accesses now (a syscall stepped through its entry and exit stops keeps the
    // check made before it).
    if (!(t.watch_step && t.in_syscall)) {
      user_regs_struct gp{};
      if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return;  // gone: its exit status tells
      // The lone thread of a process may run straight-line code unchecked when every access
      // in it is known now and misses the regions: an int3 at the first instruction that
      // needs a check, then that one is stepped. (Another thread could meet that int3 and
      // run the instruction under it unchecked, so threaded processes always step.)
      if (signo == 0 && t.mode == RunMode::WatchStep && threads_.size() == 1) {
        RunAhead ahead = watch_.run_ahead(gp, code_reader_);
        if (ahead.stop != gp.rip) {
          arm(t, ahead.stop);
          run_ahead = t.armed == ahead.stop;
        }
      }
      if (run_ahead) {
        t.watch_step.reset();
        ++watch_runs_ahead_;
      } else {
        arm(t, 0);
        t.watch_step = watch_.prepare(gp, signo == 0, watch_reader_);
      }
    }
    single = !run_ahead;
  }
  if (single && traced(t.tid) && t.mode != RunMode::FlowStep && t.mode != RunMode::SignalEntry) {
    // A client step of a traced thread: remember where it was to record a branch it takes.
    t.step_from = get_pc(t.tid);
    t.step_into_handler = signo != 0 && signal_is_caught(pid_, signo);
    if (t.step_into_handler) t.signal_from = insn_before_pc(t, t.step_from).value_or(0);
  }
  // A plain continue stops at syscalls while the client catches them; so does a checked
  // step over a syscall instruction (a single step would run through the syscall unseen).
  bool syscall_stops = catch_syscalls_ && (t.mode == RunMode::Normal ||
                                           (t.mode == RunMode::WatchStep && (t.in_syscall || at_syscall(t.tid))));
  long request = block                      ? kPtraceSingleblock
                 : syscall_stops && (!single || t.mode == RunMode::WatchStep) ? long{PTRACE_SYSCALL}
                 : single                   ? long{PTRACE_SINGLESTEP}
                                            : long{PTRACE_CONT};
  if (request == PTRACE_SYSCALL) single = false;
  if (::ptrace(static_cast<__ptrace_request>(request), t.tid, nullptr,
               reinterpret_cast<void*>(static_cast<long>(signo))) != 0)
    return;  // ESRCH: the thread is gone; its exit status will tell
  single = single || block;
  t.stepping = single;
  t.running = true;
}

void LinuxProcess::interrupt() {
  if (!alive_ || !running_ || event_ || ready_event_) return;
  // A SIGSTOP of ours, reported as SIGINT: nothing stale is left to deliver afterwards.
  Thread* target = find(pid_);
  if (!target || !target->running || leader_is_zombie(*target)) {
    target = nullptr;
    for (auto& [tid, t] : threads_)
      if (t.running) { target = &t; break; }
  }
  if (!target) return;
  interrupt_requested_ = true;
  if (!target->sigstop_expected && tgkill(pid_, target->tid, SIGSTOP) == 0) target->sigstop_expected = true;
}

std::optional<StopEvent> LinuxProcess::poll_events() {
  wants_poll_ = false;
  auto finish = [this](StopEvent ev) {
    settle_threads();
    event_.reset();
    ready_event_.reset();
    running_ = false;
    interrupt_requested_ = false;
    if (ev.kind == StopKind::Exited || ev.kind == StopKind::Killed) exit_unreported_ = false;
    if (ev.kind != StopKind::NoResumed) last_stop_ = ev;
    return ev;
  };
  if (ready_event_) return finish(*ready_event_);
  if (!alive_) return std::nullopt;

  // Per-thread waits (not waitpid(-1)): other children of the server are none of our business.
  // A traced run can produce statuses forever: hand back to the loop after a bounded slice.
  int handled = 0;
  // A thread resumed internally (a traced block, a step) usually stops again within
  // microseconds: wait for it here a little rather than sleeping in the event loop, which
  // costs two context switches a stop.
  constexpr auto kSpin = std::chrono::microseconds(200);
  auto spin_until = std::chrono::steady_clock::now();
  for (bool progress = true; alive_;) {
    if (handled >= kStatusesPerSlice && !(event_ && all_stopped())) {
      wants_poll_ = true;
      return std::nullopt;
    }
    progress = false;
    std::vector<pid_t> tids;
    for (const auto& [tid, t] : threads_) tids.push_back(tid);
    for (pid_t tid : tids) {
      if (!alive_) break;
      int status = 0;
      pid_t w = ::waitpid(tid, &status, WNOHANG | __WALL);
      if (w == 0) continue;
      if (w < 0) {
        if (errno == ECHILD && tid != pid_) threads_.erase(tid);  // vanished (exec by another thread)
        continue;
      }
      progress = true;
      ++handled;
      handle_stop(tid, status);
    }
    if (progress) {
      spin_until = std::chrono::steady_clock::now() + kSpin;
      continue;
    }
    if (handled > 0 && running_ && !event_ && std::chrono::steady_clock::now() < spin_until) {
      ::sched_yield();  // let the inferior have the CPU if it shares ours
      continue;
    }
    break;
  }
  if (!alive_) return finish(last_stop_);  // forget_process() put the exit event there
  if (running_ && !event_ && handled == 0) {
    // A running leader that called pthread_exit becomes a zombie without any wait status;
    // look for it now and then (not on every poll: it costs a /proc read).
    auto now = std::chrono::steady_clock::now();
    Thread* leader = find(pid_);
    if (leader && leader->running && now >= next_zombie_check_) {
      next_zombie_check_ = now + std::chrono::milliseconds(20);
      (void)leader_is_zombie(*leader);
    }
  }
  if (event_ && all_stopped()) return finish(*event_);
  // Every thread the client resumed has exited (the others it left stopped): nothing will ever
  // report otherwise (gdbserver's "no resumed" stop).
  if (running_ && !event_ && deferred_.empty() && all_stopped()) return finish(make_event(StopKind::NoResumed, 0));
  return std::nullopt;
}

void LinuxProcess::forget_process(StopEvent exit_event) {
  for (const auto& [tid, t] : threads_) tracer_->thread_exited(tid);
  code_cache_.clear();
  alive_ = false;
  threads_.clear();
  deferred_.clear();
  event_.reset();
  mem_.close();
  breakpoints_.clear();
  debug_.clear();
  watch_.clear();
  last_stop_ = std::move(exit_event);
}

void LinuxProcess::handle_stop(pid_t tid, int status) {
  Thread* t = find(tid);
  if (!t) return;
  ++ptrace_stops_;
  if (WIFEXITED(status) || WIFSIGNALED(status)) {
    if (tid == pid_) {
      // The leader is reaped last (after every other thread): the whole process is gone.
      StopEvent ev = WIFEXITED(status) ? make_event(StopKind::Exited, tid) : make_event(StopKind::Killed, tid, WTERMSIG(status));
      ev.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
      forget_process(ev);
      exit_unreported_ = true;
    } else {
      arm(*t, 0);
      if (t->lifted) (void)breakpoints_.lower(mem_, t->lifted);
      if (t->mode == RunMode::StepOverBreakpoint) (void)breakpoints_.lower(mem_, t->step_over_addr);
      tracer_->thread_exited(tid);
      deferred_.erase(tid);
      threads_.erase(tid);
    }
    return;
  }
  if (!WIFSTOPPED(status)) return;
  t->running = false;
  int sig = WSTOPSIG(status), event = status >> 16;

  if (sig == SIGTRAP && event != 0) return handle_ptrace_event(*t, event);
  if (sig == (SIGTRAP | 0x80)) return handle_syscall_stop(*t);

  if (sig == SIGSTOP && t->sigstop_expected) {
    t->sigstop_expected = false;
    if (interrupt_requested_ && !event_) {
      interrupt_requested_ = false;
      return report(*t, make_event(StopKind::Signal, t->tid, SIGINT));
    }
    if (!event_) resume_thread(*t, 0);  // a leftover stop of ours: carry on in the same mode
    return;
  }

  if (sig == SIGTRAP) return handle_trap(*t);

  // Signals to pass without telling the client are re-delivered at once.
  if (pass_signals_.count(sig)) {
    if (!event_ && t->mode == RunMode::Traced) {
      commit_plan(*t, get_pc(t->tid));
      if (signal_is_caught(pid_, sig)) deliver_traced_signal(*t, sig);
      else continue_traced(*t, sig);
    } else if (!event_) {
      resume_thread(*t, sig);
    } else {
      t->deliver_signal = sig;
      if (t->mode == RunMode::StepOverBreakpoint) {
        (void)breakpoints_.lower(mem_, t->step_over_addr);
        t->mode = RunMode::Normal;
      }
    }
    return;
  }
  t->last_signal = sig;
  report(*t, make_event(StopKind::Signal, t->tid, sig));
}

void LinuxProcess::handle_trap(Thread& t) {
  siginfo_t si{};
  ::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si);
  // Hardware breakpoints and watchpoints first (DR6 says which slot fired).
  if (auto hit = debug_.take_hit(t.tid)) {
    if (hit->kind == HwKind::Execute) return report(t, make_event(StopKind::HwBreakpoint, t.tid, SIGTRAP));
    return report(t, watch_event(t.tid, WatchHit{hit->kind, hit->addr}));
  }
  // A checked step that ended in anything but a step trap (an int3 ran instead) checks nothing.
  if (!(t.stepping && si.si_code > 0 && si.si_code != SI_KERNEL)) t.watch_step.reset();
  uint64_t pc = get_pc(t.tid);
  if (t.mode == RunMode::FlowStep && si.si_code == SI_KERNEL && t.lifted && pc - 1 == t.lifted) {
    // The stepped instruction is the program's own int3 (a Trap we let the CPU run).
    (void)breakpoints_.lower(mem_, t.lifted);
    t.lifted = 0;
    t.mode = t.flow_return == RunMode::StepBranch ? RunMode::Normal : t.flow_return;
    t.last_signal = SIGTRAP;
    return report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
  }
  if (si.si_code == SI_KERNEL && breakpoints_.contains(pc - 1)) {
    // int3 leaves pc after itself: rewind to the breakpoint address.
    set_pc(t.tid, pc - 1);
    bool ours_only = !breakpoints_.has_client(pc - 1);
    if (ours_only && t.mode == RunMode::WatchStep) {
      if (t.armed == pc - 1) {  // the end of a run ahead: that instruction is checked next
        arm(t, 0);
        if (!event_ && !watch_emulate_flow(t, pc - 1)) resume_thread(t, 0);
        return;
      }
      // Someone else's int3: the instruction under it runs lifted, checked as any step.
      FlowInsn one;
      one.addr = pc - 1;
      one.kind = FlowKind::Trap;
      if (auto d = code_cache_.insn_at(pc - 1)) one.len = d->first;
      if (!event_) (void)execute_flow(t, one);
      return;
    }
    if (ours_only && (t.mode == RunMode::Traced || t.mode == RunMode::Normal || t.mode == RunMode::RangeStep))
      return internal_hit(t, pc - 1);
    if (ours_only && t.mode == RunMode::StepBranch) {
      arm(t, 0);
      if (!event_) stepbranch_run(t);
      return;
    }
    bool hardware = breakpoints_.client_is_hardware(pc - 1);
    return report(t, make_event(hardware ? StopKind::HwBreakpoint : StopKind::Breakpoint, t.tid, SIGTRAP));
  }
  if (t.stepping && si.si_code > 0 && si.si_code != SI_KERNEL) return handle_step_done(t);
  if (si.si_code == SI_KERNEL && vanished_breakpoint(pc - 1)) {
    // One of our int3s was hit, then removed (another thread disarmed it) before this status
    // was read: the program never saw it. Run the original instruction as if nothing happened.
    set_pc(t.tid, pc - 1);
    if (event_) return;  // the process is stopping anyway: the thread waits here
    if (t.mode == RunMode::Traced || t.mode == RunMode::Normal) return continue_traced(t, 0);
    if (t.mode == RunMode::StepBranch) return stepbranch_run(t);
    return resume_thread(t, 0);
  }
  // Anything else is the program's own trap (its int3, raise(SIGTRAP)).
  t.last_signal = SIGTRAP;
  report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
}

bool LinuxProcess::vanished_breakpoint(uint64_t addr) const {
  // Ours once, and no int3 there now (the program's own int3s stay in memory; `int $3`, CD 03,
  // also traps with SI_KERNEL but was never one of our addresses).
  if (!breakpoints_.ever_inserted(addr)) return false;
  uint8_t byte = 0;
  auto n = mem_.read(addr, std::span<uint8_t>(&byte, 1));
  return n && *n == 1 && byte != 0xcc;
}

void LinuxProcess::handle_step_done(Thread& t) {
  if (t.watch_step) {
    // Whatever the mode does next, a hit stops the thread here: report() and resume_thread()
    // both give way to it.
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  uint64_t pc = get_pc(t.tid);
  if (t.mode == RunMode::FlowStep) return flow_step_done(t);
  if (t.mode == RunMode::SignalEntry) {
    // Stopped at the handler's first instruction: the signal was a branch from the last
    // instruction executed before it.
    if (t.signal_from) record(t, t.signal_from, pc);
    t.block_start = pc;
    t.last_flow_taken = true;
    if (t.action.kind == ResumeKind::Continue) return continue_traced(t, 0);
    return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
  }
  if (t.mode == RunMode::StepBranch) return t.singleblock ? stepbranch_singleblock_done(t) : stepbranch_step_done(t);
  if (traced(t.tid)) record_step(t, pc);
  if (t.mode == RunMode::WatchStep) {
    if (!event_) resume_thread(t, 0);
    return;
  }
  if (t.mode == RunMode::StepOverBreakpoint) {
    (void)breakpoints_.lower(mem_, t.step_over_addr);
    t.mode = RunMode::Normal;
    bool in_range = t.action.kind == ResumeKind::RangeStep && t.action.range_start <= pc && pc < t.action.range_end;
    if (t.action.kind == ResumeKind::Step || (t.action.kind == ResumeKind::RangeStep && !in_range)) {
      deferred_.clear();  // the others never ran: the step alone is the event
      return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
    }
    ResumeAction next = t.action;
    next.signo = 0;
    deferred_[t.tid] = next;
    if (!event_) start_deferred();
    return;
  }
  if (t.mode == RunMode::RangeStep) {
    // Stop early on a breakpoint address: GDB then sees it as reached.
    if (t.action.range_start <= pc && pc < t.action.range_end && !breakpoints_.has_client(pc)) {
      if (!event_) resume_thread(t, 0);
      return;
    }
  }
  report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
}

void LinuxProcess::handle_ptrace_event(Thread& t, int event) {
  unsigned long msg = 0;
  ::ptrace(PTRACE_GETEVENTMSG, t.tid, nullptr, &msg);
  const pid_t child = static_cast<pid_t>(msg);
  bool keep_going = !event_;
  switch (event) {
    case PTRACE_EVENT_CLONE: {
      // A lone thread running ahead of its watch checks has an int3 in shared memory: the new
      // thread could meet it. From now on both step.
      if (t.mode == RunMode::WatchStep) arm(t, 0);
      // The new thread starts with a SIGSTOP; take it now so the thread is known and stopped.
      int status = 0;
      while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
      Thread nt{child};
      nt.action = ResumeAction{};  // new threads continue
      (void)debug_.apply(child);
      threads_[child] = nt;
      if (!deferred_.empty()) deferred_[child] = ResumeAction{};
      else if (keep_going) resume_thread(threads_[child], 0);
      break;
    }
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK: {
      // The child starts stopped and traced. Our int3s and debug registers come out of it
      // first (a vfork child shares our memory until it execs or exits: they go back in at
      // VFORK_DONE); then it is reported and held, or let go.
      int status = 0;
      while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
      if (event == PTRACE_EVENT_FORK) {
        ProcMemory child_mem(child);
        breakpoints_.restore_into(child_mem);
      } else {
        breakpoints_.restore_into(mem_);
      }
      DebugRegisters::clear_thread(child);
      bool tell = event == PTRACE_EVENT_FORK ? report_forks_ : report_vforks_;
      if (!tell || !(WIFSTOPPED(status))) {
        ::ptrace(PTRACE_DETACH, child, nullptr, nullptr);
        break;
      }
      held_children_.insert(child);
      StopEvent ev = make_event(event == PTRACE_EVENT_FORK ? StopKind::Fork : StopKind::VFork, t.tid, SIGTRAP);
      ev.child_pid = child;
      return report(t, ev);
    }
    case PTRACE_EVENT_VFORK_DONE:
      breakpoints_.reinsert_all(mem_);
      if (report_vforks_) return report(t, make_event(StopKind::VForkDone, t.tid, SIGTRAP));
      break;
    case PTRACE_EVENT_EXEC: {
      // The image changed: breakpoints are gone, only this thread (now the leader) remains.
      // Reported as an exec; a client that did not ask for exec events sees a SIGTRAP.
      Thread leader{pid_};
      for (const auto& [tid, old] : threads_)
        if (tid != pid_) tracer_->thread_exited(tid);
      threads_.clear();
      deferred_.clear();
      event_.reset();
      threads_[pid_] = leader;
      breakpoints_.clear();
      code_cache_.clear();
      watch_.forget_code();
      mem_.open(pid_);
      (void)debug_.apply(pid_);
      StopEvent ev = make_event(StopKind::Exec, pid_, SIGTRAP);
      if (auto path = read_exe_path(pid_)) ev.exec_path = *path;
      return report(threads_[pid_], ev);
    }
    default:
      break;
  }
  if (keep_going) resume_thread(t, 0);  // it was running (maybe stepping over): carry on
}

void LinuxProcess::report(Thread& t, StopEvent ev) {
  // An emulated watchpoint fired on the step that led here: the hardware's trap would have
  // come first (after that instruction), so it is the event.
  if (t.watch_hit) ev = watch_event(t.tid, *t.watch_hit);
  t.watch_hit.reset();
  t.watch_step.reset();
  if (t.mode == RunMode::StepOverBreakpoint) {
    (void)breakpoints_.lower(mem_, t.step_over_addr);
    t.mode = RunMode::Normal;
  }
  if (t.lifted) {
    (void)breakpoints_.lower(mem_, t.lifted);
    t.lifted = 0;
  }
  if (t.mode == RunMode::FlowStep || t.mode == RunMode::SignalEntry || t.mode == RunMode::StepBranch ||
      t.mode == RunMode::WatchStep)
    t.mode = RunMode::Normal;
  if (event_) {
    t.pending = std::move(ev);
    return;
  }
  event_ = std::move(ev);
  deferred_.clear();  // threads waiting for a step-over never ran; they stay stopped
  stop_others();
}

void LinuxProcess::stop_others() {
  for (auto& [tid, t] : threads_) {
    if (!t.running || t.sigstop_expected || leader_is_zombie(t)) continue;
    if (tgkill(pid_, tid, SIGSTOP) == 0) t.sigstop_expected = true;
  }
}

// ---------------------------------------------------------------- branch engine
//
// Software tracing: a traced thread that continues runs to an internal int3 on the first
// control-flow instruction whose outcome is not known statically (direct jmp/call are followed
// at planning time), where the instruction is emulated (or, for syscalls and traps, stepped
// with the int3 lifted), recorded, and the next stop planned. One ptrace stop per executed
// non-direct control-flow instruction, none per ordinary instruction.

bool LinuxProcess::traced(pid_t tid) const { return tracer_->software_traced(tid); }

void LinuxProcess::record(Thread& t, uint64_t from, uint64_t to) {
  if (traced(t.tid)) tracer_->record(t.tid, from, to);
}

void LinuxProcess::arm(Thread& t, uint64_t addr) {
  if (t.armed == addr) return;
  if (t.armed) (void)breakpoints_.remove(mem_, t.armed, BreakpointOwner::Internal);
  t.armed = 0;
  if (addr && breakpoints_.insert(mem_, addr, BreakpointOwner::Internal)) t.armed = addr;
}

void LinuxProcess::commit_plan(Thread& t, uint64_t pc) {
  if (!t.plan.active()) return;
  auto passed = t.plan.commit(pc, t.block_start);
  for (const Branch& b : passed) record(t, b.from, b.to);
  if (!passed.empty()) {
    t.last_flow = passed.back().from;
    t.last_flow_taken = true;
  }
}

void LinuxProcess::continue_traced(Thread& t, int signo) {
  if (!traced(t.tid)) {
    arm(t, 0);
    t.mode = RunMode::Normal;
    return resume_thread(t, signo);
  }
  t.mode = RunMode::Traced;
  if (t.plan.plan(code_cache_, get_pc(t.tid))) arm(t, t.plan.stop_addr());
  else arm(t, 0);  // undecodable code: it runs untraced until something stops it
  resume_thread(t, signo);
}

Result<FlowOutcome> LinuxProcess::emulate(Thread& t, const FlowInsn& insn) {
  // Only the general registers matter: GETREGS/SETREGS instead of the full register file.
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return errno_error("PTRACE_GETREGS");
  gprs_to_file(gp, layout_, scratch_regs_);
  MemoryReader reader = [this](uint64_t addr, std::span<uint8_t> out) {
    auto n = mem_.read(addr, out);
    return n && *n == out.size();
  };
  MemoryWriter writer = [this](uint64_t addr, std::span<const uint8_t> data) {
    auto n = mem_.write(addr, data);
    return n && *n == data.size();
  };
  auto out = emulate_flow(insn, scratch_regs_, layout_, reader, writer);
  if (!out) return out.error();
  file_to_gprs(scratch_regs_, layout_, gp);
  if (::ptrace(PTRACE_SETREGS, t.tid, nullptr, &gp) != 0) return errno_error("PTRACE_SETREGS");
  ++emulated_flows_;
  return out;
}

std::optional<FlowOutcome> LinuxProcess::execute_flow(Thread& t, const FlowInsn& insn) {
  if (flow_is_emulatable(insn.kind))
    if (auto out = emulate(t, insn)) return *out;
  // The CPU runs it (syscall, trap, or a form we cannot emulate): lift our int3 for one step.
  // Others keep running and could pass the lifted address unseen; only rare kinds get here.
  t.flow = insn;
  t.lifted = 0;
  bool lifted_by_other = false;
  for (const auto& [tid, other] : threads_) lifted_by_other = lifted_by_other || (other.lifted == insn.addr);
  if (!lifted_by_other && breakpoints_.contains(insn.addr) && breakpoints_.lift(mem_, insn.addr)) t.lifted = insn.addr;
  t.flow_return = t.mode;
  t.mode = RunMode::FlowStep;
  resume_thread(t, 0);
  return std::nullopt;
}

void LinuxProcess::flow_done(Thread& t, const FlowInsn& insn, const FlowOutcome& raw) {
  // A branch to the very next instruction looks like straight-line code in a trace (and to a
  // single-stepping user): it is not counted or recorded as taken.
  FlowOutcome out = raw;
  if (insn.len && out.next_pc == insn.addr + insn.len) out.taken = false;
  if (out.taken) record(t, insn.addr, out.next_pc);
  t.last_flow = insn.addr;
  t.last_flow_taken = out.taken;
  t.block_start = out.next_pc;
  if (t.mode == RunMode::StepBranch && out.taken) {
    t.last_branch = Branch{insn.addr, out.next_pc};
    if (t.branches_left) --t.branches_left;
  }
}

void LinuxProcess::flow_step_done(Thread& t) {
  if (t.lifted) (void)breakpoints_.lower(mem_, t.lifted);
  t.lifted = 0;
  t.mode = t.flow_return;
  uint64_t pc = get_pc(t.tid);
  // Landing elsewhere than after the instruction: rt_sigreturn, or a handler entered at
  // syscall exit. Unknown length (undecodable bytes): nothing is recorded.
  bool moved = t.flow.len != 0 && pc != t.flow.addr + t.flow.len;
  flow_done(t, t.flow, FlowOutcome{pc, moved});
  proceed(t);
}

void LinuxProcess::proceed(Thread& t) {
  if (event_) return;  // stays where it is; the next resume carries on
  switch (t.mode) {
    case RunMode::Traced: return continue_traced(t, 0);
    case RunMode::StepBranch: return stepbranch_run(t);
    case RunMode::RangeStep: {
      uint64_t pc = get_pc(t.tid);
      if (t.action.range_start <= pc && pc < t.action.range_end && !breakpoints_.has_client(pc))
        return resume_thread(t, 0);
      return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
    }
    default:
      if (t.action.kind == ResumeKind::Step) return report(t, make_event(StopKind::Step, t.tid, SIGTRAP));
      return resume_thread(t, 0);
  }
}

// A thread stopped on an int3 that is ours only (a traced thread's armed stop, or another
// thread's): execute the control-flow instruction there for it and let it go on.
void LinuxProcess::internal_hit(Thread& t, uint64_t addr) {
  std::optional<FlowInsn> insn;
  if (t.mode == RunMode::Traced) {
    if (t.plan.active() && t.plan.stop_addr() == addr) insn = t.plan.stop_insn();
    commit_plan(t, addr);
  }
  if (!insn) {
    FlowInsn f;
    f.addr = addr;
    f.kind = FlowKind::Trap;
    if (auto d = code_cache_.insn_at(addr)) {
      if (d->second) f = *d->second;
      else f.len = d->first;
    }
    insn = f;
  }
  if (event_) return;  // the process is stopping: execute it at the next resume
  if (auto out = execute_flow(t, *insn)) {
    flow_done(t, *insn, *out);
    proceed(t);
  }
}

void LinuxProcess::deliver_traced_signal(Thread& t, int signo) {
  // Single-stepping with the signal stops at the handler's first instruction.
  t.signal_from = insn_before_pc(t, get_pc(t.tid)).value_or(0);
  t.mode = RunMode::SignalEntry;
  resume_thread(t, signo);
}

std::optional<uint64_t> LinuxProcess::insn_before_pc(Thread& t, uint64_t pc) {
  if (t.block_start == 0) return std::nullopt;
  if (pc == t.block_start) {
    // Nothing ran in this block yet: the previous instruction is the last control-flow one
    // if execution fell through it (syscall, not-taken jcc).
    if (t.last_flow && !t.last_flow_taken) return t.last_flow;
    return std::nullopt;
  }
  return insn_before(code_cache_, t.block_start, pc);
}

void LinuxProcess::record_step(Thread& t, uint64_t pc) {
  if (t.step_into_handler) {
    t.step_into_handler = false;
    if (t.signal_from) record(t, t.signal_from, pc);
    t.block_start = pc;
    t.last_flow_taken = true;
    return;
  }
  auto insn = code_cache_.insn_at(t.step_from);
  if (!insn) return;
  if (pc != t.step_from + insn->first) {
    record(t, t.step_from, pc);
    t.block_start = pc;
    t.last_flow = t.step_from;
    t.last_flow_taken = true;
  } else if (insn->second) {
    t.block_start = pc;
    t.last_flow = t.step_from;
    t.last_flow_taken = false;
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
    if (t.plan.active()) commit_plan(t, get_pc(tid));
    arm(t, 0);
    if (t.lifted) (void)breakpoints_.lower(mem_, t.lifted);
    t.lifted = 0;
    if (t.mode != RunMode::RangeStep && t.mode != RunMode::StepOverBreakpoint) t.mode = RunMode::Normal;
    tracer_->thread_stopped(tid);
  }
}

// ---------------------------------------------------------------- stepbranch

Result<void> LinuxProcess::step_branch(pid_t tid, uint32_t count) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (running_) return Error{EBUSY, "The process is already running."};
  Thread* t = find(tid);
  if (!t) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  if (!btf_works_) btf_works_ = run_probe().btf_works;  // once per process
  if (t->pending) {  // an event already waiting for this thread comes first
    ready_event_ = *t->pending;
    t->pending.reset();
    running_ = true;
    return {};
  }
  t->action = ResumeAction{ResumeKind::Continue, 0};
  t->mode = RunMode::StepBranch;
  t->singleblock = *btf_works_ && !watch_stepping();  // checked steps need one instruction at a time
  t->branches_left = count == 0 ? 1 : count;
  t->last_branch = Branch{};
  t->last_signal = 0;
  uint64_t pc = get_pc(tid);
  // GDB re-inserts its breakpoints before the packet: the one under pc is stepped over.
  t->pass_client_at = breakpoints_.has_client(pc) ? pc : 0;
  running_ = true;
  stepbranch_run(*t);
  return {};
}

// Software stepbranch: run alone to the next control-flow instruction (client breakpoints and
// watchpoints on the way still stop it), execute it; count taken branches until done.
void LinuxProcess::stepbranch_run(Thread& t) {
  for (int guard = 0; guard < 100000 && !event_; ++guard) {
    if (t.branches_left == 0) {
      StopEvent ev = make_event(StopKind::StepBranch, t.tid, SIGTRAP);
      ev.branch_from = t.last_branch.from;
      ev.branch_to = t.last_branch.to;
      ev.step_mechanism = t.singleblock ? "singleblock" : "software";
      arm(t, 0);
      return report(t, ev);
    }
    uint64_t pc = get_pc(t.tid);
    bool pass_client = pc == t.pass_client_at;
    t.pass_client_at = 0;
    if (breakpoints_.has_client(pc) && !pass_client) {
      arm(t, 0);
      return report(t, make_event(StopKind::Breakpoint, t.tid, SIGTRAP));
    }
    auto block = code_cache_.block_at(pc);
    if (!block) {
      arm(t, 0);
      return report(t, make_event(StopKind::Signal, t.tid, SIGSEGV));  // no code at pc
    }
    if (watch_stepping()) {
      if (t.watch_hit) return report(t, watch_event(t.tid, *t.watch_hit));
      if (breakpoints_.contains(pc)) {
        // Our int3 over the instruction: the CPU runs it alone, lifted, checked like any step
        // (never emulated, so its memory accesses are seen).
        FlowInsn one;
        one.addr = pc;
        one.kind = FlowKind::Trap;
        if (auto d = code_cache_.insn_at(pc)) one.len = d->first;
        if (!execute_flow(t, one)) return;
        continue;
      }
      t.step_from = pc;
      return resume_thread(t, 0);  // stepbranch_step_done() comes back here
    }
    if (t.singleblock && !breakpoints_.contains(pc)) {
      t.step_from = pc;
      return resume_thread(t, 0);  // PTRACE_SINGLEBLOCK: the CPU stops after the next taken branch
    }
    if (block->end.addr != pc) {
      if (breakpoints_.contains(pc)) {
        // An ordinary instruction under an int3: the CPU runs it alone, int3 lifted.
        FlowInsn one;
        one.addr = pc;
        one.kind = FlowKind::Trap;
        if (auto d = code_cache_.insn_at(pc)) one.len = d->first;
        if (!execute_flow(t, one)) return;
        continue;
      }
      arm(t, block->end.addr);
      return resume_thread(t, 0);  // PTRACE_CONT, this thread only
    }
    auto out = execute_flow(t, block->end);
    if (!out) return;  // single-stepping it: flow_step_done() comes back here
    flow_done(t, block->end, *out);
  }
}

// PTRACE_SINGLEBLOCK stopped after a taken branch: find its source by walking forward from
// where the step began, past conditional branches that fell through.
void LinuxProcess::stepbranch_singleblock_done(Thread& t) {
  uint64_t pc = get_pc(t.tid);
  uint64_t at = t.step_from, from = 0;
  for (int i = 0; i < 256; ++i) {
    auto b = code_cache_.block_at(at);
    if (!b) break;
    const FlowInsn& e = b->end;
    bool conditional = e.kind == FlowKind::CondJump || e.kind == FlowKind::Loop;
    if (conditional && e.direct_target && *e.direct_target != pc && e.len) {
      at = e.addr + e.len;
      continue;
    }
    from = e.addr;
    break;
  }
  t.last_branch = Branch{from, pc};
  if (from) record(t, from, pc);
  t.block_start = pc;
  if (t.branches_left) --t.branches_left;
  stepbranch_run(t);
}

// One checked single step of a stepbranch under emulated watchpoints: a step that did not land
// after the instruction took a branch.
void LinuxProcess::stepbranch_step_done(Thread& t) {
  uint64_t pc = get_pc(t.tid);
  auto insn = code_cache_.insn_at(t.step_from);
  if (insn && insn->first && pc != t.step_from + insn->first) {
    record(t, t.step_from, pc);
    t.last_branch = Branch{t.step_from, pc};
    t.last_flow = t.step_from;
    t.last_flow_taken = true;
    t.block_start = pc;
    if (t.branches_left) --t.branches_left;
  } else if (insn && insn->second) {
    t.last_flow = t.step_from;
    t.last_flow_taken = false;
    t.block_start = pc;
  }
  stepbranch_run(t);
}

// Stops every running thread right now (for detach/kill while running).
void LinuxProcess::stop_all_sync() {
  if (!running_) return;
  // A placeholder event makes every handler keep threads stopped.
  if (!event_ && !ready_event_) event_ = last_stop_;
  stop_others();
  while (alive_ && !all_stopped()) {
    bool progress = false;
    for (auto& [tid, t] : std::map<pid_t, Thread>(threads_)) {
      if (!t.running) continue;
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
  if (event_) last_stop_ = *event_;
  event_.reset();
  ready_event_.reset();
  running_ = false;
}

Result<void> LinuxProcess::detach() {
  release_held_children(false);
  if (!alive_) return {};
  stop_all_sync();
  if (!alive_) return {};
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
  release_held_children(!attached_);
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
  running_ = false;
  forget_process(make_event(StopKind::Killed, pid_, SIGKILL));
  exit_unreported_ = false;
  return {};
}

// ---------------------------------------------------------------- fork children

Result<void> LinuxProcess::detach_child(pid_t child) {
  if (!held_children_.erase(child)) return Error{ESRCH, fmt::format("No fork child {} is held.", child)};
  if (::ptrace(PTRACE_DETACH, child, nullptr, nullptr) != 0 && errno != ESRCH)
    return errno_error(fmt::format("Cannot detach from process {}", child));
  return {};
}

Result<std::unique_ptr<Process>> LinuxProcess::adopt_child(pid_t child) {
  if (!held_children_.erase(child)) return Error{ESRCH, fmt::format("No fork child {} is held.", child)};
  // Already traced with our options (inherited from the fork) and stopped; its memory holds
  // none of our int3s.
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(child, attached_));
  p->threads_[child] = Thread{child};
  p->last_stop_ = p->make_event(StopKind::Signal, child, SIGTRAP);
  p->set_trace_source(tracer_->preferred_source());
  p->set_watch_emulation(watch_emulation_);
  return std::unique_ptr<Process>(std::move(p));
}

void LinuxProcess::release_held_children(bool kill) {
  for (pid_t child : held_children_) {
    if (kill) {
      ::kill(child, SIGKILL);
      while (::waitpid(child, nullptr, __WALL) < 0 && errno == EINTR) {}
    } else {
      ::ptrace(PTRACE_DETACH, child, nullptr, nullptr);
    }
  }
  held_children_.clear();
}

// ---------------------------------------------------------------- signals

void LinuxProcess::set_catch_syscalls(bool on, std::set<int> syscalls) {
  catch_syscalls_ = on;
  caught_syscalls_ = on ? std::move(syscalls) : std::set<int>{};
}

void LinuxProcess::handle_syscall_stop(Thread& t) {
  // Entry or exit? The kernel says so since 5.3; before that, alternate (a step from an
  // entry stop ends the syscall without an exit stop, so the toggle is only a fallback).
  SyscallInfo info{};
  long n = ::ptrace(PTRACE_GET_SYSCALL_INFO, t.tid, reinterpret_cast<void*>(sizeof info), &info);
  bool entry = n > 0 ? info.op == kSyscallInfoEntry : !t.in_syscall;
  bool known = n <= 0 || info.op == kSyscallInfoEntry || info.op == kSyscallInfoExit;
  if (entry) {
    if (n > 0) {
      t.syscall_nr = static_cast<int>(info.entry.nr);
    } else {
      errno = 0;
      long nr = ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
      t.syscall_nr = errno ? -1 : static_cast<int>(nr);
    }
  }
  if (!entry) {
    // The exit of a syscall whose entry we did not see (entered before syscalls were caught,
    // or an execve that rebuilt our thread state) has its number in orig_rax, as at any stop.
    errno = 0;
    long nr = ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
    t.syscall_nr = errno ? t.syscall_nr : static_cast<int>(nr);
  }
  t.in_syscall = entry;
  if (!entry && t.watch_step) {  // the checked step over a syscall instruction ends here
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  int nr = t.syscall_nr;
  bool wanted = known && catch_syscalls_ && nr >= 0 && (caught_syscalls_.empty() || caught_syscalls_.count(nr));
  if (!wanted) {
    if (!event_) resume_thread(t, 0);
    return;
  }
  StopEvent ev = make_event(entry ? StopKind::SyscallEntry : StopKind::SyscallReturn, t.tid, SIGTRAP);
  ev.syscall_no = nr;
  report(t, ev);
}

Result<std::vector<uint8_t>> LinuxProcess::siginfo(pid_t tid) {
  std::vector<uint8_t> out(128, 0);
  static_assert(sizeof(siginfo_t) == 128);
  if (::ptrace(PTRACE_GETSIGINFO, tid, nullptr, out.data()) != 0)
    return errno_error(fmt::format("Cannot read the siginfo of thread {}", tid));
  return out;
}

Result<void> LinuxProcess::set_siginfo(pid_t tid, std::span<const uint8_t> info) {
  if (info.size() != sizeof(siginfo_t)) return Error{EINVAL, "A siginfo is 128 bytes."};
  siginfo_t si;
  std::memcpy(&si, info.data(), sizeof si);
  if (::ptrace(PTRACE_SETSIGINFO, tid, nullptr, &si) != 0)
    return errno_error(fmt::format("Cannot write the siginfo of thread {}", tid));
  return {};
}

// ---------------------------------------------------------------- registers

Result<RegisterFile> LinuxProcess::read_registers(pid_t tid, RegisterSet set) {
  if (!has_thread(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  std::string err;
  auto f = RegisterAccess::read(tid, layout_, &err, set);
  if (!f) return Error{errno ? errno : EIO, err};
  return std::move(*f);
}

Result<void> LinuxProcess::write_registers(pid_t tid, const RegisterFile& regs) {
  if (!has_thread(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  std::string err;
  if (!RegisterAccess::write(tid, layout_, regs, &err)) return Error{errno ? errno : EIO, err};
  return {};
}

// ---------------------------------------------------------------- memory

Result<size_t> LinuxProcess::read_memory(uint64_t addr, std::span<uint8_t> out) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  auto n = mem_.read(addr, out);
  if (!n) return n;
  breakpoints_.unshadow(addr, out.first(*n));
  return n;
}

Result<size_t> LinuxProcess::write_memory(uint64_t addr, std::span<const uint8_t> data) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  std::vector<uint8_t> copy(data.begin(), data.end());
  breakpoints_.shadow_write(addr, copy);  // keeps our int3s, remembers the new originals
  code_cache_.invalidate(addr, copy.size());
  watch_.invalidate_code(addr, copy.size());
  return mem_.write(addr, copy);
}

// ---------------------------------------------------------------- breakpoints

namespace {
HwKind hw_kind_of(BreakpointKind kind) {
  switch (kind) {
    case BreakpointKind::Hardware: return HwKind::Execute;
    case BreakpointKind::WriteWatch: return HwKind::Write;
    case BreakpointKind::ReadWatch: return HwKind::Read;
    default: return HwKind::Access;
  }
}
}  // namespace

Result<void> LinuxProcess::insert_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind == BreakpointKind::Software) return breakpoints_.insert(mem_, addr, BreakpointOwner::Client);
  HwKind hk = hw_kind_of(kind);
  if (watch_emulation_) {
    // The slot accounting of the debug registers; an execute breakpoint is an int3 besides.
    if (auto r = watch_.insert(hk, addr, len); !r) return r;
    if (hk == HwKind::Execute)
      if (auto r = breakpoints_.insert(mem_, addr, BreakpointOwner::ClientHardware); !r) {
        (void)watch_.remove(hk, addr, len);
        return r;
      }
    return {};
  }
  // DR7 watches reads only together with writes: a read watchpoint would report writes too.
  if (hk == HwKind::Read)
    return Error{EOPNOTSUPP, "Read watchpoints are not supported by the debug registers (use awatch)."};
  if (auto r = debug_.insert(hk, addr, len); !r) return r;
  for (auto& [tid, t] : threads_)
    if (auto r = debug_.apply(tid); !r) {
      (void)debug_.remove(hk, addr, len);
      for (auto& [other, t2] : threads_) (void)debug_.apply(other);
      return r;
    }
  return {};
}

Result<void> LinuxProcess::remove_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind == BreakpointKind::Software) return breakpoints_.remove(mem_, addr, BreakpointOwner::Client);
  HwKind hk = hw_kind_of(kind);
  if (watch_emulation_) {
    if (auto r = watch_.remove(hk, addr, len); !r) return r;
    if (hk == HwKind::Execute) return breakpoints_.remove(mem_, addr, BreakpointOwner::ClientHardware);
    return {};
  }
  if (auto r = debug_.remove(hk, addr, len); !r) return r;
  for (auto& [tid, t] : threads_) (void)debug_.apply(tid);
  return {};
}

Result<void> LinuxProcess::insert_internal_breakpoint(uint64_t addr) {
  return breakpoints_.insert(mem_, addr, BreakpointOwner::Internal);
}

Result<void> LinuxProcess::remove_internal_breakpoint(uint64_t addr) {
  return breakpoints_.remove(mem_, addr, BreakpointOwner::Internal);
}

// ---------------------------------------------------------------- information

Result<std::vector<uint8_t>> LinuxProcess::auxv() { return read_auxv(pid_); }
Result<std::string> LinuxProcess::exe_path() { return read_exe_path(pid_); }
Result<std::vector<MemoryRegion>> LinuxProcess::memory_map() { return read_memory_map(pid_); }

Result<std::vector<LibraryInfo>> LinuxProcess::libraries(uint64_t* main_lm) {
  auto av = read_auxv(pid_);
  if (!av) return av.error();
  return read_libraries(*av, [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = read_memory(addr, out);
    return n ? *n : 0;
  }, main_lm);
}

}  // namespace backend
