// What this backend implements and this machine supports: the facts the server turns into the
// capabilities it advertises (server/capabilities.cc). Nothing here is declared for the sake of
// a client: a feature is true only where its code exists and, for hardware, the probe saw it.
#pragma once

#include "backend/probe/probe.h"

namespace backend {

struct Features {
  bool branch_trace = false;   // record btrace (bts format): some source works (software everywhere)
  bool intel_pt = false;       // PT data (pt format): implemented and the PMU exists
  bool catch_syscalls = false; // syscall entry/return stops
  bool fork_events = false;    // fork and vfork children reported and held
  bool exec_events = false;    // exec reported with the new image
  bool no_resumed = false;     // told when every resumed thread has exited
  bool non_stop = false;       // threads stop and resume one by one
  bool thread_events = false;  // thread creation/exit reported
  bool thread_options = false; // per-thread clone and exit events
  bool stepbranch = false;     // run a thread to its next taken branch
  bool breakpoint_conditions = false;  // Z0/Z1 agent-expression conditions evaluated at each hit
  bool breakpoint_commands = false;    // Z0/Z1 agent-expression commands (dprintf-style agent)
  bool tracepoints = false;    // QTDP & co: GDB's tracepoints, collected at int3 hits (backend/trace/)
  bool reverse = false;        // bc/bs: only `branchstub replay` (backend/replay/replay_process.h)
};

Features supported_features(const ProbeReport& probe);

}  // namespace backend
