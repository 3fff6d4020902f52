// The replays behind reverse execution (replay_process.h): one replay of the trace at a time,
// started afresh at the first instruction or from a checkpoint (a stopped fork of an earlier
// replay, kept where the client stopped), and run forward, synchronously, to a ReplayPoint,
// noting the client's stops on the way. Nothing here knows the client's ids.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/error.h"
#include "backend/linux/linux_process.h"
#include "backend/points/breakpoint_conditions.h"
#include "backend/process.h"
#include "backend/replay/replay_point.h"
#include "backend/replay/replayer.h"

namespace backend::replay {

// A breakpoint or watchpoint of the client's, as it was inserted (and put into each new replay).
struct ClientPoint {
  BreakpointKind kind = BreakpointKind::Software;
  uint64_t addr = 0, len = 0;
  std::optional<BreakpointProgram> program;
};

// The client's write and access watchpoints, as the replay checks recorded syscall results
// against them (ReplayClock::set_watched).
std::vector<std::pair<uint64_t, uint64_t>> watched_ranges(const std::vector<ClientPoint>& points);

class Timeline {
 public:
  // `setup` gives a new replay the server's settings (configure, signals) before it runs.
  Timeline(std::shared_ptr<const TraceReader> trace, LaunchOptions base, std::function<void(Process&)> setup);
  ~Timeline();

  // A stopped copy of a replay at `at`, never run itself: each restart from it forks it again.
  struct Checkpoint {
    std::unique_ptr<LinuxProcess> frozen;
    ReplayPoint at;
    std::shared_ptr<const ReplayState> state;
  };
  // Replaces the replay (if any; it is killed) by a new one at the first instruction, or at
  // the checkpoint.
  Result<void> restart(const Checkpoint* from = nullptr);
  // The latest checkpoint before x (at it too, with or_at); null: none, start from the first
  // instruction.
  const Checkpoint* checkpoint_before(const ReplayPoint& x, bool or_at) const;
  // Keeps a copy of the replay where it stands (not at the recorded end; once per place).
  void take_checkpoint();
  size_t checkpoint_count() const { return checkpoints_.size(); }
  std::vector<ReplayPoint> checkpoint_places() const {
    std::vector<ReplayPoint> out;
    for (const auto& c : checkpoints_) out.push_back(c.at);
    return out;
  }
  Process& process() { return *process_; }
  bool started() const { return process_ != nullptr; }
  pid_t real_pid() const { return real_pid_; }
  ReplayClock& clock() { return *clock_; }
  const TraceHeader& header() const { return trace_->header(); }

  ReplayPoint here();
  const ReplayPoint& start() const { return start_; }

  struct Hit {
    StopEvent event;          // the replay's own stop (real ids)
    ReplayPoint at;
    BranchCounter::Last last;  // the branch before it (to find the instruction before `at`)
  };
  // loose: any place with the point's branch count and pc (the first such one).
  struct Target {
    ReplayPoint point;
    bool loose = false;
  };
  // Runs forward to the target. With `hits`, `points` are inserted and every stop they cause
  // before the target (and signal stops) is noted there. Error: the replay passed the target,
  // ended or diverged before it (the message says which).
  Result<void> run_to(const Target& target, const std::vector<ClientPoint>& points, std::vector<Hit>* hits);
  // The place before x; `here`: the replay stands there (it stopped one step short of x),
  // otherwise it stands at x.
  struct Before {
    std::optional<ReplayPoint> place;  // nullopt: x is the first instruction
    bool here = false;
  };
  // Single-steps from here towards x (`last`: the branch that began x's stretch).
  Result<Before> step_until(const ReplayPoint& x, BranchCounter::Last last);
  // A new replay runs to the branch that began x's stretch, then steps towards x.
  Result<Before> place_before(const ReplayPoint& x, BranchCounter::Last last);

  // One resume of the replay and its next stop, waited for here.
  Result<StopEvent> run(const ResumePlan& plan);

  // Asked every few milliseconds by run_to and step_until (empty: never); true ends them where
  // the replay stands with an ECANCELED error (the client interrupted or is gone).
  void set_cancel(CancelCheck check) {
    cancel_ = std::move(check);
    cancel_seen_ = false;
  }

 private:
  bool matches(const Target& t, const ReplayPoint& p) const;
  bool passed(const Target& t, const ReplayPoint& p) const;
  // Whether one step from h certainly lands on x (decoded: a plain instruction, a branch not
  // taken, a syscall or rdtsc, or x's stretch's branch itself).
  bool leads_to(const ReplayPoint& h, const ReplayPoint& x, BranchCounter::Last last);
  bool cancelled();

  std::shared_ptr<const TraceReader> trace_;
  LaunchOptions base_;
  std::function<void(Process&)> setup_;
  std::unique_ptr<LinuxProcess> process_;
  std::vector<Checkpoint> checkpoints_;  // ordered by place
  ReplayClock* clock_ = nullptr;
  pid_t real_pid_ = 0;
  ReplayPoint start_;
  CancelCheck cancel_;
  bool cancel_seen_ = false;  // sticky: every loop it is asked in ends
  std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace backend::replay
