#include "backend/x86_length.h"

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
