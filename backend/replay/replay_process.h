// `branchstub replay`'s process: the replayed program as the client sees it, able to run
// backwards. Forward it is the replay (replayer.h), a LinuxProcess whose system calls come from
// the trace. Backwards it is rr's way (docs/record-replay.md): the program cannot run back, so
// a new replay runs forward from the start to the place wanted and takes over. Each place is a
// ReplayPoint (branch count, events, pc, rcx), exact because record and replay count every taken
// branch. The client keeps one process and one thread whatever replay runs underneath: ids are
// the recorded pid's (what the program's getpid() answers), the real ones never leave here.
#pragma once

#include <memory>
#include <string>

#include "backend/error.h"
#include "backend/process.h"

namespace backend::replay {

// Starts DIR's recorded program, stopped at its first instruction, ready for a client.
// `base` gives the server's stdio settings. Errors: no finished trace, a changed program or
// mapped file.
Result<std::unique_ptr<Process>> launch_replay(const std::string& dir, const LaunchOptions& base);

}  // namespace backend::replay
