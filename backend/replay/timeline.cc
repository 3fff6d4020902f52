#include "backend/replay/timeline.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "backend/linux/linux_process.h"
#include "backend/x86/insn_length.h"
#include "backend/x86/nondeterministic.h"

namespace backend::replay {

namespace {

// A `rep movs` of this many iterations, stepped one by one, is the longest stretch between two
// branches we step through; beyond it reverse execution gives up rather than hang.
constexpr size_t kMaxSteps = 4'000'000;

bool code_point(BreakpointKind k) { return k == BreakpointKind::Software || k == BreakpointKind::Hardware; }

// Whether a signal waits for the process (SigPnd: its thread's, ShdPnd: the process's). A fork
// does not inherit it: a copy taken then would miss a signal the recording has.
bool signals_pending(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("SigPnd:", 0) == 0 || line.rfind("ShdPnd:", 0) == 0)
      if (line.find_first_not_of("0\t ", 7) != std::string::npos) return true;
  return false;
}

}  // namespace

std::vector<std::pair<uint64_t, uint64_t>> watched_ranges(const std::vector<ClientPoint>& points) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& p : points)
    if (p.kind == BreakpointKind::WriteWatch || p.kind == BreakpointKind::AccessWatch) out.emplace_back(p.addr, p.len);
  return out;
}

Timeline::Timeline(std::shared_ptr<const TraceReader> trace, LaunchOptions base, std::function<void(Process&)> setup)
    : trace_(std::move(trace)), base_(std::move(base)), setup_(std::move(setup)) {}

Timeline::~Timeline() = default;

Result<void> Timeline::restart(const Checkpoint* from) {
  process_.reset();  // a launched replay (or a copy) is killed with its process
  clock_ = nullptr;
  Result<ReplayStart> started = Error{EINVAL, ""};
  if (from) {
    auto copy = from->frozen->fork_stopped();
    if (!copy) return copy.error();
    started = continue_replay(*copy, *from->state);
  } else {
    started = start_replay(trace_, base_);
    base_.say_redirected = false;  // said by the first replay
  }
  if (!started) return started.error();
  clock_ = started->clock;
  real_pid_ = started->process->pid();
  process_ = std::move(started->process);
  clock_->hold_at_end(true);
  clock_->set_watched({});  // a checkpoint's state has the client's of its time
  if (setup_) setup_(*process_);
  if (!from) start_ = here();
  return {};
}

const Timeline::Checkpoint* Timeline::checkpoint_before(const ReplayPoint& x, bool or_at) const {
  const Checkpoint* best = nullptr;
  for (const auto& c : checkpoints_)
    if (c.at < x || (or_at && c.at == x)) best = &c;
  return best;
}

void Timeline::take_checkpoint() {
  constexpr size_t kMaxCheckpoints = 24;
  if (!process_ || !process_->alive() || process_->running()) return;
  ReplayPoint at = here();
  if (at.end || clock_->diverged() || at == start_ || signals_pending(real_pid_)) return;
  for (const auto& c : checkpoints_)
    if (c.at == at) return;
  auto copy = process_->fork_stopped();
  if (!copy) return;  // no checkpoint: slower, not wrong
  Checkpoint c{LinuxProcess::adopt_stopped_child(*copy), at, clock_->save()};
  auto pos = std::find_if(checkpoints_.begin(), checkpoints_.end(), [&](const Checkpoint& o) { return at < o.at; });
  checkpoints_.insert(pos, std::move(c));
  if (checkpoints_.size() <= kMaxCheckpoints) return;
  // Too many: the one closest to the one before it goes (the first one stays).
  size_t drop = 1;
  for (size_t i = 2; i < checkpoints_.size(); ++i)
    if (checkpoints_[i].at.branches - checkpoints_[i - 1].at.branches <
        checkpoints_[drop].at.branches - checkpoints_[drop - 1].at.branches)
      drop = i;
  checkpoints_.erase(checkpoints_.begin() + static_cast<std::ptrdiff_t>(drop));
}

ReplayPoint Timeline::here() {
  ReplayPoint p;
  if (!clock_) return p;
  if (clock_->held_at_end()) {
    p.end = true;
    return p;
  }
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, real_pid_, nullptr, &regs);
  p.branches = clock_->branches();
  p.events = clock_->events();
  p.pc = regs.rip;
  p.rcx = regs.rcx;
  return p;
}

bool Timeline::matches(const Target& t, const ReplayPoint& p) const {
  if (!t.loose) return p == t.point;
  return !p.end && !t.point.end && p.branches == t.point.branches && p.pc == t.point.pc;
}

bool Timeline::passed(const Target& t, const ReplayPoint& p) const {
  if (!t.loose) return p > t.point;
  return p.end || p.branches > t.point.branches;
}

Result<StopEvent> Timeline::run(const ResumePlan& plan) {
  if (auto r = process_->resume(plan); !r) return r.error();
  // With a cancel check, the wait for news is cut every 20 ms to ask it: SIGCHLD (blocked
  // for the server's signalfd) is waited for with a timeout instead of a blocking waitid.
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  bool timed = false;
  if (cancel_) {
    sigset_t now;
    timed = ::pthread_sigmask(SIG_BLOCK, nullptr, &now) == 0 && sigismember(&now, SIGCHLD) == 1;
  }
  bool interrupted = false;
  for (int gone = 0;;) {
    if (auto ev = process_->poll_events()) return *ev;
    if (process_->wants_poll()) continue;
    if (!process_->running()) return Error{EIO, "the replay stopped without telling why"};
    siginfo_t si{};
    if (timed) {
      if (!interrupted && cancelled()) {
        process_->interrupt();  // its stop comes as any other; the caller then sees the cancel
        interrupted = true;
      }
      timespec wait{0, 20'000'000};
      (void)::sigtimedwait(&chld, nullptr, &wait);
      if (::waitid(P_PID, real_pid_, &si, WEXITED | WSTOPPED | WNOWAIT | WNOHANG | __WALL) != 0 && errno == ECHILD &&
          ++gone > 3)
        return Error{ECHILD, "the replay is gone"};
      continue;
    }
    // Sleep until the replay has news, without taking it (poll_events reaps it).
    if (::waitid(P_PID, real_pid_, &si, WEXITED | WSTOPPED | WNOWAIT | __WALL) != 0 && errno != EINTR &&
        ++gone > 3)
      return Error{ECHILD, "the replay is gone"};
  }
}

// Not at every stop: a busy pass stops tens of thousands of times a second.
bool Timeline::cancelled() {
  if (!cancel_ || cancel_seen_) return cancel_seen_;
  auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return false;
  next_check_ = now + std::chrono::milliseconds(20);
  cancel_seen_ = cancel_();
  return cancel_seen_;
}

Result<void> Timeline::run_to(const Target& target, const std::vector<ClientPoint>& points, std::vector<Hit>* hits) {
  Process& p = *process_;
  // What goes in: the client's points (with hits) and an int3 at the target's pc. An address
  // not mapped yet (a library's, before ld.so maps it) is tried again after each mmap.
  struct Want {
    BreakpointKind kind;
    uint64_t addr, len;
    const BreakpointProgram* program;
    bool client;
    bool in = false;
  };
  std::vector<Want> wants;
  if (hits)
    for (const auto& cp : points) wants.push_back({cp.kind, cp.addr, cp.len, cp.program ? &*cp.program : nullptr, true});
  auto client_code_point_at = [&](uint64_t pc) {
    for (const auto& w : wants)
      if (w.client && code_point(w.kind) && w.addr == pc) return true;
    return false;
  };
  // Counting through block patching, the target's count and pc go through the replay's watch:
  // the ring's budget stops the thread near the count, and only then does an int3 go in (a
  // target inside a busy loop is not met at every iteration). Otherwise an int3 of our own,
  // put in again after each mmap (the watch's int3 goes in at once, where ld.so may map over it).
  bool ours = !target.point.end && !client_code_point_at(target.point.pc);  // a client's int3 serves otherwise
  bool by_goal = ours && process_->counts_through_patches(real_pid_) &&
                 clock_->set_goal(std::pair{target.point.branches, target.point.pc});
  if (by_goal) process_->interceptor_watch_changed();
  else if (ours) wants.push_back({BreakpointKind::Software, target.point.pc, 1, nullptr, false});
  // ld.so maps a library, then maps its segments over that mapping (MAP_FIXED): an int3
  // written in between is gone without a trace. Every mmap's return puts them all in again.
  auto insert_wanted = [&](bool again) {
    for (auto& w : wants) {
      if (w.in && again) w.in = !p.remove_breakpoint(w.kind, w.addr, w.len).ok();
      if (w.in) continue;
      w.in = p.insert_breakpoint(w.kind, w.addr, w.len).ok();
      if (w.in && w.program) (void)p.set_breakpoint_program(w.kind, w.addr, *w.program);
    }
  };
  if (!wants.empty()) p.set_catch_syscalls(true, {SYS_mmap});
  clock_->set_watched(watched_ranges(hits ? points : std::vector<ClientPoint>{}));
  insert_wanted(false);
  auto clean = [&] {
    for (const auto& w : wants)
      if (w.in) (void)p.remove_breakpoint(w.kind, w.addr, w.len);
    p.set_catch_syscalls(false, {});
    clock_->set_watched({});
    if (by_goal) {
      (void)clock_->set_goal(std::nullopt);
      process_->interceptor_watch_changed();
    }
    (void)p.take_console_output();  // breakpoint commands' output belongs to no stop the client sees
  };
  // A replay started from a checkpoint stands at a client's breakpoint: backwards, that is a hit.
  if (hits && !target.loose) {
    ReplayPoint h = here();
    if (h < target.point && !h.end && client_code_point_at(h.pc)) {
      StopEvent ev = process_->last_stop();
      ev.kind = StopKind::Breakpoint;
      ev.signo = SIGTRAP;
      hits->push_back({ev, h, clock_->last_branch()});
    }
  }
  int deliver = 0;
  for (;;) {
    ReplayPoint h = here();
    if (matches(target, h)) break;
    if (cancelled()) {
      clean();
      return Error{ECANCELED, "interrupted"};
    }
    if (passed(target, h)) {
      clean();
      return Error{EIO, fmt::format("the replay passed {} (it is at {})", target.point.describe(), h.describe())};
    }
    // Off one of our int3s by a step of its own: a step-over inside a continue would run on
    // over an int3 it lands on (a breakpoint right after another, the target after a client's).
    bool on_int3 = std::any_of(wants.begin(), wants.end(),
                               [&](const Want& w) { return w.in && code_point(w.kind) && w.addr == h.pc; });
    // At the goal's count and pc but not the place (a `rep` instruction halfway, an event
    // between): steps from there, as from an int3 (a continue would run the whole `rep`).
    on_int3 = on_int3 || (by_goal && h.pc == target.point.pc && h.branches == target.point.branches);
    ResumePlan plan;
    if (on_int3) plan.threads[real_pid_] = ResumeAction{ResumeKind::Step, deliver, 0, 0};
    else plan.others = ResumeAction{ResumeKind::Continue, deliver, 0, 0};
    deliver = 0;
    auto ev = run(plan);
    if (!ev) {
      clean();
      return ev.error();
    }
    if (ev->kind == StopKind::Exited || ev->kind == StopKind::Killed) {
      clean();
      return Error{EIO, fmt::format("the replay ended before {}", target.point.describe())};
    }
    if (clock_->diverged()) {
      clean();
      return Error{EIO, "the replay diverged from its recording: " + p.take_console_output()};
    }
    ReplayPoint at = here();
    bool before = at < target.point || (ev->kind == StopKind::Watchpoint && at == target.point);
    switch (ev->kind) {
      case StopKind::Step:  // off an int3 onto another: that one is hit as a continue would hit it
        if (hits && before && !target.loose && client_code_point_at(at.pc)) {
          StopEvent hit = *ev;
          hit.kind = StopKind::Breakpoint;
          hits->push_back({hit, at, clock_->last_branch()});
        }
        break;
      case StopKind::Breakpoint:
      case StopKind::HwBreakpoint:
        if (hits && before && !target.loose && client_code_point_at(at.pc)) hits->push_back({*ev, at, clock_->last_branch()});
        break;
      case StopKind::Watchpoint:
        if (hits && before) hits->push_back({*ev, at, clock_->last_branch()});
        break;
      case StopKind::SyscallReturn:
        insert_wanted(true);
        break;
      case StopKind::Signal:
        if (at.end) break;  // held at the recorded exit: the top of the loop decides
        deliver = ev->signo == SIGTRAP ? 0 : ev->signo;
        if (hits && before) hits->push_back({*ev, at, clock_->last_branch()});
        break;
      default:
        break;
    }
  }
  clean();
  return {};
}

bool Timeline::leads_to(const ReplayPoint& h, const ReplayPoint& x, BranchCounter::Last last) {
  if (h.end || x.end) return false;
  if (x.branches == h.branches + 1)
    return x.events == h.events && last.from == h.pc && last.to == x.pc;
  if (x.branches != h.branches || (x.events != h.events && x.events != h.events + 1)) return false;
  uint8_t code[16] = {};
  auto n = process_->read_memory(h.pc, code);
  if (!n || *n < 2) return false;
  std::span<const uint8_t> insn(code, *n);
  for (uint8_t b : insn.first(4))
    if (b == 0xf2 || b == 0xf3) return false;  // a rep prefix: maybe another iteration at the same pc
  // Events (the replay gives their results): syscall, rdtsc, cpuid, rdrand...
  bool event = insn[0] == 0x0f && (insn[1] == 0x05 || insn[1] == 0x31);
  auto nondeterministic = nondeterministic_insn(insn);
  uint64_t len = 0;
  if (event) {
    len = 2;
  } else if (nondeterministic) {
    event = true;
    len = nondeterministic->len;
  } else if (auto l = common_insn_length(insn)) {
    len = l->len;
  } else if (auto br = simple_branch(insn); br && br->kind == X86Branch::Kind::CondJump) {
    len = br->len;  // not taken (the count is the same)
  }
  return len && h.pc + len == x.pc && event == (x.events == h.events + 1);
}

Result<Timeline::Before> Timeline::step_until(const ReplayPoint& x, BranchCounter::Last last) {
  Before before;
  int deliver = 0;
  for (size_t n = 0;; ++n) {
    ReplayPoint h = here();
    if (h == x) return before;
    if (h > x) return Error{EIO, fmt::format("stepping passed {} (at {})", x.describe(), h.describe())};
    if (n > kMaxSteps) return Error{EIO, fmt::format("more than {} steps before {}", kMaxSteps, x.describe())};
    if (cancelled()) return Error{ECANCELED, "interrupted"};
    before.place = h;
    if (deliver == 0 && leads_to(h, x, last)) {
      before.here = true;
      return before;
    }
    ResumePlan plan;
    plan.threads[real_pid_] = ResumeAction{ResumeKind::Step, deliver, 0, 0};
    deliver = 0;
    auto ev = run(plan);
    if (!ev) return ev.error();
    if (ev->kind == StopKind::Exited || ev->kind == StopKind::Killed)
      return Error{EIO, fmt::format("the replay ended before {}", x.describe())};
    if (clock_->diverged()) return Error{EIO, "the replay diverged from its recording: " + process_->take_console_output()};
    if (ev->kind == StopKind::Signal && ev->signo != SIGTRAP) deliver = ev->signo;
  }
}

Result<Timeline::Before> Timeline::place_before(const ReplayPoint& x, BranchCounter::Last last) {
  if (auto r = restart(checkpoint_before(x, false)); !r) return r.error();
  // From the stretch before x's or an earlier one, run to the branch that began x's stretch;
  // from x's own stretch (or the one before), step.
  if (here().branches + 1 < x.branches) {
    if (!last.from) return Error{EIO, "the branch before this place is not known"};
    ReplayPoint branch;
    branch.branches = x.branches - 1;
    branch.pc = last.from;
    if (auto r = run_to({branch, true}, {}, nullptr); !r) return r.error();
  }
  return step_until(x, last);
}

}  // namespace backend::replay
