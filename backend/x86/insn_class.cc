// Instruction kinds by capstone id and name (see insn_class.h).
#include "backend/x86/insn_class.h"

namespace backend::access {

bool no_access(unsigned id, std::string_view name) {
  if (name.substr(0, 8) == "prefetch" || name == "cldemote") return true;
  switch (id) {
    case X86_INS_LEA: case X86_INS_NOP:
    case X86_INS_PREFETCH: case X86_INS_PREFETCHNTA: case X86_INS_PREFETCHT0:
    case X86_INS_PREFETCHT1: case X86_INS_PREFETCHT2: case X86_INS_PREFETCHW:
    case X86_INS_UD0: case X86_INS_UD2B:  // always #UD
      return true;
    default: return false;
  }
}

bool inexact(unsigned id, std::string_view name) {
  switch (id) {
    case X86_INS_XSAVE: case X86_INS_XSAVE64: case X86_INS_XSAVEC: case X86_INS_XSAVEC64:
    case X86_INS_XSAVEOPT: case X86_INS_XSAVEOPT64: case X86_INS_XSAVES: case X86_INS_XSAVES64:
    case X86_INS_XRSTOR: case X86_INS_XRSTOR64: case X86_INS_XRSTORS: case X86_INS_XRSTORS64:
    case X86_INS_FXSAVE: case X86_INS_FXSAVE64: case X86_INS_FXRSTOR: case X86_INS_FXRSTOR64:
    case X86_INS_FNSAVE: case X86_INS_FRSTOR: case X86_INS_FLDENV: case X86_INS_FNSTENV:
    case X86_INS_SYSCALL: case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_SYSRET:
    case X86_INS_INT: case X86_INS_INTO:
    case X86_INS_IRET: case X86_INS_IRETD: case X86_INS_IRETQ:
    case X86_INS_LCALL: case X86_INS_LJMP: case X86_INS_RETF: case X86_INS_RETFQ:
    case X86_INS_INSB: case X86_INS_INSW: case X86_INS_INSD:
    case X86_INS_OUTSB: case X86_INS_OUTSW: case X86_INS_OUTSD:
    case X86_INS_SGDT: case X86_INS_SIDT: case X86_INS_SLDT: case X86_INS_STR: case X86_INS_SMSW:
    case X86_INS_LGDT: case X86_INS_LIDT: case X86_INS_LLDT: case X86_INS_LTR: case X86_INS_LMSW:
    case X86_INS_INVLPG: case X86_INS_INVLPGA: case X86_INS_INVPCID: case X86_INS_INVEPT:
    case X86_INS_INVVPID: case X86_INS_VMPTRLD: case X86_INS_VMPTRST: case X86_INS_VMCLEAR:
    case X86_INS_VMXON: case X86_INS_VMREAD: case X86_INS_VMWRITE:
    case X86_INS_VMLOAD: case X86_INS_VMSAVE: case X86_INS_VMRUN: case X86_INS_SKINIT:
      return true;
    default: break;
  }
  // Families by name (decoding is cached, so a string compare here costs nothing per step).
  // Gathers/scatters: capstone 4 even misreports the EVEX vector index as a GPR.
  for (std::string_view p : {"vpgather", "vgather", "vpscatter", "vscatter", "bndmov", "bndldx",
                             "bndstx"})
    if (name.substr(0, p.size()) == p) return true;
  // Undecodable for capstone 4; named so that a later capstone cannot turn them into wrong
  // answers: movdir64b/enqcmd* write 64 bytes at a register's address that is not a memory
  // operand, clzero (AMD) zeroes the cache line at rax.
  for (std::string_view n : {"movdir64b", "enqcmd", "enqcmds", "clzero"})
    if (name == n) return true;
  return false;
}

Op0 op0_class(unsigned id) {
  switch (id) {
    case X86_INS_ADD: case X86_INS_ADC: case X86_INS_SUB: case X86_INS_SBB:
    case X86_INS_AND: case X86_INS_OR: case X86_INS_XOR:
    case X86_INS_INC: case X86_INS_DEC: case X86_INS_NEG: case X86_INS_NOT:
    case X86_INS_SHL: case X86_INS_SAL: case X86_INS_SHR: case X86_INS_SAR:
    case X86_INS_ROL: case X86_INS_ROR: case X86_INS_RCL: case X86_INS_RCR:
    case X86_INS_SHLD: case X86_INS_SHRD:
    case X86_INS_BTS: case X86_INS_BTR: case X86_INS_BTC:
    case X86_INS_XADD: case X86_INS_XCHG:
    case X86_INS_CMPXCHG: case X86_INS_CMPXCHG8B: case X86_INS_CMPXCHG16B:
      return Op0::ReadWrite;
    case X86_INS_BT: case X86_INS_CMP: case X86_INS_TEST:
    case X86_INS_CALL: case X86_INS_JMP: case X86_INS_PUSH:
    case X86_INS_MUL: case X86_INS_IMUL: case X86_INS_DIV: case X86_INS_IDIV:
    case X86_INS_FLD: case X86_INS_FILD: case X86_INS_FBLD: case X86_INS_FLDCW:
    case X86_INS_FADD: case X86_INS_FMUL: case X86_INS_FSUB: case X86_INS_FSUBR:
    case X86_INS_FDIV: case X86_INS_FDIVR: case X86_INS_FCOM: case X86_INS_FCOMP:
    case X86_INS_FIADD: case X86_INS_FIMUL: case X86_INS_FISUB: case X86_INS_FISUBR:
    case X86_INS_FIDIV: case X86_INS_FIDIVR: case X86_INS_FICOM: case X86_INS_FICOMP:
    case X86_INS_LDMXCSR: case X86_INS_VLDMXCSR: case X86_INS_VERR: case X86_INS_VERW:
    // Cache-line flushes fire a read/write (not a write-only) debug-register watchpoint on the
    // byte they name (checked on the CPU), so they count as a 1-byte read.
    case X86_INS_CLFLUSH: case X86_INS_CLFLUSHOPT: case X86_INS_CLWB:
      return Op0::Read;
    default:
      return Op0::Write;
  }
}

StrOp string_op(const cs_x86& x) {
  if (x.opcode[1] != 0) return StrOp::None;
  switch (x.opcode[0]) {
    case 0xa4: case 0xa5: return StrOp::Movs;
    case 0xa6: case 0xa7: return StrOp::Cmps;
    case 0xaa: case 0xab: return StrOp::Stos;
    case 0xac: case 0xad: return StrOp::Lods;
    case 0xae: case 0xaf: return StrOp::Scas;
    default: return StrOp::None;
  }
}

}  // namespace backend::access
