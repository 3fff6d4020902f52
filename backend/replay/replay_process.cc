#include "backend/replay/replay_process.h"

#include <signal.h>

#include <algorithm>

#include <fmt/format.h>

#include "backend/replay/mapped_tracer.h"
#include "backend/replay/timeline.h"

namespace backend::replay {

namespace {

class ReplayProcess final : public Process {
 public:
  ReplayProcess(std::shared_ptr<const TraceReader> trace, const LaunchOptions& base)
      : vpid_(trace->header().pid),
        timeline_(std::move(trace), base, [this](Process& p) { set_up(p); }),
        tracer_([this]() -> BranchTracer& { return timeline_.process().tracer(); },
                [this](pid_t tid) { return to_real(tid); }) {}

  Result<void> start() {
    if (auto r = timeline_.restart(); !r) return r;
    last_ = client_event(timeline_.process().last_stop());
    return {};
  }

  pid_t pid() const override { return vpid_; }
  pid_t os_pid() const override { return timeline_.real_pid(); }
  bool was_attached() const override { return false; }
  bool alive() const override { return inner().alive(); }
  bool exit_unreported() const override { return inner().exit_unreported(); }
  std::vector<pid_t> threads() const override {
    auto ts = inner().threads();
    for (auto& t : ts) t = to_client(t);
    return ts;
  }
  bool has_thread(pid_t tid) const override { return inner().has_thread(to_real(tid)); }
  std::string thread_name(pid_t tid) const override { return inner().thread_name(to_real(tid)); }
  int thread_core(pid_t tid) const override { return inner().thread_core(to_real(tid)); }
  StopEvent last_stop() const override { return last_; }

  Result<void> resume(const ResumePlan& plan) override {
    end_diversion(false);
    ResumePlan real = plan;
    real.threads.clear();
    for (const auto& [tid, action] : plan.threads) real.threads[to_real(tid)] = action;
    return timeline_.process().resume(real);
  }
  void interrupt() override { timeline_.process().interrupt(); }
  std::optional<StopEvent> poll_events() override;
  bool running() const override { return pending_.has_value() || inner().running(); }
  bool wants_poll() const override { return pending_.has_value() || inner().wants_poll(); }
  Result<void> step_branch(pid_t tid, uint32_t count) override { return timeline_.process().step_branch(to_real(tid), count); }
  bool can_reverse() const override { return true; }
  std::optional<ReplayPosition> replay_position() override {
    if (!timeline_.process().alive() || running()) return std::nullopt;
    return position(timeline_.here());
  }
  std::vector<ReplayPosition> replay_checkpoints() const override {
    std::vector<ReplayPosition> out;
    for (const auto& at : timeline_.checkpoint_places()) out.push_back(position(at));
    return out;
  }
  Result<void> take_checkpoint() override {
    if (!timeline_.process().alive() || running()) return Error{EBUSY, "The program is running."};
    size_t before = timeline_.checkpoint_count();
    timeline_.take_checkpoint();
    if (timeline_.checkpoint_count() == before)
      return Error{EEXIST, "No new checkpoint here (one is here already, or this is the start or the end, "
                           "or a signal is pending)."};
    return {};
  }
  Result<void> resume_reverse(pid_t tid, ReverseKind kind, const CancelCheck& cancelled) override;

  Result<void> set_non_stop(bool on) override {
    non_stop_ = on;
    return timeline_.process().set_non_stop(on);
  }
  bool non_stop() const override { return non_stop_; }
  std::vector<StopEvent> stopped_threads() const override {
    if (pending_ || inner().running()) return {};
    return {last_};
  }
  bool thread_running(pid_t tid) const override { return pending_ || inner().thread_running(to_real(tid)); }
  void set_thread_events(bool on) override {
    thread_events_ = on;
    timeline_.process().set_thread_events(on);
  }
  void set_thread_options(pid_t tid, ThreadOptions options) override {
    thread_options_ = options;
    timeline_.process().set_thread_options(to_real(tid), options);
  }
  ThreadOptions thread_options(pid_t tid) const override { return inner().thread_options(to_real(tid)); }
  void hold_attach_stops() override {}

  // A replay has no life outside the server: detached, it ends as a kill would end it.
  Result<void> detach() override { return timeline_.process().kill(); }
  Result<void> kill() override { return timeline_.process().kill(); }

  void set_pass_signals(std::set<int> signals) override {
    pass_signals_ = signals;
    timeline_.process().set_pass_signals(std::move(signals));
  }
  void set_program_signals(std::set<int> signals) override {
    program_signals_ = signals;
    timeline_.process().set_program_signals(std::move(signals));
  }
  void set_catch_syscalls(bool on, std::set<int> syscalls) override {
    catch_syscalls_ = on;
    caught_ = syscalls;
    timeline_.process().set_catch_syscalls(on, std::move(syscalls));
  }
  Result<std::vector<uint8_t>> siginfo(pid_t tid) override { return timeline_.process().siginfo(to_real(tid)); }
  Result<void> set_siginfo(pid_t tid, std::span<const uint8_t> info) override {
    return timeline_.process().set_siginfo(to_real(tid), info);
  }

  const RegisterLayout& register_layout() const override { return inner().register_layout(); }
  Result<RegisterFile> read_registers(pid_t tid, RegisterSet set) override {
    return timeline_.process().read_registers(to_real(tid), set);
  }
  Result<void> write_registers(pid_t tid, const RegisterFile& regs) override {
    begin_diversion(tid);
    return timeline_.process().write_registers(to_real(tid), regs);
  }
  Result<size_t> read_memory(uint64_t addr, std::span<uint8_t> out) override {
    return timeline_.process().read_memory(addr, out);
  }
  Result<size_t> write_memory(uint64_t addr, std::span<const uint8_t> data) override {
    begin_diversion(vpid_);
    return timeline_.process().write_memory(addr, data);
  }

  Result<void> insert_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) override {
    auto r = timeline_.process().insert_breakpoint(kind, addr, len);
    if (r) points_.push_back({kind, addr, len, std::nullopt});
    timeline_.clock().set_watched(watched_ranges(points_));
    return r;
  }
  Result<void> remove_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) override {
    auto it = std::find_if(points_.begin(), points_.end(),
                           [&](const ClientPoint& p) { return p.kind == kind && p.addr == addr && p.len == len; });
    if (it != points_.end()) points_.erase(it);
    timeline_.clock().set_watched(watched_ranges(points_));
    return timeline_.process().remove_breakpoint(kind, addr, len);
  }
  int hardware_slots() const override { return inner().hardware_slots(); }
  bool has_client_breakpoint(BreakpointKind kind, uint64_t addr) const override {
    return inner().has_client_breakpoint(kind, addr);
  }
  Result<void> set_breakpoint_program(BreakpointKind kind, uint64_t addr, BreakpointProgram p) override {
    auto r = timeline_.process().set_breakpoint_program(kind, addr, p);
    if (r)
      for (auto& cp : points_)
        if (cp.kind == kind && cp.addr == addr) cp.program = p.empty() ? std::nullopt : std::optional(p);
    return r;
  }
  std::string take_console_output() override {
    std::string out = std::move(console_);
    console_.clear();
    return out + timeline_.process().take_console_output();
  }

  Result<std::vector<uint8_t>> auxv() override { return timeline_.process().auxv(); }
  Result<std::string> exe_path() override { return timeline_.process().exe_path(); }
  Result<std::vector<MemoryRegion>> memory_map() override { return timeline_.process().memory_map(); }
  Result<std::vector<LibraryInfo>> libraries(uint64_t* main_lm) override { return timeline_.process().libraries(main_lm); }

  void set_fork_reporting(bool fork, bool vfork) override {
    fork_ = fork;
    vfork_ = vfork;
    timeline_.process().set_fork_reporting(fork, vfork);
  }
  std::vector<std::unique_ptr<Process>> take_fork_children() override { return {}; }  // the replay makes no child
  void pause() override { timeline_.process().pause(); }

  BranchTracer& tracer() override { return tracer_; }
  void recording_stopped(pid_t tid) override { timeline_.process().recording_stopped(to_real(tid)); }

  void configure(const ProcessSettings& settings) override {
    settings_ = settings;
    configured_ = true;
    timeline_.process().configure(settings);
  }
  const ProcessSettings& settings() const override { return settings_; }

 private:
  ReplayPosition position(const ReplayPoint& at) const {
    ReplayPosition pos;
    pos.event = at.events;
    pos.events = timeline_.header().event_count;
    pos.branches = at.branches;
    pos.pc = at.pc;
    pos.at_end = at.end;
    return pos;
  }
  const Process& inner() const { return const_cast<Timeline&>(timeline_).process(); }
  pid_t to_real(pid_t tid) const { return tid == vpid_ ? timeline_.real_pid() : tid; }
  pid_t to_client(pid_t tid) const { return tid == timeline_.real_pid() ? vpid_ : tid; }
  StopEvent client_event(StopEvent ev) const {
    ev.pid = to_client(ev.pid);
    ev.tid = to_client(ev.tid);
    if (ev.child_pid) ev.child_pid = to_client(ev.child_pid);
    return ev;
  }
  StopEvent event(StopKind kind, int signo = SIGTRAP) const {
    StopEvent ev;
    ev.kind = kind;
    ev.pid = ev.tid = vpid_;
    ev.signo = signo;
    return ev;
  }
  // What a new replay needs before it runs: the server's settings (the replays behind reverse
  // execution count as the forward one does: through block patching unless --btrace-source
  // says otherwise; a copy made from a checkpoint drops its parent's areas first, see
  // PatchTracer::unmap_inherited_areas) and signal choices.
  void set_up(Process& p) {
    if (configured_) p.configure(settings_);
    p.set_pass_signals(pass_signals_);
    p.set_program_signals(program_signals_);
  }
  // What the client set besides that, once the new replay is where the client will see it.
  void adopt_client_state() {
    Process& p = timeline_.process();
    for (const auto& cp : points_) {
      if (!p.insert_breakpoint(cp.kind, cp.addr, cp.len)) continue;
      if (cp.program) (void)p.set_breakpoint_program(cp.kind, cp.addr, *cp.program);
    }
    if (non_stop_) (void)p.set_non_stop(true);
    if (thread_events_) p.set_thread_events(true);
    if (thread_options_ != ThreadOptions{}) p.set_thread_options(timeline_.real_pid(), thread_options_);
    if (catch_syscalls_) p.set_catch_syscalls(true, caught_);
    p.set_fork_reporting(fork_, vfork_);
    timeline_.clock().set_watched(watched_ranges(points_));
    tracer_.reapply();
  }
  // The client changes registers or memory (an inferior call, `set var`): from here the
  // program is not its recording. A checkpoint keeps the place, with the registers as they were.
  void begin_diversion(pid_t tid) {
    if (diversion_ || !timeline_.process().alive() || running()) return;
    Diversion d;
    d.at = timeline_.here();
    auto regs = timeline_.process().read_registers(to_real(tid), RegisterSet::General);
    if (!regs) return;
    d.regs = std::move(*regs);
    if (!d.at.end && !(d.at == timeline_.start())) timeline_.take_checkpoint();
    diversion_ = std::move(d);
    timeline_.clock().set_diverted(true);
  }
  // At a resume: registers back as they were (GDB after its call) or a reverse run: the
  // replay goes back to the place the diversion began, memory and all. Otherwise the
  // program runs on freely (its syscalls real) until a reverse run or `run`.
  void end_diversion(bool reverse) {
    if (!diversion_ || !timeline_.process().alive()) return;
    if (!reverse) {
      auto now = timeline_.process().read_registers(timeline_.real_pid(), RegisterSet::General);
      if (!now) return;
      const auto& layout = timeline_.process().register_layout();
      for (int r = 0; r <= RegisterLayout::kRip; ++r)
        if (now->get_u64(layout, r) != diversion_->regs.get_u64(layout, r)) return;  // still away
    }
    ReplayPoint at = diversion_->at;
    diversion_.reset();
    auto back = at.end ? Result<void>(Error{EINVAL, "a diversion at the recorded end"})
                : at == timeline_.start() ? timeline_.restart() : go_to(at);
    if (!back) {
      console_ += "branchstub replay: cannot return to the recording: " + back.error().message + "\n";
      return;
    }
    adopt_client_state();
  }
  Result<StopEvent> reverse_step(const ReplayPoint& from, BranchCounter::Last last);
  Result<StopEvent> reverse_continue(const ReplayPoint& from, BranchCounter::Last last);
  // A new replay at `to` (a place the last pass saw), from the nearest checkpoint.
  Result<void> go_to(const ReplayPoint& to) {
    if (auto r = timeline_.restart(timeline_.checkpoint_before(to, true)); !r) return r;
    return timeline_.run_to({to, false}, {}, nullptr);
  }
  // Where the client stops, a checkpoint: going back from near here starts there. Not more
  // often than every few thousand branches (stepping stops at every line).
  void maybe_checkpoint(const StopEvent& ev) {
    constexpr uint64_t kSpacing = 4096;
    switch (ev.kind) {
      case StopKind::Breakpoint: case StopKind::HwBreakpoint: case StopKind::Watchpoint:
      case StopKind::Step: case StopKind::StepBranch:
        break;
      default:
        return;
    }
    ReplayPoint at = timeline_.here();
    const auto* before = timeline_.checkpoint_before(at, true);
    if (before && at.branches < before->at.branches + kSpacing) return;
    timeline_.take_checkpoint();
  }

  pid_t vpid_;
  Timeline timeline_;
  MappedTracer tracer_;
  ProcessSettings settings_;
  bool configured_ = false;
  std::vector<ClientPoint> points_;
  std::set<int> pass_signals_, program_signals_, caught_;
  bool catch_syscalls_ = false, non_stop_ = false, thread_events_ = false, fork_ = false, vfork_ = false;
  ThreadOptions thread_options_;
  StopEvent last_;
  std::optional<StopEvent> pending_;  // the stop a reverse run ended with, not yet polled
  bool end_told_ = false;             // the recorded end was reported (HistoryEnd) already
  std::string console_;
  struct Diversion {
    ReplayPoint at;     // where the recording was left
    RegisterFile regs;  // the thread's general registers there
  };
  std::optional<Diversion> diversion_;
};

std::optional<StopEvent> ReplayProcess::poll_events() {
  if (pending_) {
    last_ = *pending_;
    pending_.reset();
    return last_;
  }
  auto ev = timeline_.process().poll_events();
  if (!ev) return std::nullopt;
  last_ = client_event(*ev);
  maybe_checkpoint(*ev);
  // The program's recorded exit, held: the end of the history, forward. Resumed from there,
  // it ends for real.
  if (ev->kind == StopKind::Signal && timeline_.clock().held_at_end() && !end_told_) {
    end_told_ = true;
    last_ = event(StopKind::HistoryEnd, 0);
  }
  return last_;
}

Result<void> ReplayProcess::resume_reverse(pid_t tid, ReverseKind kind, const CancelCheck& cancelled) {
  if (!timeline_.process().alive()) return Error{ESRCH, "The program is not being run."};
  if (timeline_.process().running() || pending_) return Error{EBUSY, "The program is running."};
  if (tid > 0 && to_real(tid) != timeline_.real_pid()) return Error{ESRCH, "No such thread."};
  end_diversion(true);  // backwards from where the recording was left
  ReplayPoint from = timeline_.here();
  BranchCounter::Last last = timeline_.clock().last_branch();
  timeline_.set_cancel(cancelled);
  auto stop = kind == ReverseKind::Step ? reverse_step(from, last) : reverse_continue(from, last);
  timeline_.set_cancel({});
  end_told_ = false;
  if (!stop && stop.error().code == ECANCELED && timeline_.started() && timeline_.process().alive()) {
    // Interrupted (or the client is gone): the program stops where the pass stands, a place
    // between the checkpoint it started from and `from`, as a forward run stops at Ctrl-C.
    pending_ = event(StopKind::Signal, SIGINT);
  } else if (!stop) {
    // Wherever the replay is now, the client is told why it stopped there.
    console_ += fmt::format("branchstub replay: cannot run backwards from {}: {}\n", from.describe(),
                            stop.error().message);
    pending_ = event(StopKind::Signal, SIGTRAP);
  } else {
    pending_ = *stop;
    maybe_checkpoint(*stop);
  }
  if (timeline_.started() && timeline_.process().alive()) adopt_client_state();
  return {};
}

Result<StopEvent> ReplayProcess::reverse_step(const ReplayPoint& from, BranchCounter::Last last) {
  if (from == timeline_.start()) return event(StopKind::HistoryBegin, 0);
  auto before = timeline_.place_before(from, last);
  if (!before) return before.error();
  if (!before->place) {  // `from` was the first instruction after all
    if (auto r = timeline_.restart(); !r) return r.error();
    return event(StopKind::HistoryBegin, 0);
  }
  if (!before->here)
    if (auto r = go_to(*before->place); !r) return r.error();
  return event(StopKind::Step);
}

// rr's way: a replay runs from the last checkpoint to here with the client's breakpoints and
// watchpoints in; the last stop they cause before here is where the program goes back to.
// None: the same from the checkpoint before, and so on back to the first instruction.
Result<StopEvent> ReplayProcess::reverse_continue(const ReplayPoint& from, BranchCounter::Last last) {
  (void)last;
  std::vector<Timeline::Hit> hits;
  for (ReplayPoint upper = from;;) {
    const auto* checkpoint = timeline_.checkpoint_before(upper, false);
    if (auto r = timeline_.restart(checkpoint); !r) return r.error();
    if (auto r = timeline_.run_to({upper, false}, points_, &hits); !r) return r.error();
    if (!hits.empty()) break;
    if (!checkpoint) {
      if (auto r = timeline_.restart(); !r) return r.error();
      return event(StopKind::HistoryBegin, 0);
    }
    upper = checkpoint->at;
  }
  const Timeline::Hit& hit = hits.back();
  StopEvent ev = client_event(hit.event);
  if (hit.event.kind != StopKind::Watchpoint) {
    if (auto r = go_to(hit.at); !r) return r.error();
    return ev;
  }
  // A data watchpoint traps after the instruction that wrote; backwards, the program stops
  // before it, with the old value in place (as GDB's own reverse execution does).
  auto before = timeline_.place_before(hit.at, hit.last);
  if (!before) return before.error();
  if (!before->place) return event(StopKind::HistoryBegin, 0);
  if (!before->here)
    if (auto r = go_to(*before->place); !r) return r.error();
  return ev;
}

}  // namespace

Result<std::unique_ptr<Process>> launch_replay(const std::string& dir, const LaunchOptions& base) {
  auto trace = open_replay(dir);
  if (!trace) return trace.error();
  auto process = std::make_unique<ReplayProcess>(std::move(*trace), base);
  if (auto r = process->start(); !r) return r.error();
  return std::unique_ptr<Process>(std::move(process));
}

}  // namespace backend::replay
