// Terms from capstone's operands (see address_term.h).
#include "backend/x86/address_term.h"

namespace backend::access {

uint8_t prefix_seg(const cs_x86& x) {
  if (x.prefix[1] == 0x64) return kFs;
  if (x.prefix[1] == 0x65) return kGs;
  return kFlat;
}

Term reg_term(uint8_t slot, int64_t disp, bool addr32, uint8_t seg) {
  Term t;
  t.base = slot;
  t.disp = disp;
  t.addr32 = addr32;
  t.seg = seg;
  return t;
}

bool mem_term(const cs_x86_op& op, const cs_x86& x, uint8_t len, Term& t) {
  t = Term{};
  t.addr32 = x.addr_size == 4;
  t.disp = op.mem.disp;
  if (op.mem.segment == X86_REG_FS) t.seg = kFs;
  else if (op.mem.segment == X86_REG_GS) t.seg = kGs;
  if (op.mem.base != X86_REG_INVALID) {
    GprRef b = gpr(op.mem.base);
    if (b.slot == kNoReg || b.high8) return false;
    t.base = b.slot;
    if (b.slot == kRip) t.disp += len;  // relative to the next instruction
  }
  if (op.mem.index != X86_REG_INVALID && op.mem.index != X86_REG_EIZ &&
      op.mem.index != X86_REG_RIZ) {
    GprRef i = gpr(op.mem.index);
    if (i.slot == kNoReg || i.slot == kRip || i.high8) return false;
    t.index = i.slot;
    t.scale = static_cast<uint8_t>(op.mem.scale);
  }
  return true;
}

}  // namespace backend::access
