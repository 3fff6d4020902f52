// The replays behind reverse execution (replay_process.h): one replay of the trace at a time,
// started afresh at the first instruction and run forward, synchronously, to a ReplayPoint,
// noting the client's stops on the way. Nothing here knows the client's ids.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/error.h"
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

class Timeline {
 public:
  // `setup` gives a new replay the server's settings (configure, signals) before it runs.
  Timeline(std::shared_ptr<const TraceReader> trace, LaunchOptions base, std::function<void(Process&)> setup)
      : trace_(std::move(trace)), base_(std::move(base)), setup_(std::move(setup)) {}

  // Replaces the replay (if any; it is killed) by a new one at the first instruction.
  Result<void> restart();
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
  // Single-steps from here to `x`: the last place before x, or nullopt when here is x.
  Result<std::optional<ReplayPoint>> step_until(const ReplayPoint& x);
  // The place before x: a new replay runs to the branch that began x's stretch, then steps.
  // nullopt: x is the first instruction.
  Result<std::optional<ReplayPoint>> place_before(const ReplayPoint& x, BranchCounter::Last last);

  // One resume of the replay and its next stop, waited for here.
  Result<StopEvent> run(const ResumePlan& plan);

 private:
  bool matches(const Target& t, const ReplayPoint& p) const;
  bool passed(const Target& t, const ReplayPoint& p) const;

  std::shared_ptr<const TraceReader> trace_;
  LaunchOptions base_;
  std::function<void(Process&)> setup_;
  std::unique_ptr<Process> process_;
  ReplayClock* clock_ = nullptr;
  pid_t real_pid_ = 0;
  ReplayPoint start_;
};

}  // namespace backend::replay
