// capstone's register names -> slots (see gpr_slot.h).
#include "backend/x86/gpr_slot.h"

namespace backend::access {

GprRef gpr(x86_reg r) {
  switch (r) {
#define BS_GPR(slot, r64, r32, r16, r8) \
  case X86_REG_##r64: return {slot, 8, false}; \
  case X86_REG_##r32: return {slot, 4, false}; \
  case X86_REG_##r16: return {slot, 2, false}; \
  case X86_REG_##r8: return {slot, 1, false};
    BS_GPR(kRax, RAX, EAX, AX, AL)
    BS_GPR(kRcx, RCX, ECX, CX, CL)
    BS_GPR(kRdx, RDX, EDX, DX, DL)
    BS_GPR(kRbx, RBX, EBX, BX, BL)
    BS_GPR(kRsp, RSP, ESP, SP, SPL)
    BS_GPR(kRbp, RBP, EBP, BP, BPL)
    BS_GPR(kRsi, RSI, ESI, SI, SIL)
    BS_GPR(kRdi, RDI, EDI, DI, DIL)
    BS_GPR(kR8, R8, R8D, R8W, R8B)
    BS_GPR(kR9, R9, R9D, R9W, R9B)
    BS_GPR(kR10, R10, R10D, R10W, R10B)
    BS_GPR(kR11, R11, R11D, R11W, R11B)
    BS_GPR(kR12, R12, R12D, R12W, R12B)
    BS_GPR(kR13, R13, R13D, R13W, R13B)
    BS_GPR(kR14, R14, R14D, R14W, R14B)
    BS_GPR(kR15, R15, R15D, R15W, R15B)
#undef BS_GPR
    case X86_REG_AH: return {kRax, 1, true};
    case X86_REG_CH: return {kRcx, 1, true};
    case X86_REG_DH: return {kRdx, 1, true};
    case X86_REG_BH: return {kRbx, 1, true};
    case X86_REG_RIP: return {kRip, 8, false};
    case X86_REG_EIP: return {kRip, 4, false};
    default: return {};
  }
}

uint16_t slot_bit(x86_reg r) {
  GprRef g = gpr(r);
  return g.slot < 16 ? static_cast<uint16_t>(1u << g.slot) : 0;
}

}  // namespace backend::access
