#include "backend/x86/insn_length.h"

#include <cstring>

#include <algorithm>

namespace backend {

namespace {

constexpr size_t kMaxInsnLen = 15;

bool is_segment_or_address_prefix(uint8_t b) {
  return b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65 || b == 0x67;
}

// Map 0F (VEX/EVEX map 1) opcodes that take an imm8: the shifts by immediate, pshufd & co.,
// the compares, pinsrw/pextrw, shufps. Map 0F3A (3) always takes one; 0F38 (2) never.
bool map1_has_imm8(uint8_t op) {
  return (op >= 0x70 && op <= 0x73) || op == 0xc2 || op == 0xc4 || op == 0xc5 || op == 0xc6;
}

}  // namespace

std::optional<X86Length> extended_insn_length(std::span<const uint8_t> code) {
  const size_t n = std::min(code.size(), kMaxInsnLen);
  size_t i = 0;
  bool addr32 = false;
  bool other_prefix = false;  // 66/F2/F3/F0/REX before a VEX or EVEX prefix: #UD
  for (; i < n; ++i) {
    uint8_t b = code[i];
    if (is_segment_or_address_prefix(b)) {
      addr32 |= b == 0x67;
    } else if (b == 0x66 || b == 0xf2 || b == 0xf3 || b == 0xf0 || (b & 0xf0) == 0x40) {
      other_prefix = true;
    } else {
      break;
    }
  }
  if (i >= n) return std::nullopt;
  const uint8_t lead = code[i];
  // 0F 01 with a register ModRM (mod = 11): three bytes, no operands to follow.
  if (lead == 0x0f) {
    if (i + 2 < n && code[i + 1] == 0x01 && (code[i + 2] >> 6) == 3)
      return X86Length{static_cast<uint8_t>(i + 3), false, 0};
    return std::nullopt;
  }
  if (other_prefix) return std::nullopt;
  unsigned map = 0;
  size_t op_at = 0;
  if (lead == 0xc5) {  // 2-byte VEX: map 0F implied
    map = 1;
    op_at = i + 2;
  } else if (lead == 0xc4) {  // 3-byte VEX
    if (i + 1 >= n) return std::nullopt;
    map = code[i + 1] & 0x1f;
    if (map < 1 || map > 3) return std::nullopt;
    op_at = i + 3;
  } else if (lead == 0x62) {  // EVEX: P0 holds the map, P1 a bit that is always 1
    if (i + 2 >= n) return std::nullopt;
    map = code[i + 1] & 0x07;
    if ((code[i + 2] & 0x04) == 0 || map == 0 || map == 4 || map == 7) return std::nullopt;
    op_at = i + 4;
  } else {
    return std::nullopt;
  }
  if (op_at >= n) return std::nullopt;
  const uint8_t op = code[op_at];
  size_t p = op_at + 1;
  // vzeroupper / vzeroall: the only VEX instructions without a ModRM byte.
  if (lead != 0x62 && map == 1 && op == 0x77) return X86Length{static_cast<uint8_t>(p), false, 0};
  if (p >= n) return std::nullopt;
  const uint8_t modrm = code[p++];
  const unsigned mod = modrm >> 6, rm = modrm & 7;
  X86Length out;
  size_t disp = 0;
  if (mod != 3 && rm == 4) {  // SIB
    if (p >= n) return std::nullopt;
    const uint8_t sib = code[p++];
    if (mod == 0 && (sib & 7) == 5) disp = 4;
  }
  if (mod == 0 && rm == 5) {  // [rip+disp32] ([eip+disp32] under 67: not relocatable)
    disp = 4;
    out.rip_relative = true;
    out.disp_offset = addr32 ? 0 : static_cast<uint8_t>(p);
  } else if (mod == 1) {
    disp = 1;  // EVEX scales it (disp8*N); it is still one byte
  } else if (mod == 2) {
    disp = 4;
  }
  p += disp;
  if (map == 3 || (map == 1 && map1_has_imm8(op))) p += 1;
  if (p > n) return std::nullopt;
  out.len = static_cast<uint8_t>(p);
  return out;
}

}  // namespace backend

namespace backend {

namespace {

// Operand shape of a known, non-control-flow opcode (0: not known here).
enum : uint16_t {
  kKnown = 1,
  kModrm = 2,
  kImm8 = 4,
  kImm16 = 8,
  kImmZ = 16,       // imm16 under 66, else imm32
  kImmV = 32,       // mov r, imm: imm64 under REX.W, imm16 under 66, else imm32
  kReg0 = 64,       // only ModRM.reg 0 (C6/C7 mov, 8F pop)
  kMemOnly = 128,   // only a memory ModRM (lea, movnti...)
  kRegOnly = 256,   // only a register ModRM
  kGroup3 = 512,    // F6/F7: test (reg 0) takes an immediate; reg 1 is not accepted
  kGroup5 = 1024,   // FE/FF: inc/dec (reg 0/1), FF also push (reg 6); the rest is control flow
  kNoPrefix = 2048, // no 66/F2/F3 (their forms are different or invalid instructions)
  kNoRep = 4096,    // no F2/F3
};

struct OpcodeTables {
  uint16_t one[256] = {};
  uint16_t two[256] = {};  // 0F xx
};

constexpr OpcodeTables make_tables() {
  OpcodeTables t;
  const uint16_t K = kKnown, M = kKnown | kModrm;
  for (int base = 0; base < 0x40; base += 8) {  // add or adc sbb and sub xor cmp
    for (int i = 0; i < 4; ++i) t.one[base + i] = M | kNoRep;
    t.one[base + 4] = K | kImm8 | kNoRep;
    t.one[base + 5] = K | kImmZ | kNoRep;
  }
  for (int i = 0x50; i < 0x60; ++i) t.one[i] = K | kNoRep;  // push/pop r64
  t.one[0x63] = M | kNoRep;                                   // movsxd
  t.one[0x68] = K | kImmZ | kNoRep;
  t.one[0x69] = M | kImmZ | kNoRep;
  t.one[0x6a] = K | kImm8 | kNoRep;
  t.one[0x6b] = M | kImm8 | kNoRep;
  t.one[0x80] = M | kImm8 | kNoRep;
  t.one[0x81] = M | kImmZ | kNoRep;
  t.one[0x83] = M | kImm8 | kNoRep;
  for (int i = 0x84; i <= 0x8b; ++i) t.one[i] = M | kNoRep;  // test xchg mov
  t.one[0x8d] = M | kMemOnly | kNoRep;                        // lea
  t.one[0x8f] = M | kReg0 | kNoRep;                           // pop r/m
  for (int i = 0x91; i <= 0x99; ++i) t.one[i] = K | kNoRep;   // xchg rax, cwde, cdq
  t.one[0x90] = K | kNoRep;  // nop (F3 90 is pause: left to capstone)
  t.one[0x9c] = t.one[0x9d] = t.one[0x9e] = t.one[0x9f] = K | kNoRep;  // pushf popf sahf lahf
  for (int i = 0xa4; i <= 0xa7; ++i) t.one[i] = K;            // movs cmps (rep allowed)
  for (int i = 0xaa; i <= 0xaf; ++i) t.one[i] = K;            // stos lods scas
  t.one[0xa8] = K | kImm8 | kNoRep;
  t.one[0xa9] = K | kImmZ | kNoRep;
  for (int i = 0xb0; i < 0xb8; ++i) t.one[i] = K | kImm8 | kNoRep;
  for (int i = 0xb8; i < 0xc0; ++i) t.one[i] = K | kImmV | kNoRep;
  t.one[0xc0] = M | kImm8 | kNoRep;
  t.one[0xc1] = M | kImm8 | kNoRep;
  t.one[0xc6] = M | kImm8 | kReg0 | kNoRep;
  t.one[0xc7] = M | kImmZ | kReg0 | kNoRep;
  t.one[0xc9] = K | kNoRep;  // leave
  for (int i = 0xd0; i <= 0xd3; ++i) t.one[i] = M | kNoRep;  // shifts
  t.one[0xf5] = t.one[0xf8] = t.one[0xf9] = t.one[0xfc] = t.one[0xfd] = K | kNoRep;  // cmc clc stc cld std
  t.one[0xf6] = M | kGroup3 | kNoRep;
  t.one[0xf7] = M | kGroup3 | kNoRep;
  t.one[0xfe] = M | kGroup5 | kNoRep;
  t.one[0xff] = M | kGroup5 | kNoRep;

  // 0F xx: the general-purpose forms take no 66/F2/F3 meaning, the SSE ones are checked
  // against capstone in the tests (an F2/F3 form capstone rejects is marked kNoRep).
  for (int i = 0x10; i <= 0x17; ++i) t.two[i] = M;  // movups movss movlps unpck movhps...
  t.two[0x1f] = M | kNoRep;                         // nop r/m
  for (int i = 0x28; i <= 0x2f; ++i) t.two[i] = M;  // movaps cvt* ucomis comis
  t.two[0x31] = K | kNoPrefix;                      // rdtsc
  for (int i = 0x40; i < 0x50; ++i) t.two[i] = M | kNoRep;  // cmovcc
  for (int i = 0x50; i <= 0x6f; ++i) t.two[i] = M;
  for (int i = 0x70; i <= 0x73; ++i) t.two[i] = M | kImm8;
  for (int i = 0x74; i <= 0x76; ++i) t.two[i] = M | kNoRep;
  t.two[0x7e] = t.two[0x7f] = M;
  for (int i = 0x90; i < 0xa0; ++i) t.two[i] = M | kNoRep;  // setcc
  t.two[0xa2] = K | kNoPrefix;                              // cpuid
  t.two[0xa3] = t.two[0xab] = t.two[0xb3] = t.two[0xbb] = M | kNoRep;  // bt bts btr btc
  t.two[0xa4] = t.two[0xac] = M | kImm8 | kNoRep;          // shld shrd imm
  t.two[0xa5] = t.two[0xad] = t.two[0xaf] = M | kNoRep;    // shld shrd cl, imul
  t.two[0xb0] = t.two[0xb1] = M | kNoRep;                  // cmpxchg
  t.two[0xb6] = t.two[0xb7] = t.two[0xbe] = t.two[0xbf] = M | kNoRep;  // movzx movsx
  t.two[0xba] = M | kImm8 | kNoRep;                        // bt* imm (reg 4-7, checked below)
  t.two[0xbc] = t.two[0xbd] = M;                           // bsf bsr (F3: tzcnt lzcnt)
  t.two[0xc0] = t.two[0xc1] = M | kNoRep;                  // xadd
  t.two[0xc2] = t.two[0xc6] = M | kImm8;                   // cmpps shufps
  t.two[0xc4] = t.two[0xc5] = M | kImm8 | kNoRep;          // pinsrw pextrw
  for (int i = 0xc8; i < 0xd0; ++i) t.two[i] = K | kNoRep; // bswap
  for (int i = 0xd1; i <= 0xfe; ++i) t.two[i] = M | kNoRep;  // mmx/sse2 integer
  // What capstone decodes only with a memory operand, only with a register one, or only
  // under a mandatory prefix (left to it): as the tests against capstone found.
  for (int op : {0x13, 0x17, 0x1f, 0x2b, 0xe7}) t.two[op] |= kMemOnly;
  for (int op : {0x50, 0xc5, 0xd7, 0xf7}) t.two[op] |= kRegOnly;
  for (int op : {0x6c, 0x6d, 0x71, 0x72, 0x73, 0xd6, 0xe6, 0xf0}) t.two[op] = 0;
  return t;
}

constexpr OpcodeTables kTables = make_tables();

}  // namespace

std::optional<X86Length> common_insn_length(std::span<const uint8_t> code) {
  const size_t n = std::min(code.size(), kMaxInsnLen);
  size_t i = 0;
  bool opsize = false, rep = false, rex_w = false;
  for (;; ++i) {
    if (i >= n) return std::nullopt;
    const uint8_t b = code[i];
    if (b == 0x66) opsize = true;
    else if (b == 0xf2 || b == 0xf3) rep = true;
    else if (b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65) continue;
    else break;  // 67 (address size) and F0 (lock): left to capstone
  }
  if (i >= n) return std::nullopt;
  if ((code[i] & 0xf0) == 0x40) {  // REX, right before the opcode
    rex_w = code[i] & 8;
    if (++i >= n) return std::nullopt;
  }
  uint16_t shape;
  uint8_t op = code[i++];
  bool two = false;
  if (op == 0x0f) {
    if (i >= n) return std::nullopt;
    op = code[i++];
    shape = kTables.two[op];
    two = true;
  } else {
    shape = kTables.one[op];
  }
  if (!(shape & kKnown)) return std::nullopt;
  if ((shape & kNoPrefix) && (opsize || rep)) return std::nullopt;
  if ((shape & kNoRep) && rep) return std::nullopt;
  X86Length out;
  size_t p = i;
  if (shape & kModrm) {
    if (p >= n) return std::nullopt;
    const uint8_t modrm = code[p++];
    const unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
    if ((shape & kMemOnly) && mod == 3) return std::nullopt;
    if ((shape & kRegOnly) && mod != 3) return std::nullopt;
    if ((shape & kReg0) && reg != 0) return std::nullopt;
    if ((shape & kGroup3) && reg == 1) return std::nullopt;
    if ((shape & kGroup5) && !(reg == 0 || reg == 1 || (op == 0xff && reg == 6))) return std::nullopt;
    if (two && op == 0xba && reg < 4) return std::nullopt;
    size_t disp = 0;
    if (mod != 3 && rm == 4) {
      if (p >= n) return std::nullopt;
      if (mod == 0 && (code[p] & 7) == 5) disp = 4;
      ++p;
    }
    if (mod == 0 && rm == 5) {
      disp = 4;
      out.rip_relative = true;
      out.disp_offset = static_cast<uint8_t>(p);
    } else if (mod == 1) {
      disp = 1;
    } else if (mod == 2) {
      disp = 4;
    }
    p += disp;
    if ((shape & kGroup3) && reg == 0) p += (op == 0xf6) ? 1 : (opsize && !rex_w) ? 2 : 4;
  }
  if (shape & kImm8) p += 1;
  if (shape & kImm16) p += 2;
  if (shape & kImmZ) p += (opsize && !rex_w) ? 2 : 4;
  if (shape & kImmV) p += rex_w ? 8 : opsize ? 2 : 4;
  if (p > n) return std::nullopt;
  out.len = static_cast<uint8_t>(p);
  return out;
}

std::optional<X86Branch> simple_branch(std::span<const uint8_t> code) {
  if (code.empty()) return std::nullopt;
  auto rel32 = [&](size_t at) {
    uint32_t v = uint32_t{code[at]} | uint32_t{code[at + 1]} << 8 | uint32_t{code[at + 2]} << 16 | uint32_t{code[at + 3]} << 24;
    return static_cast<int32_t>(v);
  };
  const uint8_t op = code[0];
  using K = X86Branch::Kind;
  if (op >= 0x70 && op <= 0x7f && code.size() >= 2) return X86Branch{K::CondJump, 2, static_cast<int8_t>(code[1])};
  if (op == 0xeb && code.size() >= 2) return X86Branch{K::Jump, 2, static_cast<int8_t>(code[1])};
  if (op == 0xe9 && code.size() >= 5) return X86Branch{K::Jump, 5, rel32(1)};
  if (op == 0xe8 && code.size() >= 5) return X86Branch{K::Call, 5, rel32(1)};
  if (op == 0xc3) return X86Branch{K::Return, 1, 0};
  if (op == 0x0f && code.size() >= 6 && (code[1] & 0xf0) == 0x80) return X86Branch{K::CondJump, 6, rel32(2)};
  return std::nullopt;
}

std::optional<uint64_t> rip_indirect_slot(std::span<const uint8_t> insn, uint64_t next) {
  size_t i = 0;
  while (i < insn.size() && (insn[i] == 0xf2 || insn[i] == 0x3e)) ++i;  // bnd, notrack
  if (i < insn.size() && (insn[i] & 0xf0) == 0x40) ++i;                 // REX (W and B change nothing here)
  if (i + 6 != insn.size() || insn[i] != 0xff) return std::nullopt;
  const uint8_t modrm = insn[i + 1];
  const int reg = (modrm >> 3) & 7;
  if ((modrm & 0xc7) != 0x05 || (reg != 2 && reg != 4)) return std::nullopt;  // mod 00, rm 101: [rip+disp32]
  int32_t disp;
  std::memcpy(&disp, insn.data() + i + 2, 4);
  return next + static_cast<uint64_t>(static_cast<int64_t>(disp));
}

// 0F 18..0F 1F with a ModRM: prefixes, then the ModRM's SIB and displacement.
std::optional<uint8_t> hint_nop_length(std::span<const uint8_t> code) {
  size_t at = 0;
  while (at < code.size() && (code[at] == 0x66 || code[at] == 0xf2 || code[at] == 0xf3)) ++at;
  if (at < code.size() && (code[at] & 0xf0) == 0x40) ++at;
  if (at + 2 >= code.size() || code[at] != 0x0f || code[at + 1] < 0x18 || code[at + 1] > 0x1f) return std::nullopt;
  uint8_t modrm = code[at + 2];
  at += 3;
  unsigned mod = modrm >> 6, rm = modrm & 7;
  if (mod != 3 && rm == 4) {  // SIB
    if (at >= code.size()) return std::nullopt;
    if (mod == 0 && (code[at] & 7) == 5) at += 4;
    ++at;
  }
  if (mod == 1) at += 1;
  else if (mod == 2 || (mod == 0 && rm == 5)) at += 4;
  if (at > code.size() || at > 15) return std::nullopt;
  return static_cast<uint8_t>(at);
}

}  // namespace backend
