#include "backend/features.h"

namespace backend {

Features supported_features(const ProbeReport& probe) {
  Features f;
  f.branch_trace = true;       // the software source needs nothing but ptrace
  f.intel_pt = probe.pt_works;  // the intel_pt PMU is there and a user-mode event opens
  f.catch_syscalls = true;     // PTRACE_SYSCALL with PTRACE_O_TRACESYSGOOD
  f.fork_events = true;
  f.exec_events = true;
  f.no_resumed = true;
  f.non_stop = true;           // per-thread stops and resumes (linux_process_non_stop.cc)
  f.thread_events = true;      // thread creation / exit stops (QThreadEvents)
  f.thread_options = true;     // per-thread clone and exit events (QThreadOptions)
  f.stepbranch = true;         // software everywhere, PTRACE_SINGLEBLOCK where BTF works
  f.breakpoint_conditions = true;  // backend/points/breakpoint_conditions.h, agent_expr.h
  f.breakpoint_commands = true;
  f.tracepoints = true;        // int3 sites collected by the server (backend/trace/)
  return f;
}

}  // namespace backend
