// Pieces of the software branch engine that need no ptrace: planning a traced thread's path to
// its next stop, deciding which planned branches a stop has passed, finding the instruction
// before a pc, and converting between ptrace's user_regs_struct and a RegisterFile for
// emulate_flow(). LinuxProcess drives them from its stop dispatcher.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "backend/btrace/branch.h"
#include "backend/x86/block_cache.h"
#include "backend/error.h"
#include "backend/x86/flow_emulator.h"
#include "backend/ptrace/registers.h"

namespace backend {

// The static path of one thread from a pc through direct jmp/call instructions (their targets
// are known, so no stop is needed for them) to the first control-flow instruction whose outcome
// needs a stop.
class PathPlan {
 public:
  static constexpr size_t kMaxDirectChain = 64;

  // Plans from pc; on success stop_insn() is the instruction to arm. A direct branch whose
  // target `stop_before` accepts is not followed: the plan stops on it (patched code, which
  // records its own branches, is entered only from a stop).
  Result<void> plan(BlockCache& cache, uint64_t pc, const std::function<bool(uint64_t)>& stop_before = {});
  bool active() const { return active_; }
  const FlowInsn& stop_insn() const { return stop_insn_; }
  uint64_t stop_addr() const { return stop_insn_.addr; }

  // A branch to the very next instruction is left out: in the trace it is straight-line code.
  // The thread stopped at stop_pc on this path (the latest visit if it passes stop_pc more
  // than once): the direct branches it has certainly taken, in order. `block_start` gets the
  // start of the block holding stop_pc (unchanged if stop_pc is not on the path). The plan is
  // cleared.
  std::vector<Branch> commit(uint64_t stop_pc, uint64_t& block_start);
  void clear();

 private:
  struct Segment { uint64_t begin, last; };  // instruction addresses, inclusive
  bool active_ = false;
  std::vector<Branch> pending_;   // pending_[i] leads from segments_[i] into segments_[i+1]
  std::vector<bool> to_next_;     // pending_[i] goes to the next instruction: not a branch in the trace
  std::vector<Segment> segments_;
  FlowInsn stop_insn_;
};

// The address of the instruction executed right before `pc`, if pc lies in the straight-line
// block starting at block_start (decodes forward from block_start). nullopt if unknown.
std::optional<uint64_t> insn_before(BlockCache& cache, uint64_t block_start, uint64_t pc);

// General registers <-> a RegisterFile in `layout` (only what emulate_flow reads or writes:
// the 16 GPRs, rip, eflags, fs_base, gs_base).
void gprs_to_file(const user_regs_struct& gp, const RegisterLayout& layout, RegisterFile& out);
void file_to_gprs(const RegisterFile& file, const RegisterLayout& layout, user_regs_struct& gp);

// Does the process have a handler installed for sig (SigCgt in /proc/PID/status)?
bool signal_is_caught(pid_t pid, int sig);

// Emulatable = emulate_flow() can execute it (every near branch; not syscalls or traps).
inline bool flow_is_emulatable(FlowKind kind) { return kind != FlowKind::Syscall && kind != FlowKind::Trap; }

}  // namespace backend
