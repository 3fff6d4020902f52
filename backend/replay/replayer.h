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

namespace backend::replay {

// Starts DIR's program stopped at its first instruction, ready for a client. `base` gives the
// server's stdio settings; everything else (arguments, environment, working directory) is the
// recording's. Errors: no finished trace, a changed program or mapped file.
Result<std::unique_ptr<Process>> launch_replay(const std::string& dir, const LaunchOptions& base);

}  // namespace backend::replay
