// A thread's place in its history. Kept in LinuxThread, moved on by whoever records the thread's
// branches: the software engine and the patch source's drain (which knows nothing of linux/).
#pragma once

#include <cstdint>

namespace backend {

// Where a traced (or branch-stepping) thread's history stands: the straight-line block it is
// in and the last control-flow instruction it executed. Needed to find the instruction before
// a signal and the branch a single step took.
struct BranchCursor {
  uint64_t block_start = 0;  // start of the straight-line block holding pc (0 = unknown)
  uint64_t last_flow = 0;    // address of the last control-flow instruction executed
  bool last_flow_taken = true;
  uint64_t step_from = 0;          // a single step of a traced thread: pc before it
  bool step_into_handler = false;  // that step delivers a caught signal
  uint64_t signal_from = 0;        // and this was the instruction before the signal
};

}  // namespace backend
