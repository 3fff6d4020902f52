// The stop dispatcher of LinuxProcess: poll_events() waits for each thread's status and
// handle_stop() finishes whatever internal work the status ends (our SIGSTOPs, int3s, steps,
// signals to pass, new threads, exits), resuming the thread or reporting an event. Fork, vfork
// and exec are in linux_process_children.cc, syscall stops in linux_process_syscalls.cc.
#include <sched.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "backend/linux/linux_process.h"

namespace backend {

namespace {

// A traced run hands back to the server's loop after this many wait statuses (bounded slices).
constexpr int kStatusesPerSlice = 256;

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

std::optional<StopEvent> LinuxProcess::poll_events() {
  wants_poll_ = false;
  if (ready_event_) return finish(*ready_event_);
  if (!alive_) return std::nullopt;
  // The process's exit, held back until the exit-option exits before it were out (all-stop:
  // until the resume after them).
  if (leader_exit_status_ && !thread_exits_untold() && (non_stop_ || phase_ == Phase::Running)) exit_held_leader();
  if (!stashed_.empty()) handle_stashed();
  if (non_stop_ && waits_for_resume()) return std::nullopt;

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
    // A pause in the last status's handling (a catch-up) may have taken another thread's
    // real event: handled before anything counts that thread as stopped for good (all-stop
    // would report with it still inside a stub, its trap unseen by the engine).
    if (!stashed_.empty()) handle_stashed();
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
    // No stop waiting: a piece of a full ring's drain (block patching) while the threads run,
    // then a look for stops again, so that a thread stopping meanwhile waits for a piece only;
    // and the spin goes on after the last piece (the next stop is as near as after a stop).
    if (phase_ == Phase::Running && stepper_.patch_background()) {
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
  if (stopping() && chosen_ && all_stopped() && stashed_.empty()) return finish(*chosen_);
  // Every thread the client resumed has exited (the others it left stopped): nothing will ever
  // report otherwise (gdbserver's "no resumed" stop). Not while a status taken by a pause waits
  // to be handled (pause_running's stash): that thread is not running, but it has not stopped
  // for good either (a catch-up's pause made GDB hear "no resumed" mid-run and wait forever).
  if (phase_ == Phase::Running && deferred_.empty() && stashed_.empty() && all_stopped() &&
      std::chrono::steady_clock::now() >= exec_expected_until_)
    return finish(make_event(StopKind::NoResumed, 0));
  return std::nullopt;
}

void LinuxProcess::handle_stop(pid_t tid, int status) {
  LinuxThread* t = find(tid);
  if (!t) return;
  ++ptrace_stops_;
  t->stop_regs.reset();  // it ran (or died) since they were read
  if (settings_.log && !t->in<run::Traced>() && !t->in<run::WatchStep>())
    log("thread {}: {} (mode {})", tid, describe_status(status), mode_name(t->mode));
  if (WIFEXITED(status) || WIFSIGNALED(status)) return handle_exit(*t, status);
  if (!WIFSTOPPED(status)) return;
  t->running = false;
  // An access to the pages protected for emulated watchpoints (replays): checked here.
  if (page_.armed && WSTOPSIG(status) == SIGSEGV && (status >> 16) == 0 && page_fault(*t)) return;
  // Block patching's own stop (a full ring, a stub's miss). A system-call stop's drains wait
  // for handle_syscall_stop(), which resumes most of them at once; replay's never wait.
  t->syscall_stop.reset();
  if (WSTOPSIG(status) == (SIGTRAP | 0x80) && (status >> 16) == 0) t->syscall_stop = read_syscall_stop(*t);
  if (stepper_.patch_stop(*t, status, !interceptor_)) return;
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
  if (tid == pid_ && thread_exits_untold()) {
    // Exit-option exits not told yet go first, as gdbserver 15 reports each one before the
    // process's: the leader's status waits until they are out (non-stop: a later poll;
    // all-stop: the next resume).
    t.running = false;
    leader_exit_status_ = status;
    wants_poll_ = true;
    return;
  }
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

void LinuxProcess::exit_held_leader() {
  int status = *std::exchange(leader_exit_status_, std::nullopt);
  if (LinuxThread* leader = find(pid_)) handle_exit(*leader, status);
}

bool LinuxProcess::thread_exits_untold() const {
  if (!untold_exits_.empty() || (chosen_ && option_exit(*chosen_))) return true;
  return std::any_of(ns_events_.begin(), ns_events_.end(), [this](const StopEvent& ev) { return option_exit(ev); });
}

void LinuxProcess::thread_exited(LinuxThread& t, int status) {
  pid_t tid = t.tid;
  bool was_resumed = t.resumed, was_step_over = step_over_tid_ == tid;
  bool by_option = t.options.exit, tell = thread_events_ || by_option;  // t is gone below
  stepper_.arm(t, 0);
  if (t.lifted_step && t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
  if (auto* over = std::get_if<run::StepOver>(&t.mode)) (void)breakpoints_.lower(mem_, over->addr);
  tracer_->thread_exited(tid);
  stepper_.patch_thread_exited(tid);  // its ring goes to the next new thread
  deferred_.erase(tid);
  threads_.erase(tid);
  if (tell) {
    StopEvent ev = make_event(StopKind::ThreadExited, tid, 0);
    ev.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
    log("thread {}: exited, reported", tid);
    if (by_option) option_exits_.insert(tid);
    if (non_stop_) {
      ns_events_.push_back(ev);
    } else if (!stopping()) {  // all-stop: like any event, everybody stops
      chosen_ = ev;
      phase_ = Phase::Stopping;
      deferred_.clear();
      stop_others();
    } else if (by_option) {
      untold_exits_.push_back(ev);
    }
  } else if (non_stop_ && was_resumed) {
    resumed_thread_gone_ = true;
  }
  if (was_step_over) end_step_over();
}

void LinuxProcess::handle_signal(LinuxThread& t, int sig) {
  undo_displaced(t);  // came before the copy ran: the signal is the original instruction's
  if (interceptor_) {
    // The direct branches passed so far count before the interceptor reads the thread's count.
    if (t.in<run::Traced>()) stepper_.commit_plan(t, get_pc(t.tid));
    std::string message;
    bool consumed = interceptor_->take_signal(t.tid, sig, &message);
    sync_interceptor_watch();
    if (consumed) {  // replay emulated it (rdtsc)
      if (!stopping()) proceed(t);
      return;
    }
    console_output_ += message;
  }
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
  undo_displaced(t);
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
    if (interceptor_watch_ && pc - 1 == interceptor_watch_ && interceptor_watch_hit(t, pc - 1)) return;
    if (breakpoints_.has(pc - 1, BreakpointOwner::Tracepoint) && tracepoint_hit(t, pc - 1)) return;
    if (!breakpoints_.has_client(pc - 1)) return handle_internal_int3(t, pc - 1);
    if (conditions_.any_at(pc - 1) && !client_hit_reported(t, pc - 1, true)) return;
    bool hardware = breakpoints_.client_is_hardware(pc - 1);
    return report(t, make_event(hardware ? StopKind::HwBreakpoint : StopKind::Breakpoint, t.tid, SIGTRAP));
  }
  if (step_trap) return handle_step_done(t, si.si_code, dr6);
  if (si.si_code == SI_KERNEL && in_fast_pad(pc - 1)) return fast_area_full(t, pc - 1);
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

// Counting through block patching, replay's watch int3 waits until this few branches are left
// (each pass over it costs two stops; the ring's budget stops the thread short of it before).
// Above what one engine stretch between two free runs can take.
constexpr uint64_t kWatchMargin = 256;

uint64_t LinuxProcess::branch_budget(pid_t tid) {
  if (!interceptor_ || interceptor_watch_ || !interceptor_->watch_pc()) return 0;
  uint64_t left = interceptor_->branches_before_watch(tid);
  return left > kWatchMargin ? left - kWatchMargin : 1;  // 1: stop at once, the int3 is due
}

void LinuxProcess::sync_interceptor_watch() {
  uint64_t want = interceptor_ ? interceptor_->watch_pc() : 0;
  // Checked steps (emulated watchpoints) count each branch at a stop of their own and no
  // ring's budget stops the thread: the int3 goes in at once.
  if (want && !watch_stepping() && stepper_.patch_counting(pid_) &&
      interceptor_->branches_before_watch(pid_) > kWatchMargin)
    want = 0;
  if (want == interceptor_watch_) return;
  if (interceptor_watch_) (void)breakpoints_.remove(mem_, interceptor_watch_, BreakpointOwner::Internal);
  interceptor_watch_ = 0;
  // Original code first: an int3 written over a patch would never be met (or break the jmp);
  // and once it is gone, the sites it kept to int3s are patched again at the next free run.
  stepper_.patch_suspend(nullptr);
  if (want && breakpoints_.insert(mem_, want, BreakpointOwner::Internal)) interceptor_watch_ = want;
}

bool LinuxProcess::interceptor_watch_hit(LinuxThread& t, uint64_t addr) {
  if (t.in<run::Traced>()) stepper_.commit_plan(t, addr);  // the count, exact at addr
  uint8_t code[16] = {};
  auto n = read_memory(addr, code);
  auto verdict = interceptor_->at_watch_pc(t.tid, std::span<const uint8_t>(code, n ? *n : 0));
  sync_interceptor_watch();
  if (verdict.stop) {
    console_output_ += verdict.message;
    t.last_signal = SIGTRAP;
    report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
    return true;
  }
  if (verdict.ran_it) {  // a rep string finished by the replay: on from the next instruction
    if (!stopping()) resume_thread(t, 0);
    return true;
  }
  // A signal is pending: resumed from addr, the thread takes it before executing anything
  // (a client breakpoint there is still reported first, the signal waits in the kernel). Not
  // planned again from addr: the block start stays the one record had, so the handler's entry
  // is counted from the same instruction.
  if (!verdict.signal_sent || breakpoints_.has_client(addr) || t.overlaid()) return false;
  if (!stopping()) resume_thread(t, 0);
  return true;
}

void LinuxProcess::handle_internal_int3(LinuxThread& t, uint64_t addr) {
  if (t.overlaid()) return report(t, make_event(StopKind::Breakpoint, t.tid, SIGTRAP));
  if (t.in<run::WatchStep>()) {
    if (t.armed == addr) {  // the end of a run ahead: that instruction is checked next
      // The int3 stays while the branch there is emulated: a loop's next run ahead ends at
      // the same place (two memory writes a turn fewer). A step of it disarms first
      // (prepare_watch_step), as does a reported stop (settle).
      if (stopping()) return stepper_.arm(t, 0);
      if (!watch_emulate_flow(t, addr)) resume_thread(t, 0);
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
  if (t.trace_steps) return trace_step_done(t);
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
      tracer_->thread_created(child, t.tid);  // traced from its first instruction if t is (or coverage runs)
      if (t.options.clone) {
        // QThreadOptions: the parent reports the clone; the new thread stays stopped until the
        // client resumes it (gdbserver), with its creation pending if thread events are on.
        nt.resumed = false;
        if (thread_events_) nt.pending = make_event(StopKind::ThreadCreated, child, SIGTRAP);
        StopEvent ev = make_event(StopKind::Clone, t.tid, SIGTRAP);
        ev.child_pid = child;
        return report(t, ev);
      }
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

}  // namespace backend
