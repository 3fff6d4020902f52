// Non-stop mode of LinuxProcess: per-thread resume and stop, the queue of reported events,
// and the short pauses of running threads (a multi-byte memory write, debug registers, a
// step-over with an int3 lifted) that keep a running thread from executing half-written code
// or passing a lifted breakpoint. The stop dispatcher itself (linux_process_dispatch.cc) is
// shared with all-stop: report() hands the event here instead of stopping every thread.
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/thread_signal.h"

namespace backend {

bool LinuxProcess::running() const {
  if (!non_stop_) return phase_ != Phase::Stopped;
  if (!alive_) return exit_unreported_;
  if (!ns_events_.empty() || !stashed_.empty() || resumed_thread_gone_ || leader_exit_status_) return true;
  for (const auto& [tid, t] : threads_)
    if (t.resumed) return true;
  return false;
}

Result<void> LinuxProcess::set_non_stop(bool on) {
  if (on == non_stop_) return {};
  if (running()) {
    if (on) return Error{EBUSY, "Cannot switch to non-stop mode while the program runs."};
    // Back to all-stop (the client went away): everything stops; events not told yet wait
    // as their threads' pending events, for the next resume.
    stop_all_sync();
    for (auto& ev : ns_events_) {
      if (option_exit(ev)) untold_exits_.push_back(ev);
      else if (LinuxThread* t = find(ev.tid); t && !t->pending && ev.kind != StopKind::NoResumed) t->pending = ev;
    }
    phase_ = Phase::Stopped;
  }
  non_stop_ = on;
  ns_events_.clear();
  if (on) {  // switched while stopped: before anything ran (a new client)
    untold_exits_.clear();
    option_exits_.clear();
  }
  resumed_thread_gone_ = false;
  for (auto& [tid, t] : threads_) {
    t.resumed = t.stop_requested = t.paused = false;
    t.last_event.reset();
  }
  if (alive_)
    if (LinuxThread* t = find(last_stop_.tid)) t->last_event = last_stop_;
  if (on && fresh_attach_ && alive_) {
    // Attached before the client came (--attach), as gdbserver: the thread of the attach stop
    // is reported, the others count as running until the client stops them (vCont;t).
    for (auto& [tid, t] : threads_)
      if (tid != last_stop_.tid && !t.zombie) t.resumed = true;
    phase_ = Phase::Running;
  }
  log("process {}: {} mode", pid_, on ? "non-stop" : "all-stop");
  return {};
}

std::vector<StopEvent> LinuxProcess::stopped_threads() const {
  if (!alive_) return {last_stop_};
  if (!non_stop_) return running() ? std::vector<StopEvent>{} : std::vector<StopEvent>{last_stop_};
  std::vector<StopEvent> out;
  for (pid_t tid : threads()) {
    const LinuxThread& t = threads_.at(tid);
    if (t.resumed) continue;
    out.push_back(t.last_event ? *t.last_event : make_event(StopKind::Signal, tid, 0));
  }
  return out;
}

void LinuxProcess::hold_attach_stops() {
  if (!non_stop_ || !alive_) return;
  for (auto& [tid, t] : threads_)
    if (!t.zombie) t.resumed = true;  // stopped (not running): request_stop() reports at once
  phase_ = Phase::Running;
}

// Non-stop: a process the client knows as stopped all over, with nothing left to tell, is not
// waited for until it is resumed (gdbserver): killed from outside meanwhile, its threads answer
// with the registers of their stops (stop_regs) and its exit is told when the client resumes
// it. GDB, in all-stop over non-stop, reads a stopped thread's registers before it resumes
// anything, and goes no further when they are gone (gdb.multi/multi-kill.exp).
bool LinuxProcess::waits_for_resume() const {
  if (!ns_events_.empty() || !deferred_.empty() || resumed_thread_gone_) return false;
  if (!untold_exits_.empty() || leader_exit_status_) return false;  // QThreadOptions exits to tell
  if (threads_.empty()) return false;  // every thread told gone: the process's exit is to wait for
  for (const auto& [tid, t] : threads_)
    if (t.resumed || t.running) return false;
  return true;
}

bool LinuxProcess::thread_running(pid_t tid) const {
  if (!non_stop_) return running();
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.resumed;
}

// ---------------------------------------------------------------- resuming and stopping

Result<void> LinuxProcess::resume_non_stop(const ResumePlan& plan) {
  for (const auto& [tid, a] : plan.threads)
    if (!threads_.count(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  std::map<pid_t, ResumeAction> actions;
  for (auto& [tid, t] : threads_) {
    if (t.zombie) continue;
    auto it = plan.threads.find(tid);
    std::optional<ResumeAction> a = it != plan.threads.end() ? std::optional(it->second) : plan.others;
    if (!a) continue;
    if (a->kind == ResumeKind::Stop) {
      request_stop(t, 0);
      continue;
    }
    if (t.resumed) continue;  // running already: an action without a thread is for the stopped ones
    actions[tid] = *a;
  }
  phase_ = Phase::Running;
  step_over_clients_ = plan.step_over_client_breakpoints;
  for (auto& [tid, a] : actions) {
    LinuxThread& t = threads_.at(tid);
    if (t.pending) {
      // An event kept for it (the process was paused meanwhile) is its stop now, unless it is
      // a breakpoint removed since.
      StopEvent ev = *t.pending;
      t.pending.reset();
      if (!(ev.kind == StopKind::Breakpoint && !breakpoints_.has_client(get_pc(tid)))) {
        t.last_event = ev;
        ns_events_.push_back(ev);
        continue;
      }
    }
    t.action = a;
    if (a.signo == 0 && t.deliver_signal) a.signo = t.deliver_signal;
    t.deliver_signal = 0;
    t.last_signal = 0;
    t.resumed = true;
    t.stop_requested = false;
    t.stop_signal = 0;
    deferred_[tid] = a;
  }
  // While a step-over runs the others wait; they start when it ends.
  if (!step_over_tid_) start_deferred();
  if (!ns_events_.empty()) wants_poll_ = true;
  return {};
}

void LinuxProcess::request_stop(LinuxThread& t, int signo) {
  if (!t.resumed || t.zombie) return;  // stopped already (and told, or about to be)
  t.stop_requested = true;
  t.stop_signal = signo;
  if (t.running) {
    if (!t.sigstop_expected && signal_thread(pid_, t.tid, SIGSTOP) == 0) t.sigstop_expected = true;
    return;
  }
  if (t.stashed) return;  // its status is handled at the next poll: the stop is reported then
  // Stopped by us: waiting for a step-over (deferred) or paused for one. Its stop is now.
  deferred_.erase(t.tid);
  t.paused = false;
  report(t, make_event(StopKind::Signal, t.tid, signo));
}

void LinuxProcess::report_non_stop(LinuxThread& t, StopEvent ev) {
  // GDB's stop request racing a SIGKILL from outside: stopped, then gone before this report.
  // No stop without registers (GDB fails to read them): it counts as running, and its exit,
  // at the next poll, answers the stop request.
  std::string err;
  auto regs = RegisterAccess::read(t.tid, layout_, &err, RegisterSet::General);
  if (!regs && errno == ESRCH) {
    log("thread {}: gone before its stop was reported", t.tid);
    t.running = true;
    return;
  }
  bool was_step_over = step_over_tid_ == t.tid;
  if (t.stop_requested && ev.kind == StopKind::Signal && ev.signo == 0) ev.signo = t.stop_signal;
  t.resumed = false;
  t.stop_requested = false;
  t.stop_signal = 0;
  t.paused = false;
  deferred_.erase(t.tid);
  settle_thread(t);
  // Kept for a SIGKILL from outside before the client has read them (see stop_regs); read
  // again, as settling may have moved the thread (the killer may be quicker than that).
  if (auto settled = RegisterAccess::read(t.tid, layout_, &err, RegisterSet::General)) regs = std::move(settled);
  if (regs) t.stop_regs = std::move(*regs);
  t.last_event = ev;
  // A leader that left with pthread_exit has no wait status: look now, so the thread list the
  // client asks for at this stop no longer shows it (the idle polls look only every 20 ms).
  if (LinuxThread* leader = find(pid_); leader && leader != &t && leader->running) (void)leader_is_zombie(*leader);
  log("thread {}: {} (signal {}) reported; the others run on", t.tid, static_cast<int>(ev.kind), ev.signo);
  ns_events_.push_back(std::move(ev));
  if (was_step_over) end_step_over();
}

// At its reported stop: record what a traced thread passed, take its int3 out, plain mode.
void LinuxProcess::settle_thread(LinuxThread& t) {
  if (t.watch_hit && !t.pending) t.pending = watch_event(t.tid, *t.watch_hit);
  t.watch_hit.reset();
  t.watch_step.reset();
  undo_displaced(t);
  stepper_.settle(t);
  if (!t.in<run::RangeStep>() && !t.in<run::StepOver>()) set_mode(t, run::Normal{});
  tracer_->thread_stopped(t.tid);
}


// ---------------------------------------------------------------- pauses

std::vector<pid_t> LinuxProcess::pause_running(pid_t except) {
  std::vector<pid_t> sent, paused;
  for (auto& [tid, t] : threads_) {
    if (tid == except || !t.running || t.paused || leader_is_zombie(t)) continue;
    if (!t.sigstop_expected) {
      if (signal_thread(pid_, tid, SIGSTOP) != 0) continue;
      t.sigstop_expected = true;
    }
    sent.push_back(tid);
  }
  for (pid_t tid : sent) {
    LinuxThread* t = find(tid);
    int status = 0;
    pid_t w;
    while ((w = ::waitpid(tid, &status, __WALL)) < 0 && errno == EINTR) {}
    if (w != tid || !t) continue;
    t->running = false;
    if (WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP && (status >> 16) == 0) {
      t->sigstop_expected = false;
      t->paused = true;
      paused.push_back(tid);
    } else {
      // A real event (or its exit) came first: handled at the next poll; our SIGSTOP stays
      // queued and is swallowed when the thread runs again.
      t->stashed = true;
      stashed_.emplace_back(tid, status);
      wants_poll_ = true;
    }
  }
  if (!sent.empty()) log("process {}: {} threads paused", pid_, paused.size());
  return paused;
}

void LinuxProcess::resume_paused(const std::vector<pid_t>& tids) {
  for (pid_t tid : tids) {
    LinuxThread* t = find(tid);
    if (!t || !t->paused) continue;
    t->paused = false;
    // Stopped at a signal-delivery stop before anything ran: the same request carries on
    // (a single step not yet taken is taken now).
    if (::ptrace(static_cast<__ptrace_request>(t->request), tid, nullptr, nullptr) == 0) t->running = true;
  }
}

void LinuxProcess::begin_step_over(LinuxThread& t) {
  step_over_tid_ = t.tid;
  step_over_paused_ = pause_running(t.tid);
}

void LinuxProcess::end_step_over() {
  step_over_tid_ = 0;
  std::vector<pid_t> paused = std::move(step_over_paused_);
  step_over_paused_.clear();
  resume_paused(paused);
  if (!stopping() && !deferred_.empty()) start_deferred();
}

void LinuxProcess::handle_stashed() {
  std::vector<std::pair<pid_t, int>> statuses = std::move(stashed_);
  stashed_.clear();
  for (auto [tid, status] : statuses) {
    LinuxThread* t = find(tid);
    if (!t) continue;
    t->stashed = false;
    handle_stop(tid, status);
  }
}

std::optional<StopEvent> LinuxProcess::next_non_stop_event() {
  if (resumed_thread_gone_) {
    // A resumed thread went without a word: once no thread the client resumed runs and
    // nothing else is left to tell, 'N' (the client would wait for it for ever). Kept until
    // then: the others may stop by events of their own first.
    bool any = false;
    for (const auto& [tid, t] : threads_) any = any || t.resumed;
    if (!any && ns_events_.empty()) {
      resumed_thread_gone_ = false;
      ns_events_.push_back(make_event(StopKind::NoResumed, 0));
    }
  }
  if (ns_events_.empty()) return std::nullopt;
  StopEvent ev = std::move(ns_events_.front());
  ns_events_.pop_front();
  wants_poll_ = !ns_events_.empty() || !stashed_.empty() || resumed_thread_gone_ || leader_exit_status_;
  if (ev.kind != StopKind::NoResumed && ev.kind != StopKind::ThreadExited) last_stop_ = ev;
  if (ev.kind == StopKind::ThreadExited) option_exits_.erase(ev.tid);
  return ev;
}

}  // namespace backend
