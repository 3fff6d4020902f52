// The run-ahead register model (see insn_effects.h).
#include "backend/x86/insn_effects.h"

#include "backend/x86/capstone_fixes.h"
#include "backend/x86/insn_class.h"

namespace backend::access {

// run_ahead walks straight-line code with a model of the 16 GPRs: each is known (with a value)
// or unknown. At the start all are known (from regs), as are rip (the walk is linear), fs_base
// and gs_base (only segment loads and wr[fg]sbase change them, and those stop the walk).
// An instruction's accesses are computed from the model when every register its terms use is
// known. After a walked instruction, every GPR it may write becomes unknown except where
// `track` follows the new value exactly:
// - push/pop/pushf (64-bit operand size): rsp -= 8 / += 8 (pop rsp: unknown);
// - add/sub/and/inc/dec r64|r32, imm: exact, the 32-bit forms zero-extended;
// - mov r64|r32, imm (and movabs), mov r64, r64 and mov r32, r32 (zero-extended), hence
//   mov rbp, rsp and mov rsp, rbp; xor/sub r, r (same register) = 0;
// - lea r64|r32, [...]: the address (no segment base), from known registers;
// - enter imm, 0 (rbp = rsp - 8, rsp = rsp - 8 - imm); leave (rsp = rbp + 8, rbp unknown).
// 8- and 16-bit destinations (al, ah, ax...) are never followed: the whole register becomes
// unknown. Which GPRs an instruction writes is NOT taken from capstone 4's access flags alone
// (they are wrong for many memory operands and not trusted for registers either): the first
// register operand counts as written unless the instruction only reads it (cmp, test, bt,
// push, one-operand mul/imul/div/idiv, verr/verw); any other register operand counts when
// capstone says it is written, and always for xchg/xadd/cmpxchg/mulx; capstone's implicit
// writes are added, and the implicit ones it misses (see implicit_writes()).
// The walk stops AT an instruction that may leave the straight line (is_branch: every jump,
// call, return, loop, syscall, interrupt, ud*, hlt, far transfer, xbegin/xend/xabort), at one
// whose effects it does not model (is_unusual: segment loads and wr[fg]sbase, which move
// fs/gs bases; popf, which can set TF/AC/DF; in/out; privileged instructions), at decodings it
// does not trust (misdecoded, unwalkable), at rep string instructions (continued, they run all
// their iterations), at exact=false, and when a walked store lands on code it decoded after the
// store (self-modifying code: the store itself is then the stop).
// The tests check the model against the CPU: every known register equals the real one before
// each walked instruction (test_run_ahead.cc, over random single instructions as well).

namespace {

bool is_segment(unsigned r) {
  return r == X86_REG_CS || r == X86_REG_DS || r == X86_REG_ES || r == X86_REG_FS ||
         r == X86_REG_GS || r == X86_REG_SS;
}

// May not continue at the next instruction. Capstone's groups catch the jumps, calls, returns,
// interrupts; the id list is the backstop (and what the groups miss: ud*, hlt, xbegin...).
bool is_branch(const cs_insn& insn) {
  const cs_detail& d = *insn.detail;
  for (uint8_t i = 0; i < d.groups_count; ++i)
    switch (d.groups[i]) {
      case CS_GRP_JUMP: case CS_GRP_CALL: case CS_GRP_RET: case CS_GRP_INT: case CS_GRP_IRET:
      case CS_GRP_BRANCH_RELATIVE:
        return true;
      default: break;
    }
  switch (insn.id) {
    case X86_INS_JMP: case X86_INS_CALL: case X86_INS_RET:
    case X86_INS_JAE: case X86_INS_JA: case X86_INS_JBE: case X86_INS_JB:
    case X86_INS_JE: case X86_INS_JGE: case X86_INS_JG: case X86_INS_JLE:
    case X86_INS_JL: case X86_INS_JNE: case X86_INS_JNO: case X86_INS_JNP:
    case X86_INS_JNS: case X86_INS_JO: case X86_INS_JP: case X86_INS_JS:
    case X86_INS_LOOP: case X86_INS_LOOPE: case X86_INS_LOOPNE:
    case X86_INS_JRCXZ: case X86_INS_JECXZ: case X86_INS_JCXZ:
    case X86_INS_SYSCALL: case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_SYSRET:
    case X86_INS_INT: case X86_INS_INT1: case X86_INS_INT3: case X86_INS_INTO:
    case X86_INS_UD0: case X86_INS_UD2: case X86_INS_UD2B: case X86_INS_HLT:
    case X86_INS_IRET: case X86_INS_IRETD: case X86_INS_IRETQ:
    case X86_INS_LJMP: case X86_INS_LCALL: case X86_INS_RETF: case X86_INS_RETFQ:
    // A transaction abort resumes at xbegin's fallback address; xend outside one faults.
    case X86_INS_XBEGIN: case X86_INS_XABORT: case X86_INS_XEND:
    case X86_INS_VMCALL: case X86_INS_VMMCALL: case X86_INS_BOUND: case X86_INS_RSM:
      return true;
    default:
      return false;
  }
}

// Falls through but changes what the walk cannot model: fs/gs bases (wr[fg]sbase, swapgs,
// segment loads), TF/AC/DF via popf, I/O and privileged state. Written segment registers are
// caught separately from the operands.
bool is_unusual(const cs_insn& insn) {
  const cs_detail& d = *insn.detail;
  // capstone 4 counts rdtscp as privileged; Linux lets user code run it (the vDSO does).
  for (uint8_t i = 0; i < d.groups_count; ++i)
    if (d.groups[i] == CS_GRP_PRIVILEGE && insn.id != X86_INS_RDTSCP) return true;
  switch (insn.id) {
    case X86_INS_POPF: case X86_INS_POPFD: case X86_INS_POPFQ:
    case X86_INS_WRFSBASE: case X86_INS_WRGSBASE: case X86_INS_SWAPGS:
    case X86_INS_LFS: case X86_INS_LGS: case X86_INS_LSS:
    case X86_INS_IN: case X86_INS_OUT: case X86_INS_CLI: case X86_INS_STI:
    case X86_INS_RDMSR: case X86_INS_WRMSR: case X86_INS_XSETBV: case X86_INS_GETSEC:
    case X86_INS_ENCLS: case X86_INS_ENCLU: case X86_INS_MONITOR: case X86_INS_MWAIT:
      return true;
    default:
      return false;
  }
}

// Instructions whose first register operand is a source only.
bool op0_read_only(const cs_insn& insn) {
  switch (insn.id) {
    case X86_INS_CMP: case X86_INS_TEST: case X86_INS_BT: case X86_INS_PUSH:
    case X86_INS_MUL: case X86_INS_DIV: case X86_INS_IDIV: case X86_INS_VERR: case X86_INS_VERW:
      return true;
    case X86_INS_IMUL:
      return insn.detail->x86.op_count == 1;
    default:
      return false;
  }
}

// GPRs written without being an operand, where capstone 4 does not list them (or might not):
// listed here whether or not it does.
uint16_t implicit_writes(const cs_insn& insn, bool string_insn) {
  constexpr uint16_t ax = bit(kRax), cx = bit(kRcx), dx = bit(kRdx), bx = bit(kRbx);
  constexpr uint16_t sp = bit(kRsp), bp = bit(kRbp), si = bit(kRsi), di = bit(kRdi);
  uint16_t w = string_insn ? ax | cx | si | di : 0;  // lods loads rax; rep counts rcx
  switch (insn.id) {
    case X86_INS_MUL: case X86_INS_DIV: case X86_INS_IDIV:
    case X86_INS_RDTSC: case X86_INS_RDPMC: case X86_INS_RDMSR: case X86_INS_XGETBV:
    case X86_INS_CMPXCHG8B: case X86_INS_CMPXCHG16B:
      return w | ax | dx;
    case X86_INS_IMUL:
      return insn.detail->x86.op_count == 1 ? w | ax | dx : w;
    case X86_INS_RDTSCP: return w | ax | cx | dx;
    case X86_INS_CPUID: return w | ax | bx | cx | dx;
    case X86_INS_CMPXCHG: case X86_INS_CBW: case X86_INS_CWDE: case X86_INS_CDQE:
    case X86_INS_LAHF: case X86_INS_XLATB: case X86_INS_IN: case X86_INS_XBEGIN:
      return w | ax;
    case X86_INS_CWD: case X86_INS_CDQ: case X86_INS_CQO: return w | dx;
    case X86_INS_PCMPESTRI: case X86_INS_PCMPISTRI: case X86_INS_VPCMPESTRI: case X86_INS_VPCMPISTRI:
    case X86_INS_LOOP: case X86_INS_LOOPE: case X86_INS_LOOPNE:
      return w | cx;
    case X86_INS_SYSCALL: return w | ax | cx | bit(kR11);
    case X86_INS_ENTER: case X86_INS_LEAVE: return w | sp | bp;
    case X86_INS_PUSH: case X86_INS_POP: case X86_INS_PUSHF: case X86_INS_PUSHFD: case X86_INS_PUSHFQ:
    case X86_INS_POPF: case X86_INS_POPFD: case X86_INS_POPFQ: case X86_INS_CALL: case X86_INS_RET:
      return w | sp;
    default:
      return w;
  }
}

// The immediate as encoded, sign-extended from its encoded size (what the CPU uses for 32- and
// 64-bit operand sizes); false if capstone's encoding info is missing or disagrees with its
// operand (modulo the operand width): such an instruction is not followed.
bool encoded_imm(const cs_insn& insn, const cs_x86_op& op, uint8_t width, int64_t& out) {
  const cs_x86& x = insn.detail->x86;
  uint8_t off = x.encoding.imm_offset, size = x.encoding.imm_size;
  if (off == 0 || (size != 1 && size != 2 && size != 4 && size != 8) || off + size > insn.size) return false;
  uint64_t raw = 0;
  for (int i = size - 1; i >= 0; --i) raw = raw << 8 | insn.bytes[off + i];
  unsigned unused = 64 - 8u * size;
  int64_t v = unused ? static_cast<int64_t>(raw << unused) >> unused : static_cast<int64_t>(raw);
  uint64_t mask = width == 8 ? ~uint64_t{0} : 0xffffffffu;
  if ((static_cast<uint64_t>(v) & mask) != (static_cast<uint64_t>(op.imm) & mask)) return false;
  out = v;
  return true;
}

// A 64- or 32-bit GPR operand (the only widths the walk follows); kNoReg otherwise.
uint8_t full_gpr(const cs_x86_op& op, uint8_t& width) {
  if (op.type != X86_OP_REG) return kNoReg;
  GprRef g = gpr(op.reg);
  if (g.slot >= 16 || g.high8 || (g.width != 8 && g.width != 4)) return kNoReg;
  width = g.width;
  return g.slot;
}

// The exactly followed update of `insn`, if it has one; returns the GPRs it sets.
uint16_t track(const cs_insn& insn, Effects& e) {
  const cs_x86& x = insn.detail->x86;
  const bool op16 = x.prefix[2] == 0x66 && !(x.rex & 8);
  const cs_x86_op* op = x.operands;
  auto add_imm = [&](uint8_t dst, uint8_t width, int64_t imm) -> uint16_t {
    e.track = Track::AddImm;
    e.dst = dst;
    e.width = width;
    e.imm = imm;
    return bit(dst);
  };
  switch (insn.id) {
    case X86_INS_PUSH:
      // 16-bit pushes (0x66, no REX.W) move rsp by 2: rsp left unknown. push fs/gs: 8 bytes.
      if (op16) return 0;
      return add_imm(kRsp, 8, -8);
    case X86_INS_PUSHF: case X86_INS_PUSHFQ:
      return op16 ? 0 : add_imm(kRsp, 8, -8);
    case X86_INS_POP:
      if (op16 || x.op_count != 1) return 0;
      if (op[0].type == X86_OP_REG && gpr(op[0].reg).slot == kRsp) return 0;  // pop rsp: loaded
      return add_imm(kRsp, 8, 8);
    case X86_INS_ADD: case X86_INS_SUB: case X86_INS_XOR: case X86_INS_AND: {
      uint8_t w = 0;
      if (x.op_count != 2) return 0;
      uint8_t dst = full_gpr(op[0], w);
      if (dst == kNoReg) return 0;
      if ((insn.id == X86_INS_SUB || insn.id == X86_INS_XOR) && op[1].type == X86_OP_REG && op[1].reg == op[0].reg) {
        e.track = Track::SetImm;  // xor r, r / sub r, r: the zeroing idioms
        e.dst = dst;
        e.width = w;
        e.imm = 0;
        return bit(dst);
      }
      int64_t imm;
      if (insn.id == X86_INS_XOR || op[1].type != X86_OP_IMM || !encoded_imm(insn, op[1], w, imm)) return 0;
      if (insn.id == X86_INS_AND) {
        add_imm(dst, w, imm);
        e.track = Track::AndImm;
        return bit(dst);
      }
      return add_imm(dst, w, insn.id == X86_INS_ADD ? imm : static_cast<int64_t>(0 - static_cast<uint64_t>(imm)));
    }
    case X86_INS_INC: case X86_INS_DEC: {
      uint8_t w = 0;
      uint8_t dst = x.op_count == 1 ? full_gpr(op[0], w) : uint8_t{kNoReg};
      if (dst == kNoReg) return 0;
      return add_imm(dst, w, insn.id == X86_INS_INC ? 1 : -1);
    }
    case X86_INS_MOV: case X86_INS_MOVABS: {
      uint8_t w = 0, ws = 0;
      if (x.op_count != 2) return 0;
      uint8_t dst = full_gpr(op[0], w);
      if (dst == kNoReg) return 0;
      int64_t imm;
      if (op[1].type == X86_OP_IMM && encoded_imm(insn, op[1], w, imm)) {
        e.track = Track::SetImm;
        e.imm = w == 4 ? static_cast<int64_t>(static_cast<uint32_t>(imm)) : imm;
      } else if (uint8_t src = full_gpr(op[1], ws); src != kNoReg && ws == w) {
        e.track = Track::Copy;
        e.src = src;
      } else {
        return 0;
      }
      e.dst = dst;
      e.width = w;
      return bit(dst);
    }
    case X86_INS_LEA: {
      uint8_t w = 0;
      if (x.op_count != 2 || op[1].type != X86_OP_MEM) return 0;
      uint8_t dst = full_gpr(op[0], w);
      Term t;
      if (dst == kNoReg || !mem_term(op[1], x, static_cast<uint8_t>(insn.size), t)) return 0;
      t.seg = kFlat;  // lea computes the offset only
      e.track = Track::Lea;
      e.dst = dst;
      e.width = w;
      e.value = t;
      return bit(dst);
    }
    case X86_INS_ENTER:
      if (op16 || x.op_count != 2 || op[0].type != X86_OP_IMM || op[1].type != X86_OP_IMM || (op[1].imm & 31) != 0)
        return 0;
      e.track = Track::Enter;
      e.imm = op[0].imm & 0xffff;
      return bit(kRsp) | bit(kRbp);
    case X86_INS_LEAVE:
      if (op16) return 0;
      e.track = Track::Leave;
      return bit(kRsp);
    default:
      return 0;
  }
}

}  // namespace

void build_effects(const cs_insn& insn, Effects& e) {
  const cs_x86& x = insn.detail->x86;
  const cs_detail& d = *insn.detail;
  if (is_branch(insn)) {
    e.flow = Flow::Branch;
    return;
  }
  if (is_unusual(insn) || misdecoded(insn) || unwalkable(insn, string_op(x) != StrOp::None)) {
    e.flow = Flow::Unusual;
    return;
  }
  const bool all_regs = insn.id == X86_INS_XCHG || insn.id == X86_INS_XADD ||
                        insn.id == X86_INS_CMPXCHG || insn.id == X86_INS_MULX;
  uint16_t written = implicit_writes(insn, string_op(x) != StrOp::None);
  bool segment_written = false;
  for (uint8_t i = 0; i < x.op_count; ++i) {
    const cs_x86_op& op = x.operands[i];
    if (op.type != X86_OP_REG) continue;
    bool w = i == 0 ? !op0_read_only(insn) : all_regs || (op.access & CS_AC_WRITE);
    if (!w) continue;
    written |= slot_bit(op.reg);
    segment_written |= is_segment(op.reg);
  }
  for (uint8_t i = 0; i < d.regs_write_count; ++i) {
    written |= slot_bit(static_cast<x86_reg>(d.regs_write[i]));
    segment_written |= is_segment(d.regs_write[i]);
  }
  if (segment_written) {  // a segment load may change fs_base/gs_base (and mov ss delays traps)
    e.flow = Flow::Unusual;
    return;
  }
  uint16_t exact = track(insn, e);
  e.clobber = static_cast<uint16_t>(written & ~exact);
}

void apply(const Effects& e, user_regs_struct& regs, uint16_t& known) {
  struct Update {
    uint8_t slot;
    bool ok;
    uint64_t value;
  } up[2];
  int n = 0;
  auto is_known = [&](uint8_t slot) { return (known & bit(slot)) != 0; };
  auto narrow = [&](uint64_t v) { return e.width == 4 ? v & 0xffffffffu : v; };
  switch (e.track) {
    case Track::None:
      break;
    case Track::AddImm:
      up[n++] = {e.dst, is_known(e.dst), narrow(slot_value(regs, e.dst) + static_cast<uint64_t>(e.imm))};
      break;
    case Track::AndImm:
      up[n++] = {e.dst, is_known(e.dst), narrow(slot_value(regs, e.dst) & static_cast<uint64_t>(e.imm))};
      break;
    case Track::SetImm:
      up[n++] = {e.dst, true, narrow(static_cast<uint64_t>(e.imm))};
      break;
    case Track::Copy:
      up[n++] = {e.dst, is_known(e.src), narrow(slot_value(regs, e.src))};
      break;
    case Track::Lea:
      up[n++] = {e.dst, term_known(e.value, known), narrow(evaluate(e.value, regs))};
      break;
    case Track::Enter: {
      uint64_t rsp = slot_value(regs, kRsp);
      up[n++] = {kRbp, is_known(kRsp), rsp - 8};
      up[n++] = {kRsp, is_known(kRsp), rsp - 8 - static_cast<uint64_t>(e.imm)};
      break;
    }
    case Track::Leave:
      up[n++] = {kRsp, is_known(kRbp), slot_value(regs, kRbp) + 8};
      break;
  }
  known = static_cast<uint16_t>(known & ~e.clobber);
  for (int i = 0; i < n; ++i) {
    slot_ref(regs, up[i].slot) = up[i].value;
    known = up[i].ok ? static_cast<uint16_t>(known | bit(up[i].slot))
                     : static_cast<uint16_t>(known & ~bit(up[i].slot));
  }
}

}  // namespace backend::access
