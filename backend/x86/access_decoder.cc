// AccessDecoder: capstone decodes an instruction once into a Recipe (a few address terms); every
// later call at the same address only compares the bytes and evaluates the terms with the
// registers. See mem_access.h for the semantics and the reasons behind each rule.
#include "backend/x86/access_decoder.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <string_view>
#include <unordered_map>

namespace backend {

namespace {

constexpr size_t kMaxInsnLen = 15;  // the CPU raises #UD for longer instructions
// Recipes kept before the cache is dropped wholesale; bounds memory for code that never loops.
constexpr size_t kMaxCached = size_t{1} << 16;

// Registers that can take part in an address, as slots of a small table of offsets into
// user_regs_struct (kRip is the address of the NEXT instruction: RIP-relative terms add the
// instruction length to their displacement when the recipe is built).
enum Slot : uint8_t {
  kRax, kRcx, kRdx, kRbx, kRsp, kRbp, kRsi, kRdi,
  kR8, kR9, kR10, kR11, kR12, kR13, kR14, kR15, kRip, kNoReg = 0xff
};

constexpr size_t kSlotOffset[] = {
    offsetof(user_regs_struct, rax), offsetof(user_regs_struct, rcx),
    offsetof(user_regs_struct, rdx), offsetof(user_regs_struct, rbx),
    offsetof(user_regs_struct, rsp), offsetof(user_regs_struct, rbp),
    offsetof(user_regs_struct, rsi), offsetof(user_regs_struct, rdi),
    offsetof(user_regs_struct, r8),  offsetof(user_regs_struct, r9),
    offsetof(user_regs_struct, r10), offsetof(user_regs_struct, r11),
    offsetof(user_regs_struct, r12), offsetof(user_regs_struct, r13),
    offsetof(user_regs_struct, r14), offsetof(user_regs_struct, r15),
    offsetof(user_regs_struct, rip),
};

uint64_t slot_value(const user_regs_struct& regs, uint8_t slot) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&regs) + kSlotOffset[slot], sizeof v);
  return v;
}

// A general-purpose register as capstone names it: which slot, how wide, ah/ch/dh/bh.
struct GprRef {
  uint8_t slot = kNoReg;
  uint8_t width = 8;
  bool high8 = false;
};

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

struct AccessRecipe {
  Term at;
  uint32_t size = 0;
  bool read = false;
  bool write = false;
};

// --- run-ahead: what an instruction does to the walk (see "run-ahead" below) ------------------

// How an instruction leaves the straight line.
enum class Flow : uint8_t {
  Falls,    // continues at the next instruction (or faults: a signal, which the caller handles)
  Branch,   // may go elsewhere, traps on purpose or never completes: the walk stops (ControlFlow)
  Unusual,  // falls through but changes state the walk does not model (segment bases, TF...):
            // the walk stops (Unknown)
};

// A register update the walk follows exactly; every other written GPR becomes unknown.
enum class Track : uint8_t {
  None,
  AddImm,  // dst += imm (width 4: the 32-bit result, zero-extended)
  AndImm,  // dst &= imm (width 4: zero-extended): stack realignment (and rsp, -16)
  SetImm,  // dst = imm (already zero-extended for width 4)
  Copy,    // dst = src (width 4: src's low 32 bits, zero-extended)
  Lea,     // dst = the address `value` computes, no segment base (width 4: its low 32 bits)
  Enter,   // enter imm, 0: rbp = rsp - 8; rsp = rsp - 8 - imm
  Leave,   // leave: rsp = rbp + 8 (rbp itself is loaded from memory: in clobber)
};

// The compact per-instruction summary the walk applies after each walked instruction.
struct Effects {
  Flow flow = Flow::Falls;
  Track track = Track::None;
  uint8_t dst = kNoReg, src = kNoReg;
  uint8_t width = 8;
  uint16_t clobber = 0;  // GPRs (bit = slot) that may be written and are not followed by `track`
  int64_t imm = 0;
  Term value;  // Track::Lea
};

struct Recipe {
  uint8_t bytes[kMaxInsnLen] = {};
  uint8_t len = 0;
  bool exact = true;
  uint8_t count = 0;
  uint8_t rep_width = 0;  // rep-prefixed string op: bytes of rcx that count; 0 = no rep
  AccessRecipe acc[3];
  Effects fx;

  void add(const Term& t, uint32_t size, bool read, bool write) {
    if (count < std::size(acc)) acc[count++] = AccessRecipe{t, size, read, write};
    else exact = false;  // cannot happen with the rules below; never report a partial list
  }
};

uint64_t evaluate(const Term& t, const user_regs_struct& regs) {
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

// --- classification -------------------------------------------------------------------------

enum class Op0 { Write, Read, ReadWrite };

// Instructions whose memory operand is only an address (hints, lea) or that never reach memory.
// Names cover hints capstone 4 does not know but a later capstone may decode (cldemote is a
// nop to capstone 4; neither it nor any prefetch fires a debug-register watchpoint).
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

// Instructions whose accesses this decoder does not compute (see the header comment).
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

// What a memory operand in the first (destination) position does. capstone 4's access flags
// are not used: they call many stores reads (fstp, movq, pextr*, setcc, every VEX/EVEX store)
// and cmpxchg/rol/ror/rcl/rcr reads only.
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

// Legacy one-byte string opcodes (capstone's opcode[] holds a0..af alone for them; SSE
// movsd/cmpsd share the capstone id but have a 0f opcode).
enum class StrOp { None, Movs, Cmps, Stos, Lods, Scas };

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

uint8_t prefix_seg(const cs_x86& x) {
  if (x.prefix[1] == 0x64) return kFs;
  if (x.prefix[1] == 0x65) return kGs;
  return kFlat;
}

Term reg_term(uint8_t slot, int64_t disp, bool addr32, uint8_t seg = kFlat) {
  Term t;
  t.base = slot;
  t.disp = disp;
  t.addr32 = addr32;
  t.seg = seg;
  return t;
}

// The term of an explicit memory operand; false if it uses a register we cannot read (a
// vector index that slipped through, a segment-relative form we do not know).
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

// capstone 4 gets some memory operand sizes wrong (found by the CPU sweep in
// test_mem_access.cc): scalar EVEX arithmetic and (v)comiss/sd say 16 bytes, EVEX vmovq says
// 16, and the 8:1 widening/narrowing moves say 16 where the CPU touches 8. Returns the size
// the CPU really uses for the memory operand at position mem_index.
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

uint8_t log2_of(uint32_t v) {
  uint8_t n = 0;
  while (v > 1) { v >>= 1; ++n; }
  return n;
}

// Where capstone 4 and the CPU may disagree on the instruction or its memory operand (found
// by the random sweep in test_run_ahead.cc): decode() gives exact=false, run_ahead stops.
// - a 66/f2/f3 prefix followed by another legacy prefix: the CPU still takes it as the
//   mandatory prefix, capstone 4 may not (f2 67 0f 2c is cvttsd2si r32 to the CPU, cvttps2pi
//   to capstone). The ubiquitous padding nops (66 2e 0f 1f ...) are exempt: a nop either way.
// - a REX byte that is not right before the opcode (the CPU ignores it);
// - a memory operand whose base does not follow from ModRM/SIB (capstone 4 decodes some 0x67
//   EVEX forms with mod=00 rm=101, [eip+disp32] to the CPU, as [rbp] and misses the disp32).
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

// Decodings decode() describes correctly for one step but a walk cannot go past:
// - f2/f3 on a string instruction: a rep the CPU honours (f2 a5 is rep movs) even where
//   capstone 4 drops the prefix; continued, it runs every iteration;
// - EVEX embedded rounding / SAE: capstone 4 takes one byte too many (the rounding control
//   as an immediate), so the next instruction would start at the wrong byte.
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

// Builds the recipe for the instruction capstone decoded into `insn`.
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

  // String instructions: one element per single step (see the header comment).
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


// --- run-ahead ----------------------------------------------------------------------------------
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

uint16_t slot_bit(x86_reg r) {
  GprRef g = gpr(r);
  return g.slot < 16 ? static_cast<uint16_t>(1u << g.slot) : 0;
}

constexpr uint16_t bit(uint8_t slot) { return static_cast<uint16_t>(1u << slot); }

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

// Fills r.fx for the instruction capstone decoded into `insn`.
void build_effects(const cs_insn& insn, Recipe& r) {
  Effects& e = r.fx;
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

}  // namespace

struct AccessDecoder::Impl {
  csh handle = 0;
  cs_insn* insn = nullptr;
  std::unordered_map<uint64_t, Recipe> cache;
  AccessDecoderStats stats;
  CpuQuirks quirks;

  explicit Impl(CpuQuirks q) : quirks(q) {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) {
      handle = 0;
      return;
    }
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    insn = cs_malloc(handle);
  }
  ~Impl() {
    if (insn) cs_free(insn, 1);
    if (handle) cs_close(&handle);
  }

  // The recipe for the instruction at `addr`, from the cache when its bytes still match;
  // nullptr when the bytes do not decode.
  const Recipe* recipe(uint64_t addr, std::span<const uint8_t> code) {
    if (auto it = cache.find(addr); it != cache.end()) {
      const Recipe& c = it->second;
      if (code.size() >= c.len && std::memcmp(c.bytes, code.data(), c.len) == 0) {
        ++stats.cache_hits;
        return &c;
      }
      cache.erase(it);
    }
    if (!handle || !insn) return nullptr;
    ++stats.decodes;
    const uint8_t* p = code.data();
    size_t n = std::min(code.size(), kMaxInsnLen);
    uint64_t at = addr;
    if (n == 0 || !cs_disasm_iter(handle, &p, &n, &at, insn) || insn->size == 0 ||
        insn->size > kMaxInsnLen)
      return nullptr;
    Recipe r;
    r.len = static_cast<uint8_t>(insn->size);
    std::memcpy(r.bytes, insn->bytes, r.len);
    build(handle, *insn, quirks, r);
    build_effects(*insn, r);
    if (cache.size() >= kMaxCached) cache.clear();
    return &cache.insert_or_assign(addr, r).first->second;
  }

  // --- run_ahead --------------------------------------------------------------------------------

  // Code window for one walk: bytes [win_addr, win_addr + win_len) as read; win_short: the
  // reader returned less than asked, nothing is readable past the window.
  static constexpr size_t kChunk = 256;
  std::array<uint8_t, 2 * kChunk> win{};
  uint64_t win_addr = 0;
  size_t win_len = 0;
  bool win_short = false;

  // Writes of walked instructions that may land on code the walk decoded later (self-modifying
  // code); checked once the walk has ended. Kept between calls so its storage is reused.
  struct CodeWrite {
    uint32_t index;   // the writer's position in the walk
    uint64_t writer;  // its address
    uint64_t next;    // the address after it
    uint64_t from, to;
  };
  std::vector<CodeWrite> code_writes;

  // At least kMaxInsnLen bytes at pc, or all that is readable.
  std::span<const uint8_t> code_at(uint64_t pc, const CodeBytesReader& read) {
    if (pc >= win_addr && pc - win_addr <= win_len) {
      size_t off = pc - win_addr;
      if (win_len - off >= kMaxInsnLen || win_short) return {win.data() + off, win_len - off};
    }
    // Up to a chunk boundary, so a readable page followed by an unreadable one still gives all
    // of its bytes with a reader that is not page-aware.
    size_t want = kChunk - pc % kChunk;
    if (want < kMaxInsnLen) want += kChunk;
    size_t got = read ? read(pc, std::span<uint8_t>(win.data(), want)) : 0;
    win_addr = pc;
    win_len = std::min(got, want);
    win_short = win_len < want;
    return {win.data(), win_len};
  }
};

namespace {

bool term_known(const Term& t, uint16_t known) {
  if (t.base != kNoReg && t.base != kRip && !(known & bit(t.base))) return false;
  return t.index == kNoReg || (known & bit(t.index));
}

uint64_t& slot_ref(user_regs_struct& regs, uint8_t slot) {
  return *reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(&regs) + kSlotOffset[slot]);
}

// Applies a walked instruction's effects to the model (regs + known).
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

}  // namespace

AccessDecoder::AccessDecoder(CpuQuirks quirks) : impl_(std::make_unique<Impl>(quirks)) {}
AccessDecoder::~AccessDecoder() = default;

InsnAccesses AccessDecoder::decode(std::span<const uint8_t> code, const user_regs_struct& regs) {
  InsnAccesses out;
  decode(code, regs, out);
  return out;
}

void AccessDecoder::decode(std::span<const uint8_t> code, const user_regs_struct& regs,
                           InsnAccesses& out) {
  out.accesses.clear();
  out.exact = true;
  out.len = 0;
  const Recipe* r = impl_->recipe(regs.rip, code);
  if (!r) {
    out.exact = false;
    return;
  }
  out.len = r->len;
  out.exact = r->exact;
  if (!r->exact) return;
  if (r->rep_width) {
    uint64_t count = regs.rcx;
    if (r->rep_width == 4) count &= 0xffffffffu;
    if (count == 0) return;  // rep with a zero count touches nothing
  }
  for (uint8_t i = 0; i < r->count; ++i) {
    const AccessRecipe& a = r->acc[i];
    out.accesses.push_back(MemAccess{evaluate(a.at, regs), a.size, a.read, a.write});
  }
}

RunAhead AccessDecoder::run_ahead(const user_regs_struct& regs, const CodeBytesReader& read,
                                  const std::function<bool(const MemAccess&)>& touches, uint32_t max_insns,
                                  std::vector<RunAheadStep>* trace) {
  Impl& m = *impl_;
  m.win_addr = 0;
  m.win_len = 0;
  m.win_short = false;
  m.code_writes.clear();
  if (trace) trace->clear();
  // Writes at or above the instruction after the writer and below this bound may land on code
  // the walk decodes later (a walk spans at most max_insns + 1 instructions of 15 bytes).
  const uint64_t code_bound = regs.rip + (static_cast<uint64_t>(max_insns) + 1) * kMaxInsnLen;

  RunAhead res;
  uint64_t stop_len = kMaxInsnLen;  // bytes of stop the thread may fetch (all 15 when unknown)
  user_regs_struct cur = regs;
  uint16_t known = 0xffff;
  uint64_t pc = regs.rip;
  for (;; ++res.insns) {
    if (res.insns >= max_insns) {
      res.why = RunAhead::Why::Limit;
      stop_len = kMaxInsnLen;
      break;
    }
    cur.rip = pc;
    RunAheadStep* step = nullptr;
    if (trace) {
      step = &trace->emplace_back();
      step->addr = pc;
      step->known = known;
      step->regs = cur;
    }
    const Recipe* r = m.recipe(pc, m.code_at(pc, read));
    if (!r) {
      res.why = RunAhead::Why::Undecodable;
      break;
    }
    const Effects& e = r->fx;
    stop_len = r->len;
    if (e.flow == Flow::Branch) {
      res.why = RunAhead::Why::ControlFlow;
      break;
    }
    // rep string instructions run all their iterations when continued; decode() describes one.
    if (e.flow == Flow::Unusual || !r->exact || r->rep_width) {
      res.why = RunAhead::Why::Unknown;
      break;
    }
    bool computable = true;
    for (uint8_t i = 0; i < r->count; ++i) computable &= term_known(r->acc[i].at, known);
    if (!computable) {
      res.why = RunAhead::Why::Unknown;
      break;
    }
    bool touched = false;
    const uint64_t next = pc + r->len;
    for (uint8_t i = 0; i < r->count; ++i) {
      const AccessRecipe& a = r->acc[i];
      MemAccess ma{evaluate(a.at, cur), a.size, a.read, a.write};
      if (step) step->accesses.push_back(ma);
      if (touches && touches(ma)) touched = true;
      uint64_t end = ma.addr + ma.size;
      if (ma.write && (end > next || end < ma.addr) && ma.addr < code_bound)
        m.code_writes.push_back({res.insns, pc, next, ma.addr, end < ma.addr ? UINT64_MAX : end});
    }
    if (step) step->computed = true;
    if (touched) {
      res.why = RunAhead::Why::Touches;
      break;
    }
    apply(e, cur, known);
    pc = next;
  }
  res.stop = pc;

  // Self-modifying code: a walked write that reaches code from the instruction after the writer
  // up to the end of stop (where the caller's breakpoint goes) means the walk decoded stale
  // bytes after it. Stop at the first such writer, so it runs checked.
  for (const Impl::CodeWrite& w : m.code_writes) {
    if (w.index >= res.insns) continue;
    if (w.from < res.stop + stop_len && w.to > w.next) {
      res.stop = w.writer;
      res.insns = w.index;
      res.why = RunAhead::Why::Unknown;
    }
  }
  if (trace && trace->size() > res.insns + 1) trace->resize(res.insns + 1);
  return res;
}

void AccessDecoder::invalidate(uint64_t addr, uint64_t len) {
  if (len == 0) return;
  auto& cache = impl_->cache;
  uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;
  // An instruction starting up to kMaxInsnLen-1 bytes before addr may cover it.
  uint64_t from = addr >= kMaxInsnLen - 1 ? addr - (kMaxInsnLen - 1) : 0;
  auto overlaps = [&](uint64_t start, const Recipe& r) { return start < end && start + r.len > addr; };
  if (end - from <= 4 * cache.size()) {
    for (uint64_t a = from; a < end; ++a)
      if (auto it = cache.find(a); it != cache.end() && overlaps(a, it->second)) cache.erase(it);
  } else {
    for (auto it = cache.begin(); it != cache.end();)
      it = overlaps(it->first, it->second) ? cache.erase(it) : std::next(it);
  }
}

void AccessDecoder::clear() { impl_->cache.clear(); }

AccessDecoderStats AccessDecoder::stats() const {
  AccessDecoderStats s = impl_->stats;
  s.cached = impl_->cache.size();
  return s;
}

}  // namespace backend
