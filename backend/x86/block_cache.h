// Control-flow decoding with capstone: a block is a run of instructions that ends at its first
// control-flow instruction. The cache maps block start -> that instruction; it is invalidated
// when memory is written (breakpoints excepted: the cache reads through the shadow bytes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

#include "backend/error.h"

namespace backend {

enum class FlowKind : uint8_t {
  Jump,          // jmp rel
  CondJump,      // jcc rel
  Call,          // call rel
  Return,        // ret / ret imm16
  IndirectJump,  // jmp r/m
  IndirectCall,  // call r/m
  Loop,          // loop/loope/loopne/jrcxz/jecxz (conditional on rcx)
  Syscall,       // syscall (rt_sigreturn may move the pc anywhere)
  Trap,          // int3/int n/ud2/hlt/iret and anything else we cannot follow
};

struct FlowInsn {
  uint64_t addr = 0;
  uint8_t len = 0;
  FlowKind kind = FlowKind::Trap;
  std::optional<uint64_t> direct_target;  // Jump/CondJump/Call/Loop
  uint8_t bytes[16] = {};                 // the original instruction bytes
};

struct Block {
  uint64_t start = 0;
  FlowInsn end;             // the control-flow instruction that ends the block
  uint32_t insn_count = 0;  // instructions in the block, the control-flow one included
  // The latest instruction start at least kTailBytes before the block's end (the block start
  // when it is shorter): a 5-byte jmp over the end displaces nothing before it, so a patch
  // planner decodes from here, not the whole block.
  uint64_t tail_start = 0;
  static constexpr uint64_t kTailBytes = 5;
};

// Reads original (unpatched) code bytes; returns how many bytes were readable.
using CodeReader = std::function<size_t(uint64_t addr, std::span<uint8_t> out)>;

class BlockCache {
 public:
  explicit BlockCache(CodeReader reader);
  ~BlockCache();
  // The block starting at pc (decoded on first use, up to a bounded number of instructions).
  Result<Block> block_at(uint64_t pc);
  // Decodes the single instruction at pc (length and flow kind, kind=nullopt if not control flow).
  Result<std::pair<uint8_t, std::optional<FlowInsn>>> insn_at(uint64_t pc);
  void invalidate(uint64_t addr, uint64_t len);
  void clear();
  // What the cache decodes from (original bytes, breakpoints hidden).
  const CodeReader& reader() const;
  // Record and replay: cpuid, rdrand, rdseed and rdpid end a block as a Trap end (its own
  // instruction, length known), so that every engine stops before running one
  // (backend/x86/nondeterministic.h). Clears the cache.
  void set_stop_at_nondeterministic(bool on);
  size_t size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace backend
