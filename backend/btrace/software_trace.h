// The software branch source: no hardware, one internal stop per "interesting" branch.
//
// The process engine runs a traced thread like this (the ptrace loop lives in the engine):
//   1. addr = controller.stop_address_for(pc)   // first non-direct branch on the path
//   2. put an internal breakpoint at addr, continue the thread
//   3. on the stop at addr: controller.commit(addr, thread) records the direct jmp/call edges
//      passed on the way (their targets are fixed, so no stop was needed for them);
//      then emulate (or single-step) the branch at addr and thread.on_flow(insn, outcome)
//   4. on any other stop (signal, user breakpoint): controller.commit(stop_pc, thread) records
//      what is provably behind stop_pc and forgets the rest of the plan.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/btrace/branch_ring.h"
#include "backend/decoder.h"
#include "backend/error.h"
#include "backend/flow_emulator.h"

namespace backend {

// Per-thread history of the software source.
class SoftwareTraceThread {
 public:
  explicit SoftwareTraceThread(uint64_t size_bytes) : ring_(size_bytes) {}
  // Records insn.addr -> outcome.next_pc when the branch was taken.
  void on_flow(const FlowInsn& insn, const FlowOutcome& outcome) {
    if (outcome.taken) ring_.push(insn.addr, outcome.next_pc);
  }
  void record(uint64_t from, uint64_t to) { ring_.push(from, to); }
  BranchRing& ring() { return ring_; }
  const BranchRing& ring() const { return ring_; }

 private:
  BranchRing ring_;
};

// Plans where one thread must stop next. One per traced thread (it holds that thread's plan);
// the BlockCache is shared by all threads of the process.
class TraceController {
 public:
  // A chain of direct jumps/calls longer than this ends with a stop on the next one.
  static constexpr size_t kMaxDirectChain = 64;

  explicit TraceController(BlockCache& cache) : cache_(cache) {}
  // Follows the blocks from pc through direct Jump/Call instructions and returns the address
  // of the first other control-flow instruction (CondJump, Return, Indirect*, Loop, Syscall,
  // Trap). A direct branch whose target cannot be decoded, or that closes a cycle (`jmp .`),
  // is itself the stop. Replaces any previous plan.
  Result<uint64_t> stop_address_for(uint64_t pc);
  // The control-flow instruction at the planned stop (valid after stop_address_for succeeded).
  const FlowInsn& stop_insn() const { return stop_insn_; }
  // Direct branches the planned path passes, in execution order.
  const std::vector<Branch>& pending() const { return pending_; }
  // The thread stopped at stop_pc. Records the pending branches that lie before stop_pc on the
  // planned path and clears the plan. Returns false (recording nothing) if stop_pc is not on
  // the path. If the path visits stop_pc more than once, the latest visit is assumed.
  // stop_insn() stays valid until the next plan.
  bool commit(uint64_t stop_pc, SoftwareTraceThread& thread);
  void reset();

 private:
  struct Segment { uint64_t begin, last; };  // instruction addresses, both inclusive
  BlockCache& cache_;
  std::vector<Branch> pending_;
  std::vector<Segment> path_;  // path_[i] is entered through pending_[i-1]
  FlowInsn stop_insn_;
};

}  // namespace backend
