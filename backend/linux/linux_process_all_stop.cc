// All-stop in LinuxProcess: a reported event (or an interrupt) stops every other thread with
// a SIGSTOP we swallow; once all are stopped, finish() settles them and the event is returned.
// report() is the way every event goes; in non-stop it hands the event to
// linux_process_non_stop.cc instead.
#include <signal.h>
#include <sys/wait.h>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/thread_signal.h"

namespace backend {

namespace {

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
    case StopKind::Clone: return "clone";
    case StopKind::HistoryBegin: return "history begin";  // a replay's; named for its log lines
    case StopKind::HistoryEnd: return "history end";
  }
  return "?";
}

}  // namespace

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

// A client-visible event: the first one stops everybody (the process is Stopping until every
// thread is stopped); later ones wait as the thread's pending event.
void LinuxProcess::report(LinuxThread& t, StopEvent ev) {
  // An emulated watchpoint fired on the step that led here: the hardware's trap would have
  // come first (after that instruction), so it is the event.
  if (t.watch_hit) ev = watch_event(t.tid, *t.watch_hit);
  t.watch_hit.reset();
  t.watch_step.reset();
  if (t.trace_steps) {  // while-stepping ends at anything the client hears of
    t.action = t.trace_steps->action;
    t.trace_steps.reset();
  }
  // A step that ends on a tracepoint site collects there (the next resume steps over its
  // int3 without a hit), as gdbserver's handle_tracepoints does at every stop.
  if (ev.kind == StopKind::Step) step_onto_tracepoint(t);
  if (auto* over = std::get_if<run::StepOver>(&t.mode)) {
    (void)breakpoints_.lower(mem_, over->addr);
    set_mode(t, run::Normal{});
  }
  if (t.lifted_step && t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
  undo_displaced(t);
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
    if (thread_events_ || leader.options.exit) {
      if (leader.options.exit) option_exits_.insert(leader.tid);
      ns_events_.push_back(make_event(StopKind::ThreadExited, leader.tid, 0));
    } else {
      resumed_thread_gone_ = true;
    }
    wants_poll_ = true;
  }
  return true;
}

StopEvent LinuxProcess::finish(StopEvent ev) {
  settle_threads();
  chosen_.reset();
  ready_event_.reset();
  phase_ = Phase::Stopped;
  interrupt_requested_ = false;
  if (ev.kind == StopKind::Exited || ev.kind == StopKind::Killed) exit_unreported_ = false;
  if (ev.kind == StopKind::ThreadExited) option_exits_.erase(ev.tid);
  if (ev.kind != StopKind::NoResumed) last_stop_ = ev;
  log("process {}: stop reported: {} thread {} signal {}", pid_, kind_name(ev.kind), ev.tid, ev.signo);
  return ev;
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
    undo_displaced(t);
    stepper_.settle(t);
    if (!t.in<run::RangeStep>() && !t.in<run::StepOver>()) set_mode(t, run::Normal{});
    tracer_->thread_stopped(tid);
  }
  settle_fast_sites();  // out of the pads, their frames drained, the sites int3s again
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
  while (alive_ && (!all_stopped() || !stashed_.empty())) {
    if (!stashed_.empty()) {  // a pause's taken statuses first (as poll_events does)
      handle_stashed();
      stop_others();
      continue;
    }
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
  if (unreported && alive_) {
    if (option_exit(*unreported)) untold_exits_.insert(untold_exits_.begin(), *unreported);
    else if (LinuxThread* t = find(unreported->tid); t && !t->pending) t->pending = unreported;
  }
  if (alive_) stepper_.patch_suspend(nullptr);  // stopped without a report: no patch shows either
  for (auto& [tid, t] : threads_) undo_displaced(t);  // none left in our page (a detach may follow)
  chosen_.reset();
  ready_event_.reset();
  phase_ = Phase::Stopped;
}

}  // namespace backend
