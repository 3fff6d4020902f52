// Executes one control-flow instruction on a thread's register file instead of running it, so
// a breakpoint on it never has to be lifted. Used by the software tracer and stepbranch.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "backend/x86/block_cache.h"
#include "backend/error.h"
#include "backend/ptrace/registers.h"

namespace backend {

using MemoryReader = std::function<bool(uint64_t addr, std::span<uint8_t> out)>;
using MemoryWriter = std::function<bool(uint64_t addr, std::span<const uint8_t> data)>;

struct FlowOutcome {
  uint64_t next_pc = 0;
  bool taken = false;  // a branch was taken (always true for jmp/call/ret)
};

// Updates rip (and rsp/rcx, the pushed return address) in `regs`. Fails for Syscall/Trap or an
// operand it cannot evaluate; the caller then single-steps the real instruction instead.
Result<FlowOutcome> emulate_flow(const FlowInsn& insn, RegisterFile& regs, const RegisterLayout& layout,
                                 const MemoryReader& read, const MemoryWriter& write);

}  // namespace backend
