// `branchstub replay`: the recorded program runs again as an ordinary inferior (a LinuxProcess)
// whose system calls are checked against the trace and, but for the few that must run
// (mmap, brk, sigaction...), not executed: their recorded results and memory are put in place.
// The first difference (another syscall, other arguments, another result of one that ran) is a
// divergence: the thread stops with SIGTRAP and the client's console says where and what.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "backend/error.h"
#include "backend/process.h"
#include "backend/replay/branch_counter.h"
#include "backend/replay/trace_format.h"

namespace backend {
class LinuxProcess;
}

namespace backend::replay {

// What a replay knows at a place (cursor, branch count, divergence), kept with a checkpoint
// (a stopped copy of the program) to go on from it later.
class ReplayState {
 public:
  virtual ~ReplayState() = default;
};

// How far a replay has come, for reverse execution (replay_process.h): read at a stop.
class ReplayClock {
 public:
  virtual ~ReplayClock() = default;
  virtual uint64_t branches() const = 0;            // the thread's taken branches so far
  virtual uint64_t events() const = 0;              // trace events consumed so far
  virtual BranchCounter::Last last_branch() const = 0;
  virtual bool diverged() const = 0;
  // Stop at the program's recorded exit (its exit_group's entry, the syscall not run) rather
  // than let it end, once: a client can then run backwards from there.
  virtual void hold_at_end(bool on) = 0;
  virtual bool held_at_end() const = 0;
  virtual std::shared_ptr<const ReplayState> save() const = 0;
  // The client's write and access watchpoints ([start, start+len)): a recorded syscall result
  // that changes bytes there stops the program as a watchpoint would.
  virtual void set_watched(std::vector<std::pair<uint64_t, uint64_t>> ranges) = 0;
  // A diversion (the client runs code in the program: `call f()`, LLDB's expressions): the
  // program's system calls run for real, unchecked, and the trace stays where it was.
  virtual void set_diverted(bool on) = 0;
  // A place to stop at (the thread's branch count and pc) for a run to it (timeline.h): the
  // thread stops there through the watch of watch_pc() (with block patching, the ring's budget
  // brings it near first: a target in a busy loop is not stopped at every iteration). false:
  // not so (a signal is due on the way: the caller stops at the pc itself). nullopt: none.
  virtual bool set_goal(std::optional<std::pair<uint64_t, uint64_t>> goal) = 0;
};

// Checks the trace directory (finished, program and mapped files unchanged) and reads it.
Result<std::shared_ptr<const TraceReader>> open_replay(const std::string& dir);

struct ReplayStart {
  std::unique_ptr<LinuxProcess> process;
  ReplayClock* clock = nullptr;  // owned by the process (its syscall interceptor)
};
// Starts the trace's program stopped at its first instruction. `base` gives the server's stdio
// settings; everything else (arguments, environment, working directory) is the recording's.
Result<ReplayStart> start_replay(std::shared_ptr<const TraceReader> trace, const LaunchOptions& base);
// The replay goes on in `copy` (a stopped fork of a replayed program, made where `state` was
// saved: LinuxProcess::fork_stopped), as it went on from there.
Result<ReplayStart> continue_replay(pid_t copy, const ReplayState& state);

}  // namespace backend::replay
