// Recipes from capstone's decoding: which memory one step of an instruction accesses (see
// docs/watch-emulation.md for the semantics and the reasons behind each rule).
#include "backend/x86/access_recipe.h"

#include <string_view>

#include "backend/x86/access_decoder.h"
#include "backend/x86/capstone_fixes.h"
#include "backend/x86/gpr_slot.h"
#include "backend/x86/insn_class.h"

namespace backend::access {

namespace {

uint8_t log2_of(uint32_t v) {
  uint8_t n = 0;
  while (v > 1) { v >>= 1; ++n; }
  return n;
}

}  // namespace

void build(csh handle, const cs_insn& insn, const CpuQuirks& quirks, Recipe& r) {
  const cs_x86& x = insn.detail->x86;
  const unsigned id = insn.id;
  const uint8_t len = static_cast<uint8_t>(insn.size);
  const bool addr32 = x.addr_size == 4;
  const bool op16 = x.prefix[2] == 0x66;
  // push/pop operand size: 0x66 gives 16 bits unless REX.W asks for 64.
  const uint8_t stack = op16 && !(x.rex & 8) ? 2 : 8;
  const char* name_c = cs_insn_name(handle, id);
  std::string_view name = name_c ? name_c : "";

  if (inexact(id, name) || misdecoded(insn)) {
    r.exact = false;
    return;
  }
  if (no_access(id, name)) return;

  const cs_x86_op* mem = nullptr;  // the first explicit memory operand
  int mem_index = -1;
  for (int i = 0; i < x.op_count; ++i)
    if (x.operands[i].type == X86_OP_MEM) {
      mem = &x.operands[i];
      mem_index = i;
      break;
    }
  Term mt;
  if (mem && !mem_term(*mem, x, len, mt)) {
    r.exact = false;
    return;
  }

  // String instructions: one element per single step (docs/watch-emulation.md).
  if (StrOp s = string_op(x); s != StrOp::None) {
    uint8_t size = (x.opcode[0] & 1) == 0 ? 1 : (x.rex & 8) ? 8 : op16 ? 2 : 4;
    Term src = reg_term(kRsi, 0, addr32, prefix_seg(x));  // ds:rsi, overridable
    Term dst = reg_term(kRdi, 0, addr32);                 // es:rdi, never overridden
    switch (s) {
      case StrOp::Movs: r.add(src, size, true, false); r.add(dst, size, false, true); break;
      case StrOp::Cmps: r.add(src, size, true, false); r.add(dst, size, true, false); break;
      case StrOp::Stos: r.add(dst, size, false, true); break;
      case StrOp::Lods: r.add(src, size, true, false); break;
      case StrOp::Scas: r.add(dst, size, true, false); break;
      case StrOp::None: break;
    }
    if (x.prefix[0] == 0xf3 || x.prefix[0] == 0xf2) r.rep_width = addr32 ? 4 : 8;
    return;
  }

  switch (id) {
    case X86_INS_PUSH: {
      if (mem) r.add(mt, mem->size, true, false);  // the source address uses the old rsp
      r.add(reg_term(kRsp, -stack, false), stack, false, true);
      return;
    }
    case X86_INS_POP: {
      // pop fs/gs moves rsp by 8; Intel reads only the 2-byte selector (a watchpoint on the
      // rest of the slot does not fire there), AMD reads the whole slot.
      bool seg = !quirks.segment_pop_reads_slot && x.op_count >= 1 && x.operands[0].type == X86_OP_REG &&
                 (x.operands[0].reg == X86_REG_FS || x.operands[0].reg == X86_REG_GS);
      r.add(reg_term(kRsp, 0, false), seg ? 2 : stack, true, false);
      if (mem) {
        // The SDM: with rsp as the base, the destination address is computed after the pop
        // has incremented rsp.
        if (mt.base == kRsp) mt.disp += stack;
        r.add(mt, mem->size, false, true);
      }
      return;
    }
    case X86_INS_PUSHF: case X86_INS_PUSHFD: case X86_INS_PUSHFQ:
      r.add(reg_term(kRsp, -stack, false), stack, false, true);
      return;
    case X86_INS_POPF: case X86_INS_POPFD: case X86_INS_POPFQ:
      r.add(reg_term(kRsp, 0, false), stack, true, false);
      return;
    case X86_INS_CALL:
      // 64-bit mode near calls push 8 bytes (Intel ignores 0x66 here).
      if (mem) r.add(mt, mem->size, true, false);
      r.add(reg_term(kRsp, -8, false), 8, false, true);
      return;
    case X86_INS_RET:
      r.add(reg_term(kRsp, 0, false), 8, true, false);
      return;
    case X86_INS_ENTER: {
      if (op16 || x.op_count < 2) {
        r.exact = false;
        return;
      }
      // push rbp; for nesting level L > 0 also L-1 frame pointers copied from [rbp-8..] and
      // the new frame pointer: L+1 quadwords below rsp in all. The final rsp is only probed
      // for writability (a page fault there, but no watchpoint fires): not an access.
      auto level = static_cast<uint32_t>(x.operands[1].imm & 31);
      uint32_t pushes = level == 0 ? 1 : level + 1;
      r.add(reg_term(kRsp, -int64_t{8} * pushes, false), 8 * pushes, false, true);
      if (level > 1) r.add(reg_term(kRbp, -int64_t{8} * (level - 1), false), 8 * (level - 1), true, false);
      return;
    }
    case X86_INS_LEAVE:
      if (op16) {
        r.exact = false;
        return;
      }
      r.add(reg_term(kRbp, 0, false), 8, true, false);  // mov rsp, rbp; pop rbp
      return;
    case X86_INS_XLATB: {
      Term t = reg_term(kRbx, 0, addr32, prefix_seg(x));
      t.index = kRax;
      t.index_width = 1;  // al, zero-extended
      r.add(t, 1, true, false);
      return;
    }
    case X86_INS_MASKMOVQ: case X86_INS_MASKMOVDQU: case X86_INS_VMASKMOVDQU:
      // Implicit ds:rdi destination, written under a byte mask: all of it counts.
      r.add(reg_term(kRdi, 0, addr32, prefix_seg(x)), id == X86_INS_MASKMOVQ ? 8 : 16, false, true);
      return;
    default:
      break;
  }

  if (!mem) return;  // no memory operand: no access

  uint32_t size = corrected_size(id, name, x, mem_index, mem->size);
  bool read = true, write = false;
  if (mem_index == 0) {
    switch (op0_class(id)) {
      case Op0::Write: read = false; write = true; break;
      case Op0::Read: break;
      case Op0::ReadWrite: write = true; break;
    }
  }

  switch (id) {
    case X86_INS_BT: case X86_INS_BTS: case X86_INS_BTR: case X86_INS_BTC:
      // A register bit offset addresses a bit string beyond the operand (SDM "bit base,
      // bit offset"): the CPU accesses the operand-size unit that holds the bit.
      if (mem_index == 0 && x.op_count >= 2 && x.operands[1].type == X86_OP_REG) {
        GprRef off = gpr(x.operands[1].reg);
        if (off.slot == kNoReg || off.high8 || size == 0) {
          r.exact = false;
          return;
        }
        mt.index = off.slot;
        mt.index_width = off.width;
        mt.index_signed = true;
        mt.index_sar = static_cast<uint8_t>(3 + log2_of(size));
        mt.scale = static_cast<uint8_t>(size);
      }
      break;
    case X86_INS_LFS: case X86_INS_LGS: case X86_INS_LSS:
      // m16:16/32/64: offset then selector (capstone 4 always says 8).
      size = x.operands[0].size + 2u;
      break;
    case X86_INS_FNSTSW:
      size = 2;  // capstone 4 says 4
      break;
    default:
      break;
  }
  if (size == 0) {
    r.exact = false;
    return;
  }
  r.add(mt, size, read, write);
}

}  // namespace backend::access
