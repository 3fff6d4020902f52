// Resuming LinuxProcess: the client's resume plan (all-stop; non-stop's is in
// linux_process_non_stop.cc), the deferred starts that step threads off our int3s first, and
// resume_thread(), the one place a thread's run mode becomes a ptrace request.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/ptrace_requests.h"
#include "backend/x86/nondeterministic.h"

namespace backend {

namespace {

const char* request_name(long request) {
  switch (request) {
    case PTRACE_CONT: return "PTRACE_CONT";
    case PTRACE_SINGLESTEP: return "PTRACE_SINGLESTEP";
    case PTRACE_SYSCALL: return "PTRACE_SYSCALL";
    case kPtraceSingleblock: return "PTRACE_SINGLEBLOCK";
    default: return "ptrace";
  }
}

}  // namespace

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

  // Exit-option exits found while stopping, then the process's exit held back behind them:
  // each is the event of a resume, and nobody runs (the leader may be gone already).
  if (!untold_exits_.empty()) {
    ready_event_ = untold_exits_.front();
    untold_exits_.erase(untold_exits_.begin());
    phase_ = Phase::Running;
    return {};
  }
  if (leader_exit_status_) {  // taken by the next poll (the process stays alive until then)
    phase_ = Phase::Running;
    wants_poll_ = true;
    return {};
  }

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
  if (!fast_sites_.empty()) arm_fast_sites(fast_jumps_allowed(actions));
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
    if (signo == 0 && it->second.kind != ResumeKind::Stop && !watch_stepping() && !t->trace_steps) {
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
    // Pages protected before the engine decides how a traced thread runs (free through the
    // patches only when no checked steps are due).
    if (interceptor_ && settings_.watch_emulation && !sync_page_watch(*t, a.kind == ResumeKind::Continue)) continue;
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
  const bool free_run_calls_seen = std::exchange(t.calls_never_unseen, false);  // this resume only
  if (stopping()) return;  // everybody is being stopped for a reported event: stay stopped
  if (non_stop_) {
    if (!t.resumed || t.paused) return;  // the client's stopped threads never run
    // A stop the client asked for: here, between two pieces of internal work, is a clean place.
    if (t.stop_requested) return report(t, make_event(StopKind::Signal, t.tid, t.stop_signal));
  }
  if (t.watch_hit) return report(t, watch_event(t.tid, *t.watch_hit));
  if (interceptor_ && settings_.watch_emulation) {
    // A replay's emulated watchpoints: the watched pages protected instead of checked steps
    // where they can be (linux_process_page_watch.cc); a thread that stepped runs free again.
    if (!sync_page_watch(t, t.action.kind == ResumeKind::Continue)) return;
    if (page_.armed && t.in<run::WatchStep>()) {
      stepper_.arm(t, 0);
      set_mode(t, run::Normal{});
      if (stepper_.traced(t.tid)) return stepper_.continue_traced(t, signo);
    }
  }
  if (watch_stepping() && !t.overlaid() &&
      (t.in<run::Traced>() || (t.in<run::Normal>() && t.action.kind == ResumeKind::Continue))) {
    // A continue becomes checked single steps; a traced thread records each step's branch.
    stepper_.arm(t, 0);
    set_mode(t, run::WatchStep{});
    // Replay's watch int3, held back for the ring's budget, is due now (sync_interceptor_watch).
    if (interceptor_) sync_interceptor_watch();
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
  bool run_ahead = false;
  if (watch_stepping() && !block) {
    auto how = prepare_watch_step(t, signo);
    if (how == WatchRun::Gone) return;  // its exit status will tell
    run_ahead = how == WatchRun::Ahead;
    single = !run_ahead;
  }
  // (After the watch decision: a run ahead is no step, and needs no pc read here.)
  if (single && stepper_.traced(t.tid) && !t.overlaid()) {
    // A client step of a traced thread: remember where it was to record a branch it takes.
    // From a syscall's entry stop a step only finishes the syscall: nothing to record.
    uint64_t pc = get_pc(t.tid);
    t.cursor.step_from = t.in_syscall ? 0 : pc;
    t.cursor.step_into_handler = signo != 0 && signal_is_caught(pid_, signo);
    if (t.cursor.step_into_handler) t.cursor.signal_from = stepper_.insn_before_pc(t, pc).value_or(0);
  }
  // A plain continue stops at syscalls while the client catches them; so does a checked
  // step over a syscall instruction (a single step would run through the syscall unseen).
  // A traced thread too: the syscall instruction ending its block runs lifted, under
  // PTRACE_SYSCALL rather than a single step, and untraced stretches run under it. A displaced
  // syscall always does (its entry stop moves it back), and so does what follows its entry
  // (the exit stop records it).
  bool lifted_syscall = t.lifted_step && !t.signal_entry && t.lifted_step->insn.kind == FlowKind::Syscall;
  bool displaced = lifted_syscall && t.lifted_step->displaced;
  bool syscall_stops = displaced || (t.syscall_flow && !t.overlaid()) ||
                       (catch_syscalls_ &&
                        ((!t.overlaid() && (t.in<run::Normal>() || t.in<run::Traced>() ||
                                            (t.in<run::WatchStep>() && !run_ahead && (t.in_syscall || at_syscall(t.tid))))) ||
                         (lifted_syscall && !t.in<run::WatchStep>() && !t.in<run::StepBranch>())));
  long request = block ? kPtraceSingleblock
                 : syscall_stops && (!single || t.in<run::WatchStep>() || lifted_syscall) ? long{PTRACE_SYSCALL}
                 : single ? long{PTRACE_SINGLESTEP}
                          : long{PTRACE_CONT};
  // Under replay no syscall may run unseen: a continue, a step onto a syscall instruction and
  // a step from a syscall's entry all go on to the next syscall stop.
  // A recording's free run with the system-call buffer is the exception: each of its calls is
  // buffered or stops at an int3 before it (PatchTracer::calls_never_unseen).
  bool calls_seen = free_run_calls_seen && request == PTRACE_CONT && signo == 0;
  if (interceptor_ && request != kPtraceSingleblock &&
      ((request == PTRACE_CONT && !calls_seen) || t.in_syscall || (request == PTRACE_SINGLESTEP && at_syscall(t.tid))))
    request = PTRACE_SYSCALL;
  // Record/replay: a single step over cpuid, rdrand... gives the interceptor's result, not this
  // CPU's; the step is then done as if its trap had come.
  if (interceptor_ && request == PTRACE_SINGLESTEP && signo == 0 && !t.lifted_step && !t.signal_entry) {
    switch (take_nondeterministic(t)) {
      case Taken::Stopped: return;
      case Taken::Emulated: return handle_step_done(t, kTrapTrace, std::nullopt);
      case Taken::No: break;
    }
  }
  // A host whose hypervisor drops the trap after cpuid (the server's probe) would run the next
  // instruction within the same step: the server does a step over cpuid itself.
  if (!settings_.cpuid_step_traps && request == PTRACE_SINGLESTEP && signo == 0 && !t.signal_entry &&
      step_cpuid_here(t))
    return handle_step_done(t, kTrapTrace, std::nullopt);
  // Resumed from a syscall's entry stop with no syscall or step stop to come (the client no
  // longer catches syscalls): the instruction is done as far as the trace can tell.
  if (t.syscall_flow && request != PTRACE_SYSCALL && request != PTRACE_SINGLESTEP) finish_syscall_flow(t);
  if (request != PTRACE_SYSCALL) t.in_syscall = false;  // no exit stop will tell (the syscall ends unseen)
  if (::ptrace(static_cast<__ptrace_request>(request), t.tid, nullptr,
               reinterpret_cast<void*>(static_cast<long>(signo))) != 0) {
    // ESRCH: the thread is dying (an exit_group of a thread resumed before it, a SIGKILL):
    // its exit status will tell, so it counts as running until then. Counted as stopped, a
    // leader seen a zombie first would leave no thread running and report "no resumed".
    if (errno == ESRCH) t.running = true;
    return;
  }
  if (settings_.log && !t.in<run::Traced>() && !t.in<run::WatchStep>())  // those two resume per block: too many lines
    log("thread {}: {} (signal {}), mode {}", t.tid, request_name(request), signo, mode_name(t.mode));
  t.stepping = request == PTRACE_SINGLESTEP || request == kPtraceSingleblock;
  t.running = true;
  t.stop_regs.reset();
  t.request = request;
}

// A step of the client's action ended at pc: is the action done? A step is; a range step when
// pc leaves the range or reaches a client breakpoint (GDB then sees it as reached).
bool LinuxProcess::step_ends_action(const ResumeAction& a, uint64_t pc) const {
  if (a.kind == ResumeKind::Step) return true;
  if (a.kind != ResumeKind::RangeStep) return false;
  return pc < a.range_start || pc >= a.range_end || breakpoints_.has_client(pc);
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

// A single step over cpuid on a host that drops its trap: cpuid run here for the thread's leaf
// and subleaf (the answer this machine gives any thread), the registers set, rip past it.
bool LinuxProcess::step_cpuid_here(LinuxThread& t) {
  uint8_t code[16] = {};
  size_t n = code_cache_.reader()(get_pc(t.tid), code);
  auto insn = nondeterministic_insn(std::span<const uint8_t>(code, n));
  if (!insn || insn->kind != NondeterministicInsn::Kind::Cpuid) return false;
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0) return false;
  auto result = execute_here(*insn, regs);
  if (!result) return false;
  apply_result(*insn, *result, regs);
  return ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs) == 0;
}

}  // namespace backend
