#include "backend/replay/timeline.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <cerrno>

#include <fmt/format.h>

#include "backend/linux/linux_process.h"

namespace backend::replay {

namespace {

// A `rep movs` of this many iterations, stepped one by one, is the longest stretch between two
// branches we step through; beyond it reverse execution gives up rather than hang.
constexpr size_t kMaxSteps = 4'000'000;

bool code_point(BreakpointKind k) { return k == BreakpointKind::Software || k == BreakpointKind::Hardware; }

}  // namespace

Result<void> Timeline::restart() {
  process_.reset();  // a launched replay is killed with its process
  clock_ = nullptr;
  auto started = start_replay(trace_, base_);
  if (!started) return started.error();
  base_.say_redirected = false;  // said by the first replay
  clock_ = started->clock;
  real_pid_ = started->process->pid();
  process_ = std::move(started->process);
  clock_->hold_at_end(true);
  if (setup_) setup_(*process_);
  start_ = here();
  return {};
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
  for (int gone = 0;;) {
    if (auto ev = process_->poll_events()) return *ev;
    if (process_->wants_poll()) continue;
    if (!process_->running()) return Error{EIO, "the replay stopped without telling why"};
    // Sleep until the replay has news, without taking it (poll_events reaps it).
    siginfo_t si{};
    if (::waitid(P_PID, real_pid_, &si, WEXITED | WSTOPPED | WNOWAIT | __WALL) != 0 && errno != EINTR &&
        ++gone > 3)
      return Error{ECHILD, "the replay is gone"};
  }
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
  if (!target.point.end && !client_code_point_at(target.point.pc))
    wants.push_back({BreakpointKind::Software, target.point.pc, 1, nullptr, false});
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
  insert_wanted(false);
  auto clean = [&] {
    for (const auto& w : wants)
      if (w.in) (void)p.remove_breakpoint(w.kind, w.addr, w.len);
    p.set_catch_syscalls(false, {});
    (void)p.take_console_output();  // breakpoint commands' output belongs to no stop the client sees
  };
  int deliver = 0;
  for (;;) {
    ReplayPoint h = here();
    if (matches(target, h)) break;
    if (passed(target, h)) {
      clean();
      return Error{EIO, fmt::format("the replay passed {} (it is at {})", target.point.describe(), h.describe())};
    }
    ResumePlan plan;
    plan.others = ResumeAction{ResumeKind::Continue, deliver, 0, 0};
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

Result<std::optional<ReplayPoint>> Timeline::step_until(const ReplayPoint& x) {
  std::optional<ReplayPoint> prev;
  int deliver = 0;
  for (size_t n = 0;; ++n) {
    ReplayPoint h = here();
    if (h == x) return prev;
    if (h > x) return Error{EIO, fmt::format("stepping passed {} (at {})", x.describe(), h.describe())};
    if (n > kMaxSteps) return Error{EIO, fmt::format("more than {} steps before {}", kMaxSteps, x.describe())};
    prev = h;
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

Result<std::optional<ReplayPoint>> Timeline::place_before(const ReplayPoint& x, BranchCounter::Last last) {
  if (auto r = restart(); !r) return r.error();
  if (x.branches > 0) {
    if (!last.from) return Error{EIO, "the branch before this place is not known"};
    ReplayPoint branch;
    branch.branches = x.branches - 1;
    branch.pc = last.from;
    if (auto r = run_to({branch, true}, {}, nullptr); !r) return r.error();
  }
  return step_until(x);
}

}  // namespace backend::replay
