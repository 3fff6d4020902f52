// Corrections of capstone 4's decodings (see capstone_fixes.h).
#include "backend/x86/capstone_fixes.h"

#include <algorithm>

namespace backend::access {

namespace {

// Bytes per element for the b/w/d/q letters of a mnemonic; 0 for anything else.
uint32_t elem_bytes(char c) {
  switch (c) {
    case 'b': return 1;
    case 'w': return 2;
    case 'd': return 4;
    case 'q': return 8;
    default: return 0;
  }
}

}  // namespace

uint32_t corrected_size(unsigned id, std::string_view name, const cs_x86& x, int mem_index, uint32_t size) {
  switch (id) {
    case X86_INS_COMISS: case X86_INS_VCOMISS:
    case X86_INS_VADDSS: case X86_INS_VSUBSS: case X86_INS_VMULSS: case X86_INS_VDIVSS:
    case X86_INS_VMINSS: case X86_INS_VMAXSS:
    case X86_INS_VFMADD213SS: case X86_INS_VFMSUB213SS: case X86_INS_VFNMADD213SS: case X86_INS_VFNMSUB213SS:
    case X86_INS_VRCP28SS: case X86_INS_VRSQRT28SS: case X86_INS_VRNDSCALESS:
      return 4;
    case X86_INS_COMISD: case X86_INS_VCOMISD:
    case X86_INS_VADDSD: case X86_INS_VSUBSD: case X86_INS_VMULSD: case X86_INS_VDIVSD:
    case X86_INS_VMINSD: case X86_INS_VMAXSD:
    case X86_INS_VFMADD213SD: case X86_INS_VFMSUB213SD: case X86_INS_VFNMADD213SD: case X86_INS_VFNMSUB213SD:
    case X86_INS_VRCP28SD: case X86_INS_VRSQRT28SD: case X86_INS_VRNDSCALESD:
      return 8;
    case X86_INS_VMOVQ:
      return std::min<uint32_t>(size, 8);
    default:
      break;
  }
  // (v)pmovzx/(v)pmovsx <from><to>: the memory holds the narrow elements of the destination.
  for (std::string_view p : {"pmovzx", "pmovsx", "vpmovzx", "vpmovsx"})
    if (name.size() == p.size() + 2 && name.substr(0, p.size()) == p && mem_index == 1 && x.op_count >= 2 &&
        x.operands[0].type == X86_OP_REG) {
      uint32_t from = elem_bytes(name[p.size()]), to = elem_bytes(name[p.size() + 1]);
      if (from && to > from) return x.operands[0].size / (to / from);
    }
  // vpmov[s|us]<from><to> to memory: the narrow elements of the source register.
  const cs_x86_op& last = x.operands[x.op_count > 0 ? x.op_count - 1 : 0];
  if (name.substr(0, 5) == "vpmov" && mem_index == 0 && x.op_count >= 2 && last.type == X86_OP_REG) {
    std::string_view rest = name.substr(5);
    if (rest.substr(0, 2) == "us") rest = rest.substr(2);
    else if (rest.substr(0, 1) == "s") rest = rest.substr(1);
    if (rest.size() == 2) {
      uint32_t from = elem_bytes(rest[0]), to = elem_bytes(rest[1]);
      if (to && from > to) return last.size / (from / to);
    }
  }
  return size;
}

bool misdecoded(const cs_insn& insn) {
  const cs_x86& x = insn.detail->x86;
  const cs_x86_op* mem = nullptr;
  for (uint8_t i = 0; i < x.op_count && !mem; ++i)
    if (x.operands[i].type == X86_OP_MEM) mem = &x.operands[i];
  if (uint8_t at = x.encoding.modrm_offset; mem && at != 0 && at < insn.size && (insn.bytes[at] >> 6) != 3) {
    uint8_t mod = insn.bytes[at] >> 6, rm = insn.bytes[at] & 7;
    bool rip = mem->mem.base == X86_REG_RIP || mem->mem.base == X86_REG_EIP;
    if (mod == 0 && rm == 5 && !rip) return true;
    if (mod != 0 && rip) return true;
    if (mod == 0 && rm == 4 && at + 1 < insn.size && (insn.bytes[at + 1] & 7) == 5 &&
        mem->mem.base != X86_REG_INVALID)
      return true;
  }
  bool after_mandatory = false, after_rex = false, doubtful = false;
  size_t i = 0;
  for (; i < insn.size; ++i) {
    uint8_t c = insn.bytes[i];
    bool legacy = c == 0x66 || c == 0x67 || c == 0xf0 || c == 0xf2 || c == 0xf3 || c == 0x2e || c == 0x36 ||
                  c == 0x3e || c == 0x26 || c == 0x64 || c == 0x65;
    bool rex = (c & 0xf0) == 0x40;
    if (!legacy && !rex) break;
    doubtful |= (after_mandatory && legacy) || after_rex;
    after_mandatory = c == 0x66 || c == 0xf2 || c == 0xf3;
    after_rex = rex;
  }
  bool padding_nop = i + 1 < insn.size && insn.bytes[i] == 0x0f && insn.bytes[i + 1] == 0x1f;
  return doubtful && !padding_nop;
}

bool unwalkable(const cs_insn& insn, bool string_insn) {
  const cs_x86& x = insn.detail->x86;
  if (x.avx_sae || x.avx_rm != X86_AVX_RM_INVALID) return true;
  if (!string_insn) return false;
  for (size_t i = 0; i < insn.size; ++i) {
    uint8_t c = insn.bytes[i];
    if (c == 0xf2 || c == 0xf3) return true;
    bool prefix = c == 0x66 || c == 0x67 || c == 0xf0 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 ||
                  c == 0x64 || c == 0x65 || (c & 0xf0) == 0x40;
    if (!prefix) break;
  }
  return false;
}

}  // namespace backend::access
