// Which memory one x86-64 instruction accesses, computed from its operands and the registers;
// used to emulate hardware watchpoints where the VM drops debug-register traps. Each address is
// decoded once with capstone into a cached recipe that is evaluated with the registers on every
// call; run_ahead() says how far straight-line code can run unchecked. The semantics, rule by
// rule, and how the tests check them against the CPU: docs/watch-emulation.md.
//
// Not thread-safe: one decoder per user (it holds the capstone handle and the cache).
#pragma once

#include <sys/user.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace backend {

struct MemAccess {
  uint64_t addr = 0;
  uint32_t size = 0;  // bytes
  bool read = false;
  bool write = false;
};

struct InsnAccesses {
  std::vector<MemAccess> accesses;  // what ONE single-step execution of the instruction touches
  bool exact = true;  // false: accesses cannot be computed (docs/watch-emulation.md): the
                      // caller compares the watched bytes after the step
  uint8_t len = 0;    // instruction length, 0 = undecodable
};

// Reads original code bytes (breakpoint shadows removed); returns how many bytes it could read.
using CodeBytesReader = std::function<size_t(uint64_t addr, std::span<uint8_t> out)>;

// The verdict of AccessDecoder::run_ahead.
struct RunAhead {
  uint64_t stop = 0;   // the first instruction that must be checked at run time (== regs.rip: none is safe)
  uint32_t insns = 0;  // how many instructions before `stop` are safe to run unchecked
  // Why the walk ended at `stop`:
  //   ControlFlow: stop may not fall through to the next instruction (jmp, jcc, call, ret, loop,
  //                syscall, int*, ud*, hlt, iret, far transfers, xbegin/xend/xabort...).
  //   Unknown:     an access of stop cannot be computed (a register it uses was written by an
  //                earlier walked instruction and not followed), or stop has exact=false, is a
  //                rep string instruction, or is unusual (segment loads, wr[fg]sbase, popf,
  //                privileged...), or an earlier walked instruction writes code at or before
  //                stop (self-modifying code: stop is then that writer).
  //   Touches:     an access of stop satisfies the caller's predicate.
  //   Limit:       max_insns instructions were walked.
  //   Undecodable: stop is unreadable or capstone cannot decode it.
  enum class Why : uint8_t { ControlFlow, Unknown, Touches, Limit, Undecodable } why = Why::Unknown;
};

// One instruction of a run_ahead walk as the walk saw it (tests and diagnostics).
struct RunAheadStep {
  uint64_t addr = 0;
  // GPRs whose value the walk knew before this instruction, bit = x86 register number
  // (rax 0, rcx 1, rdx 2, rbx 3, rsp 4, rbp 5, rsi 6, rdi 7, r8..r15 8..15); their values are
  // in `regs` (the other GPRs there are stale). rip, fs_base and gs_base are always known.
  uint16_t known = 0;
  user_regs_struct regs{};
  bool computed = false;  // `accesses` holds the accesses the walk computed for it
  std::vector<MemAccess> accesses;
};

// Counters that show the cache at work (tests, diagnostics).
struct AccessDecoderStats {
  uint64_t decodes = 0;     // calls that ran capstone
  uint64_t cache_hits = 0;  // calls answered from a cached recipe
  size_t cached = 0;        // recipes held now
};

// What CPU vendors do differently for the same instruction (Intel's SDM and AMD's APM).
struct CpuQuirks {
  // `pop fs` / `pop gs`: Intel CPUs read the 2-byte selector, AMD's the whole 8-byte slot.
  bool segment_pop_reads_slot = false;
};

class AccessDecoder {  // owns a capstone handle (CS_ARCH_X86, CS_MODE_64, detail on)
 public:
  explicit AccessDecoder(CpuQuirks quirks = {});
  ~AccessDecoder();
  AccessDecoder(const AccessDecoder&) = delete;
  AccessDecoder& operator=(const AccessDecoder&) = delete;

  // `code` holds the instruction bytes at regs.rip (up to 15+ bytes; may be shorter near the end
  // of a mapping). Never throws; bad/short input -> exact=false, len=0.
  InsnAccesses decode(std::span<const uint8_t> code, const user_regs_struct& regs);
  // Same, into `out` (cleared first): reuses out.accesses' storage on the hot path.
  void decode(std::span<const uint8_t> code, const user_regs_struct& regs, InsnAccesses& out);
  // Walks straight-line code from regs.rip without running it and says how far the thread can
  // run unchecked: each walked instruction's accesses are computed from the entry registers as
  // far as the walk can follow them (the exact rules: the top of insn_effects.cc), and
  // none of them satisfies `touches` (an empty one is never true). The walk stops AT (not
  // after) the first instruction that is control flow, has an access it cannot compute, has
  // exact=false, is unusual or a rep string instruction, has an access for which `touches` is
  // true, is undecodable, or after max_insns instructions (RunAhead::Why). Code is read
  // through `read` on every call (cached recipes are used only while the bytes match); the
  // hot path allocates nothing once warm, unless `trace` is given.
  // Every walked instruction runs in order when the thread is continued from regs (nothing
  // walked can branch), unless a signal interrupts it. `trace`, when given, receives one step
  // per instruction looked at: the walked ones, then stop itself unless the walk ended at the
  // limit (trace->size() == insns + (why != Limit)).
  RunAhead run_ahead(const user_regs_struct& regs, const CodeBytesReader& read,
                     const std::function<bool(const MemAccess&)>& touches, uint32_t max_insns = 512,
                     std::vector<RunAheadStep>* trace = nullptr);
  // Forget cached decodings in [addr, addr+len) (code was written).
  void invalidate(uint64_t addr, uint64_t len);
  void clear();
  AccessDecoderStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace backend
