// The taken-branch count of each recorded or replayed thread: the "ticks" that place an event
// (docs/record-replay.md). A coverage sink of the process's branch tracer (the software
// engine runs the thread block by block and reports every taken branch, exactly, on any x86-64
// machine): only counted, no history kept. record and replay count the same way, so equal
// execution gives equal counts.
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

}  // namespace backend::replay
