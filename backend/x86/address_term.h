// One address as the access decoder keeps it: segment, base, index, scale and displacement of
// an operand, built once from capstone's decoding and evaluated with the registers on every
// call. Internal to backend/x86/ (access decoder), not part of its public interface.
#pragma once

#include <sys/user.h>

#include <capstone/capstone.h>

#include <cstdint>

#include "backend/x86/gpr_slot.h"

namespace backend::access {

enum Seg : uint8_t { kFlat, kFs, kGs };

// One address: seg_base + wrap(base + (index >> sar) * scale + disp).
struct Term {
  int64_t disp = 0;
  uint8_t base = kNoReg;
  uint8_t index = kNoReg;
  uint8_t index_width = 8;    // bytes of the index register that count (al for xlat: 1)
  bool index_signed = false;  // bit offsets are signed; address indexes are full width anyway
  uint8_t index_sar = 0;      // arithmetic right shift of the index (bit strings: bits -> units)
  uint8_t scale = 1;
  uint8_t seg = kFlat;
  bool addr32 = false;  // 0x67: the effective address wraps to 32 bits
};

// The address `t` names with these registers (inline: evaluated on every single step).
inline uint64_t evaluate(const Term& t, const user_regs_struct& regs) {
  uint64_t ea = static_cast<uint64_t>(t.disp);
  if (t.base != kNoReg) ea += slot_value(regs, t.base);
  if (t.index != kNoReg) {
    uint64_t raw = slot_value(regs, t.index);
    int64_t iv = static_cast<int64_t>(raw);
    if (t.index_width < 8) {
      unsigned unused = 64 - 8u * t.index_width;
      raw = raw << unused;  // drop the bits above the register width, then extend back
      iv = t.index_signed ? static_cast<int64_t>(raw) >> unused : static_cast<int64_t>(raw >> unused);
    }
    iv >>= t.index_sar;  // arithmetic: floor division for negative bit offsets
    ea += static_cast<uint64_t>(iv) * t.scale;
  }
  if (t.addr32) ea &= 0xffffffffu;
  if (t.seg == kFs) ea += regs.fs_base;
  else if (t.seg == kGs) ea += regs.gs_base;
  return ea;
}

// The segment a legacy fs/gs prefix selects (cs/ds/es/ss are flat in 64-bit mode).
uint8_t prefix_seg(const cs_x86& x);

// [slot + disp] with the given address size and segment.
Term reg_term(uint8_t slot, int64_t disp, bool addr32, uint8_t seg = kFlat);

// The term of an explicit memory operand; false if it uses a register we cannot read (a
// vector index that slipped through, a segment-relative form we do not know).
bool mem_term(const cs_x86_op& op, const cs_x86& x, uint8_t len, Term& t);

}  // namespace backend::access
