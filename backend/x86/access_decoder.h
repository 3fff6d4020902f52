// Which memory one x86-64 instruction accesses, computed from its operands and the registers.
//
// Used to emulate hardware watchpoints where the VM drops debug-register traps: the server
// single-steps and, before each step, asks for the accesses of the instruction at rip; after the
// step it stops when an access overlaps a watched range of the right kind, as DR7 would.
//
// Each address is decoded once (capstone, detail on) into a small recipe (per access: segment,
// base, index, scale, displacement, size, read/write) which is cached by address and evaluated
// with the registers on every call. A cached recipe is used only if the instruction bytes passed
// in still equal the bytes it was decoded from, so self-modifying code is safe even without
// invalidate(); invalidate() keeps the cache from holding dead entries.
//
// Semantics: the Intel SDM, checked on the CPU by tests/unit/backend/test_access_decoder.cc (a table
// of instructions, each single-stepped in a child and compared with the bytes it wrote, the page
// faults it takes under PROT_NONE/PROT_READ, and the debug-register watchpoints it fires), and by
// its hidden sweep of every form capstone 4 decodes:
// - Memory operands: base + index*scale + disp; RIP-relative is relative to the next
//   instruction; 0x67 wraps the effective address to 32 bits; fs:/gs: add fs_base/gs_base after
//   that; cs/ds/es/ss overrides are flat in 64-bit mode.
// - Read/write: capstone 4's access flags are wrong for many stores (fstp, movq, pextr*, every
//   VEX/EVEX store, cmpxchg, rol/ror/rcl/rcr...), so they are not used. A memory operand that is
//   not the first (destination) operand is read. A first operand is read-modify-write for the
//   RMW instructions (add..xor, inc/dec/neg/not, shifts/rotates, bts/btr/btc, xadd, xchg,
//   cmpxchg/8b/16b), read for the instructions that only read it (cmp, test, bt, push, call,
//   jmp, mul/div, x87 loads and arithmetic, fldcw, ldmxcsr, verr/verw), and written otherwise.
// - cmpxchg (all forms) is read+write whether or not it succeeds: the CPU always writes
//   (the old value, on failure).
// - No access: lea, nop r/m (multi-byte nops and the 0f 18..1f hint space: bnd*, cldemote),
//   prefetch*, and everything without a memory operand (cpuid, rdpid, rdtsc, mov between
//   registers, in/out, int3, int1, ud2, hlt...). No watchpoint fires for any of them.
// - clflush, clflushopt, clwb: a 1-byte read of the byte named (they fire an access watchpoint,
//   not a write one).
// - Implicit stack accesses (8 bytes, 2 with a 0x66 prefix where the CPU honours it): push
//   (write at rsp-size; `push [rsp+..]` reads its source with the old rsp), pop (read at rsp;
//   `pop [rsp+..]` computes its destination with the incremented rsp), call (write 8 at rsp-8;
//   `call [mem]` also reads the pointer), ret/ret imm (read 8 at rsp), pushf/popf, push fs/gs
//   (writes the whole 8-byte slot), pop fs/gs (reads only the 2-byte selector at rsp), enter
//   (push rbp, plus the frame-pointer display for a nesting level > 0, read from rbp; the write
//   probe ENTER makes at the final rsp is not an access: no watchpoint fires there), leave
//   (read 8 at rbp).
// - String instructions (movs/stos/lods/cmps/scas): one element, at rsi (with the segment
//   override) and/or rdi (never overridden), element size from the opcode and operand size;
//   the direction flag does not matter for the element accessed first. With rep/repe/repne a
//   single step executes ONE iteration (the CPU traps after each), so the same one element is
//   reported; rep with rcx (ecx under 0x67) == 0 accesses nothing.
// - xlat reads 1 byte at [rbx + al]; maskmovq/maskmovdqu write 8/16 bytes at [rdi] (all of
//   them, whatever the mask).
// - Masked stores and loads (AVX-512 {k}, vmaskmov/vpmaskmov, compress/expand) count as
//   accessing the FULL memory operand: a superset of what the CPU touches (no watchpoint fires
//   and no fault happens for masked-off elements), so a watchpoint there may stop spuriously.
//   Computing the mask would need the vector and mask registers, which user_regs_struct lacks.
// - AVX-512 embedded broadcast ({1toN}) reads one element; widening loads ((v)pmovzx/sx) and
//   narrowing stores (vpmov[s|us]xy, vcvtps2ph) access their narrower memory operand; scalar
//   ss/sd operations 4/8 bytes; lfs/lgs/lss operand size + 2. capstone 4 reports several of
//   these wrong (EVEX scalars, (v)comiss/sd, EVEX vmovq, 8:1 vpmov*); they are corrected here.
// - bt/bts/btr/btc with a register bit offset and a memory operand address a bit string: the
//   access is operand-size bytes at EA + opsize * floor(offset / (8 * opsize)), the offset being
//   the register read as a signed operand-size integer. With an immediate offset the access is
//   at EA (the offset is taken modulo the operand size).
// - x87: m16/m32/m64/m80 sizes from the operand (fld/fstp/fbld/fbstp m80 = 10 bytes);
//   fnstsw m16 is 2 bytes (capstone says 4).
// - exact=false (the caller compares the watched bytes after the step): the xsave/xrstor and
//   fxsave/fxrstor families, fnsave/frstor/fldenv/fnstenv, gathers/scatters and the gather/scatter
//   prefetches (any VSIB operand), syscall/sysenter/sysexit/sysret, int n/into, iret, far
//   call/jmp/ret, ins/outs, sgdt/sidt/sldt/str/smsw (the kernel may emulate them under UMIP and
//   write memory), the privileged descriptor-table/VMX/TLB instructions, bndmov/bndldx/bndstx,
//   enter/leave with a 0x66 prefix, and anything capstone 4 cannot decode (len = 0 then):
//   among them movdir64b, movdiri, enqcmd(s), clzero, vbroadcasti128, vcompressps. (capstone 4
//   also reads ptwrite and a few other F3 0F AE forms as xsave*: exact=false as well.)
//   Also exact=false: encodings capstone 4 decodes differently from the CPU (a 66/f2/f3 prefix
//   followed by another legacy prefix, a REX not right before the opcode, a memory operand
//   whose base contradicts ModRM; see misdecoded() in mem_access.cc).
//
// run_ahead() uses the same cached recipes, each with a summary of which GPRs the instruction
// writes and whether it can leave the straight line; its rules are in mem_access.cc
// ("run-ahead").
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
  bool exact = true;  // false: accesses cannot be computed (see the header comment): the caller
                      // compares the watched bytes after the step
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
  // far as the walk can follow them (see mem_access.cc "run-ahead" for the exact rules), and
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
