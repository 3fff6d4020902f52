// Instruction lengths without capstone: for the encodings capstone 4 cannot decode (VEX and
// EVEX: the AVX-512 mask and compare instructions glibc's *_evex string functions are made of,
// kmovd, kortestd, vpcmpub, vptestnmb, vpternlogd, ...; and the 0F 01 register forms, rdpkru,
// wrpkru), and for the common forms that make up most blocks (capstone is slow). None of them
// transfers control, so the length is all that block decoding needs; where a memory operand
// is [rip+disp32], disp_offset says where the displacement is so that a displaced copy can be
// re-targeted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace backend {

struct X86Length {
  uint8_t len = 0;
  bool rip_relative = false;  // a [rip+disp32] operand
  uint8_t disp_offset = 0;    // its disp32's offset in the instruction (0: cannot be relocated)
};

// The length of the VEX/EVEX/0F 01-register instruction at the start of code; nullopt when it
// is none of those, is malformed, or is cut short.
std::optional<X86Length> extended_insn_length(std::span<const uint8_t> code);

// The length of the instruction at the start of code when it is one of the common
// general-purpose or SSE forms compilers emit and certainly not control flow; nullopt for
// anything else (every branch, call, return, trap and system call; lock, x87, VEX, the 0F38
// and 0F3A maps, rare or privileged forms), which the caller decodes with capstone. Decoding
// a block this way costs a few nanoseconds an instruction instead of capstone's hundreds; the
// unit tests check every answer against capstone (all of libc, and random bytes).
std::optional<X86Length> common_insn_length(std::span<const uint8_t> code);

// The common control-flow forms, without prefixes: jcc rel8/rel32, jmp rel8/rel32, call rel32
// and ret. nullopt for anything else (capstone's to decode).
struct X86Branch {
  enum class Kind { CondJump, Jump, Call, Return };
  Kind kind = Kind::Jump;
  uint8_t len = 0;
  int32_t rel = 0;  // the target is the address of the next instruction plus rel (not ret)
};
std::optional<X86Branch> simple_branch(std::span<const uint8_t> code);

// An indirect jmp or call through a [rip+disp32] memory operand (`jmp *GOT(%rip)` of a PLT
// entry, `call *GOT(%rip)` of -fno-plt code), with an optional bnd/notrack prefix and REX:
// the address of the 8-byte slot it reads its target from (`next` is the address of the
// instruction after it). nullopt for any other form (a segment override among them).
std::optional<uint64_t> rip_indirect_slot(std::span<const uint8_t> insn, uint64_t next);

// The length of an instruction of the hint-NOP space (0F 18..0F 1F with a ModRM, after
// 66/F2/F3 and REX prefixes): prefetches, multi-byte NOPs, and CET's rdssp, which capstone 4
// does not know (the block cache then ends a block there with no length). nullopt for any
// other opcode, or one cut short.
std::optional<uint8_t> hint_nop_length(std::span<const uint8_t> code);

}  // namespace backend
