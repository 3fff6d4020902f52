// The taken-branch count of each recorded or replayed thread: the "ticks" that place an event
// (docs/record-replay.md). A counting coverage sink of the process's branch tracer: the thread
// runs through block patching (its ring drained at every stop, counted at once) where it can,
// else the software engine runs it block by block; both see every taken branch, exactly, on
// any x86-64 machine. No history is kept. Equal execution gives equal counts, whichever
// counted.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>

#include "backend/btrace/branch_tracer.h"

namespace backend::replay {

class BranchCounter final : public BranchSink {
 public:
  struct Last {
    uint64_t from = 0, to = 0;  // the thread's newest taken branch (0, 0: none yet)
  };
  void thread_started(pid_t tid, uint64_t /*pc*/) override { counts_.try_emplace(tid); }
  void branch(pid_t tid, uint64_t from, uint64_t to) override {
    Count& c = counts_[tid];
    ++c.n;
    c.last = {from, to};
  }
  void thread_ended(pid_t /*tid*/, uint64_t /*pc*/) override {}
  bool counts_only() const override { return true; }
  void counted(pid_t tid, uint64_t n, Branch last) override {
    Count& c = counts_[tid];
    c.n += n;
    c.last = {last.from, last.to};
  }
  uint64_t count(pid_t tid) const {
    auto it = counts_.find(tid);
    return it == counts_.end() ? 0 : it->second.n;
  }
  // The thread goes on in a copy of the process (a checkpoint's fork): same count, new tid.
  void rename(pid_t from, pid_t to) {
    auto node = counts_.extract(from);
    if (node.empty()) return;
    node.key() = to;
    counts_.insert(std::move(node));
  }
  // Reverse execution finds the instruction before a place from here (replay_process.cc).
  Last last(pid_t tid) const {
    auto it = counts_.find(tid);
    return it == counts_.end() ? Last{} : it->second.last;
  }

 private:
  struct Count {
    uint64_t n = 0;
    Last last;
  };
  std::map<pid_t, Count> counts_;
};

// Counts tid's branches from here on, through block patching where the tracer's source allows.
// call_buffer_room: the rings keep the system-call buffer's room (a replay of a recording that
// had it: the same mappings).
inline Result<void> start_counting(BranchTracer& tracer, BranchCounter& counter, pid_t tid, bool call_buffer_room = false) {
  tracer.set_coverage_patching(true);
  tracer.set_syscall_buffer_room(call_buffer_room);
  return tracer.start_coverage(&counter, {tid});
}

}  // namespace backend::replay
