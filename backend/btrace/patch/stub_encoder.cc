#include "backend/btrace/patch/stub_encoder.h"

#include <sys/syscall.h>

#include "backend/x86/insn_length.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

#include <cstring>
#include <limits>

namespace backend::patch {

namespace {

int reg_num(unsigned r) {
  switch (r) {
    case X86_REG_RAX: return 0;
    case X86_REG_RCX: return 1;
    case X86_REG_RDX: return 2;
    case X86_REG_RBX: return 3;
    case X86_REG_RSP: return 4;
    case X86_REG_RBP: return 5;
    case X86_REG_RSI: return 6;
    case X86_REG_RDI: return 7;
    case X86_REG_R8: return 8;
    case X86_REG_R9: return 9;
    case X86_REG_R10: return 10;
    case X86_REG_R11: return 11;
    case X86_REG_R12: return 12;
    case X86_REG_R13: return 13;
    case X86_REG_R14: return 14;
    case X86_REG_R15: return 15;
    default: return -1;
  }
}

bool fits32(int64_t v) { return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(); }

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void emit(std::vector<uint8_t>& out, std::initializer_list<uint8_t> bytes) { out.insert(out.end(), bytes); }

bool is_flow_id(unsigned id) {
  switch (id) {
    case X86_INS_JMP: case X86_INS_CALL: case X86_INS_RET: case X86_INS_RETF: case X86_INS_RETFQ:
    case X86_INS_JAE: case X86_INS_JA: case X86_INS_JBE: case X86_INS_JB: case X86_INS_JE: case X86_INS_JGE:
    case X86_INS_JG: case X86_INS_JLE: case X86_INS_JL: case X86_INS_JNE: case X86_INS_JNO: case X86_INS_JNP:
    case X86_INS_JNS: case X86_INS_JO: case X86_INS_JP: case X86_INS_JS: case X86_INS_LOOP: case X86_INS_LOOPE:
    case X86_INS_LOOPNE: case X86_INS_JRCXZ: case X86_INS_JECXZ: case X86_INS_JCXZ: case X86_INS_SYSCALL:
    case X86_INS_INT: case X86_INS_INT1: case X86_INS_INT3: case X86_INS_INTO: case X86_INS_UD0: case X86_INS_UD2:
    case X86_INS_UD2B: case X86_INS_HLT: case X86_INS_IRET: case X86_INS_IRETD: case X86_INS_IRETQ:
    case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_SYSRET: case X86_INS_LJMP: case X86_INS_LCALL:
    case X86_INS_XBEGIN: case X86_INS_XABORT: case X86_INS_VMCALL: case X86_INS_BOUND:
      return true;
    default:
      return false;
  }
}

// Registers and flags the stub saves (below the red zone) and restores.
void save_light(std::vector<uint8_t>& c) {
  emit(c, {0x48, 0x8d, 0x64, 0x24, 0x80});  // lea rsp,[rsp-128]
  emit(c, {0x50});                          // push rax
}
void restore_light(std::vector<uint8_t>& c) {
  emit(c, {0x58});                                            // pop rax
  emit(c, {0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00});  // lea rsp,[rsp+128]
}
void save_heavy(std::vector<uint8_t>& c) {
  emit(c, {0x48, 0x8d, 0x64, 0x24, 0x80});  // lea rsp,[rsp-128]
  emit(c, {0x9c, 0x50, 0x51, 0x52});        // pushfq; push rax; push rcx; push rdx
}
void restore_heavy(std::vector<uint8_t>& c) {
  emit(c, {0x5a, 0x59, 0x58, 0x9d});                          // pop rdx; pop rcx; pop rax; popfq
  emit(c, {0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00});  // lea rsp,[rsp+128]
}
constexpr int32_t kHeavyFrame = 128 + 4 * 8;  // rsp of the program = stub rsp + this

// The ring head of the running thread: gs:[0] (the server points each thread's gs base at
// the head of its own ring; x86-64 Linux programs leave gs alone). No lock: one writer a ring.
void load_head(std::vector<uint8_t>& c) { emit(c, {0x65, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0}); }   // mov rax,gs:[0]
void store_head(std::vector<uint8_t>& c) { emit(c, {0x65, 0x48, 0x89, 0x04, 0x25, 0, 0, 0, 0}); }  // mov gs:[0],rax

// Appends the 4-byte entry `id` at the ring head and advances the head (clobbers rax, not
// the flags).
void append_entry(Stub& s, const StubSpec& spec) {
  auto& c = s.code;
  load_head(c);
  s.ring_stores.push_back(static_cast<uint32_t>(c.size()));
  emit(c, {0xc7, 0x00});  // mov dword [rax], id
  put32(c, spec.edge_id);
  emit(c, {0x48, 0x8d, 0x40, 0x04});  // lea rax,[rax+4]
  store_head(c);
}

// Appends the 4-byte entry `id` (flags untouched). rax waits in the thread's word gs:[16]
// rather than on the stack: no rsp to move past the red zone and back (no signal handler runs
// inside a stub: the server moves a thread out of it before any signal is delivered).
void record_direct(Stub& s, const StubSpec& spec) {
  emit(s.code, {0x65, 0x48, 0x89, 0x04, 0x25, 0x10, 0, 0, 0});  // mov gs:[16],rax
  append_entry(s, spec);
  emit(s.code, {0x65, 0x48, 0x8b, 0x04, 0x25, 0x10, 0, 0, 0});  // mov rax,gs:[16]
}

// Pushes the original return address of a call at `flow`. One 8-byte store (through rax, kept):
// two 4-byte halves would stall the `ret` that loads it later (no store forwarding).
void push_return(std::vector<uint8_t>& c, const Insn& flow) {
  uint64_t ret = flow.addr + flow.len;
  emit(c, {0x48, 0x8d, 0x64, 0x24, 0xf8});  // lea rsp,[rsp-8]
  emit(c, {0x50});                          // push rax
  emit(c, {0x48, 0xb8});                    // movabs rax, ret
  put64(c, ret);
  emit(c, {0x48, 0x89, 0x44, 0x24, 0x08});  // mov [rsp+8], rax
  emit(c, {0x58});                          // pop rax
}

// A direct exit of the stub (to the original target or fall-through), listed in s.exits so
// that the tracer can send it to a translation of the block there instead.
bool jmp_to(Stub& s, uint64_t stub_addr, uint64_t target) {
  auto& c = s.code;
  auto j = jmp_rel32(stub_addr + c.size(), target);
  if (!j) return false;
  s.exits.emplace_back(static_cast<uint32_t>(c.size() + 1), target);
  c.insert(c.end(), j->begin(), j->end());
  return true;
}

bool is_rax(unsigned r) {
  return r == X86_REG_RAX || r == X86_REG_EAX || r == X86_REG_AX || r == X86_REG_AL || r == X86_REG_AH;
}

// Fills in.writes_rax / in.rax_known (see Insn).
void rax_effect(csh h, const cs_insn* ci, Insn& in) {
  const cs_x86& x = ci->detail->x86;
  bool to_eax = x.op_count == 2 && x.operands[0].type == X86_OP_REG &&
                (x.operands[0].reg == X86_REG_EAX || x.operands[0].reg == X86_REG_RAX);
  if (to_eax && ci->id == X86_INS_MOV && x.operands[1].type == X86_OP_IMM) {
    in.writes_rax = true;
    auto imm = static_cast<uint64_t>(x.operands[1].imm);
    in.rax_known = x.operands[0].reg == X86_REG_EAX ? imm & 0xffffffffu : imm;
    return;
  }
  if (to_eax && (ci->id == X86_INS_XOR || ci->id == X86_INS_SUB) && x.operands[1].type == X86_OP_REG &&
      x.operands[1].reg == x.operands[0].reg) {
    in.writes_rax = true;
    in.rax_known = 0;
    return;
  }
  cs_regs read, written;
  uint8_t nread = 0, nwritten = 0;
  if (cs_regs_access(h, ci, read, &nread, written, &nwritten) != CS_ERR_OK) {
    in.writes_rax = true;  // cannot tell: assume it does
    return;
  }
  for (uint8_t i = 0; i < nwritten; ++i)
    if (is_rax(written[i])) in.writes_rax = true;
}

}  // namespace

std::optional<uint64_t> syscall_number(std::span<const Insn> insns) {
  if (insns.empty() || insns.back().len != 2 || insns.back().bytes[0] != 0x0f || insns.back().bytes[1] != 0x05)
    return std::nullopt;
  for (size_t i = insns.size() - 1; i-- > 0;) {
    const Insn& in = insns[i];
    if (in.flow) return std::nullopt;  // not the block it ends
    if (in.rax_known) return in.rax_known;
    if (in.writes_rax) return std::nullopt;
  }
  return std::nullopt;
}

Disassembler::Disassembler() {
  csh h = 0;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK) return;
  cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
  handle_ = h;
  insn_ = cs_malloc(h);
}

Disassembler::~Disassembler() {
  if (!handle_) return;
  csh h = handle_;
  if (insn_) cs_free(static_cast<cs_insn*>(insn_), 1);
  cs_close(&h);
}

Result<std::vector<Insn>> decode_all(std::span<const uint8_t> code, uint64_t addr) {
  Disassembler dis;
  return decode_all(dis, code, addr);
}

Result<std::vector<Insn>> decode_all(const Disassembler& dis, std::span<const uint8_t> code, uint64_t addr) {
  if (!dis.handle() || !dis.insn()) return Error{ENOSYS, "The capstone disassembler could not be opened."};
  csh h = dis.handle();
  cs_insn* ci = static_cast<cs_insn*>(dis.insn());
  std::vector<Insn> out;
  const uint8_t* p = code.data();
  size_t size = code.size();
  uint64_t a = addr;
  // rax effects serve only syscall_number(), which looks at code ending in `syscall`; capstone's
  // register-access query costs more than the decode itself, so other code goes without.
  const bool want_rax = size >= 2 && p[size - 2] == 0x0f && p[size - 1] == 0x05;
  // An instruction measured without capstone: taken as it is, and the cursor moves past it.
  auto take = [&](uint8_t len, bool flow, bool rip_relative, uint8_t disp_offset) -> Insn& {
    Insn& in = out.emplace_back();
    in.addr = a;
    in.len = len;
    std::memcpy(in.bytes, p, len);
    in.flow = flow;
    in.rip_relative = rip_relative;
    in.disp_offset = disp_offset;
    p += len;
    size -= len;
    a += len;
    return in;
  };
  while (size > 0) {
    // A common instruction (never the control-flow one): its length and [rip+disp32] are all
    // a displaced copy needs. Not where rax effects are wanted.
    if (!want_rax) {
      if (auto len = common_insn_length(std::span<const uint8_t>(p, size))) {
        take(len->len, false, len->rip_relative, len->disp_offset);
        continue;
      }
    }
    if (auto br = simple_branch(std::span<const uint8_t>(p, size))) {  // jcc/jmp/call rel, ret
      take(br->len, true, false, 0);
      continue;
    }
    if (!cs_disasm_iter(h, &p, &size, &a, ci)) {
      // What capstone 4 lacks (AVX-512 mask/compare forms, rdpkru) is never control flow: its
      // length and [rip+disp32] offset are enough to displace it.
      auto ext = extended_insn_length(std::span<const uint8_t>(p, size));
      if (!ext) break;
      take(ext->len, false, ext->rip_relative, ext->disp_offset).writes_rax = true;  // rdpkru does; the rest is not looked at closely
      continue;
    }
    Insn in;
    in.addr = ci->address;
    in.len = static_cast<uint8_t>(ci->size);
    std::memcpy(in.bytes, ci->bytes, std::min<size_t>(ci->size, sizeof in.bytes));
    in.flow = is_flow_id(ci->id);
    const cs_x86& x = ci->detail->x86;
    in.operand_size_16 = x.prefix[2] == 0x66;
    if (want_rax) rax_effect(h, ci, in);
    for (uint8_t i = 0; i < x.op_count; ++i) {
      const cs_x86_op& op = x.operands[i];
      // [rip+disp] always has a disp32 in 64-bit mode. capstone 4 reports disp_size 2 when
      // a 66 prefix is present (`mov word [rip+d], ax`): the size is not trusted. No offset
      // at all: the instruction is marked so that relocate() refuses it.
      if (op.type == X86_OP_MEM && op.mem.base == X86_REG_RIP) {
        in.rip_relative = true;
        in.disp_offset = x.encoding.disp_offset;
      }
    }
    if ((ci->id == X86_INS_JMP || ci->id == X86_INS_CALL) && x.op_count == 1 && x.operands[0].type != X86_OP_IMM) {
      const cs_x86_op& op = x.operands[0];
      Operand o;
      if (op.type == X86_OP_REG) {
        o.is_reg = true;
        o.reg = reg_num(op.reg);
      } else if (op.type == X86_OP_MEM) {
        o.segment = op.mem.segment == X86_REG_FS ? 0x64 : op.mem.segment == X86_REG_GS ? 0x65 : 0;
        if (op.mem.base == X86_REG_RIP) {
          o.rip = true;
          o.rip_target = in.addr + in.len + static_cast<uint64_t>(op.mem.disp);
        } else {
          o.base = op.mem.base == X86_REG_INVALID ? -1 : reg_num(op.mem.base);
          o.index = op.mem.index == X86_REG_INVALID ? -1 : reg_num(op.mem.index);
          if ((op.mem.base != X86_REG_INVALID && o.base < 0) || (op.mem.index != X86_REG_INVALID && o.index < 0))
            o.base = o.index = -2;  // 32-bit address registers: not handled
          o.scale = static_cast<uint8_t>(op.mem.scale);
          o.disp = op.mem.disp;
        }
        // Segments other than fs/gs mean nothing in 64-bit mode; an address-size prefix does.
        if (x.prefix[3] == 0x67) o.base = o.index = -2;
      }
      in.operand = o;
    }
    out.push_back(in);
  }
  return out;
}

std::optional<std::vector<uint8_t>> relocate(const Insn& in, uint64_t new_addr) {
  if (in.flow) return std::nullopt;
  std::vector<uint8_t> out(in.bytes, in.bytes + in.len);
  if (!in.rip_relative) return out;
  if (in.disp_offset == 0 || in.disp_offset + 4 > in.len) return std::nullopt;
  int32_t disp;
  std::memcpy(&disp, in.bytes + in.disp_offset, 4);
  uint64_t target = in.addr + in.len + static_cast<int64_t>(disp);
  int64_t nd = static_cast<int64_t>(target - (new_addr + in.len));
  if (!fits32(nd)) return std::nullopt;
  int32_t d = static_cast<int32_t>(nd);
  std::memcpy(out.data() + in.disp_offset, &d, 4);
  return out;
}

std::optional<std::vector<uint8_t>> jmp_rel32(uint64_t from, uint64_t to) {
  int64_t rel = static_cast<int64_t>(to - (from + 5));
  if (!fits32(rel)) return std::nullopt;
  std::vector<uint8_t> out{0xe9};
  put32(out, static_cast<uint32_t>(static_cast<int32_t>(rel)));
  return out;
}

bool emit_modrm(std::vector<uint8_t>& out, uint64_t at, uint8_t opcode, int reg_field, const Operand& op, bool rex_w) {
  std::vector<uint8_t> c;
  if (op.segment) c.push_back(op.segment);
  uint8_t rex = 0x40 | (rex_w ? 8 : 0) | ((reg_field >> 3) & 1) << 2;
  if (op.is_reg) {
    if (op.reg < 0) return false;
    rex |= (op.reg >> 3) & 1;
    if (rex != 0x40) c.push_back(rex);
    c.push_back(opcode);
    c.push_back(static_cast<uint8_t>(0xc0 | (reg_field & 7) << 3 | (op.reg & 7)));
  } else if (op.rip) {
    if (rex != 0x40) c.push_back(rex);
    c.push_back(opcode);
    c.push_back(static_cast<uint8_t>(0x05 | (reg_field & 7) << 3));
    int64_t d = static_cast<int64_t>(op.rip_target - (at + c.size() + 4));  // rip = the end of this instruction
    if (!fits32(d)) return false;
    put32(c, static_cast<uint32_t>(static_cast<int32_t>(d)));
  } else {
    if (op.base < -1 || op.index < -1 || op.index == 4 || !fits32(op.disp)) return false;
    uint8_t scale_bits = op.scale == 8 ? 3 : op.scale == 4 ? 2 : op.scale == 2 ? 1 : 0;
    if (op.index >= 0) rex |= ((op.index >> 3) & 1) << 1;
    if (op.base >= 0) rex |= (op.base >> 3) & 1;
    if (rex != 0x40) c.push_back(rex);
    c.push_back(opcode);
    // Always a SIB byte and a disp32: one form for every base (rsp/r12 need the SIB, rbp/r13 a disp).
    uint8_t mod = op.base >= 0 ? 0x80 : 0x00;
    c.push_back(static_cast<uint8_t>(mod | (reg_field & 7) << 3 | 4));
    uint8_t index_bits = op.index >= 0 ? (op.index & 7) : 4;
    uint8_t base_bits = op.base >= 0 ? (op.base & 7) : 5;
    c.push_back(static_cast<uint8_t>(scale_bits << 6 | index_bits << 3 | base_bits));
    put32(c, static_cast<uint32_t>(static_cast<int32_t>(op.disp)));
  }
  out.insert(out.end(), c.begin(), c.end());
  return true;
}

std::optional<size_t> choose_displacement(std::span<const Insn> insns, uint64_t earliest) {
  if (insns.empty()) return std::nullopt;
  size_t k = insns.size() - 1;
  size_t total = insns[k].len;
  while (total < kJmpLen) {
    if (k == 0) return std::nullopt;
    --k;
    if (insns[k].addr < earliest || insns[k].flow) return std::nullopt;
    total += insns[k].len;
  }
  if (insns[k].addr < earliest) return std::nullopt;
  return k;
}

bool dynamic_supported(const Insn& flow, FlowKind kind) {
  if (kind == FlowKind::Return) return flow.len >= 1 && (flow.bytes[flow.len - 1] == 0xc3 || (flow.len >= 3 && flow.bytes[flow.len - 3] == 0xc2));
  if (kind != FlowKind::IndirectJump && kind != FlowKind::IndirectCall) return false;
  if (!flow.operand || flow.operand_size_16) return false;
  const Operand& o = *flow.operand;
  if (o.is_reg) return o.reg >= 0 && o.reg != 4;
  if (o.rip) return true;
  return o.base >= -1 && o.index >= -1 && o.base != 4 && o.index != 4;
}

Result<Stub> build_stub(const StubSpec& spec, uint64_t stub_addr) {
  Stub s;
  auto& c = s.code;
  for (const Insn& d : spec.displaced) {
    auto r = relocate(d, stub_addr + c.size());
    if (!r) return Error{ERANGE, fmt::format("cannot relocate the instruction at {:#x}", d.addr)};
    s.exact.emplace_back(static_cast<uint32_t>(c.size()), d.addr);
    c.insert(c.end(), r->begin(), r->end());
  }
  s.exact.emplace_back(static_cast<uint32_t>(c.size()), spec.flow.addr);
  const Insn& f = spec.flow;
  uint64_t next = f.addr + f.len;
  switch (spec.kind) {
    case FlowKind::CondJump:
    case FlowKind::Loop: {
      // The condition itself, short form, over a jmp to the fall-through: `cc +5; jmp F; record; jmp T`.
      if (spec.kind == FlowKind::CondJump) {
        // jcc rel8: 7x rel8; jcc rel32: 0f 8x rel32 (hint prefixes before either are dropped)
        uint8_t cc;
        if (f.len >= 6 && f.bytes[f.len - 6] == 0x0f && (f.bytes[f.len - 5] & 0xf0) == 0x80) cc = f.bytes[f.len - 5] & 0x0f;
        else if ((f.bytes[f.len - 2] & 0xf0) == 0x70) cc = f.bytes[f.len - 2] & 0x0f;
        else return Error{EINVAL, fmt::format("unknown jcc form at {:#x}", f.addr)};
        emit(c, {static_cast<uint8_t>(0x70 | cc), 0x05});
      } else {
        // loop/loope/loopne/jrcxz: every byte but the rel8 (keeps a 67 prefix), rel8 = 5.
        c.insert(c.end(), f.bytes, f.bytes + f.len - 1);
        c.push_back(0x05);
      }
      if (!jmp_to(s, stub_addr, next)) return Error{ERANGE, "fall-through out of range"};
      if (spec.record && spec.target != next) record_direct(s, spec);
      if (!jmp_to(s, stub_addr, spec.target)) return Error{ERANGE, "target out of range"};
      break;
    }
    case FlowKind::Jump:
      if (spec.record && spec.target != next) record_direct(s, spec);
      if (!jmp_to(s, stub_addr, spec.target)) return Error{ERANGE, "target out of range"};
      break;
    case FlowKind::Call:
      if (spec.record && spec.target != next) {
        // Below rsp nothing is live at a call (the call itself writes [rsp-8]): no red-zone
        // skip; rax records the entry, then carries the return address into its slot.
        emit(c, {0x48, 0x8d, 0x64, 0x24, 0xf8});  // lea rsp,[rsp-8]
        emit(c, {0x50});                          // push rax
        append_entry(s, spec);
        emit(c, {0x48, 0xb8});  // movabs rax, return address
        put64(c, next);
        emit(c, {0x48, 0x89, 0x44, 0x24, 0x08});  // mov [rsp+8], rax
        emit(c, {0x58});                          // pop rax
      } else {
        push_return(c, f);
      }
      if (!jmp_to(s, stub_addr, spec.target)) return Error{ERANGE, "target out of range"};
      break;
    case FlowKind::Return:
    case FlowKind::IndirectJump:
    case FlowKind::IndirectCall: {
      if (!dynamic_supported(f, spec.kind)) return Error{EINVAL, fmt::format("unsupported operand at {:#x}", f.addr)};
      // Inline cache first, without touching the flags: rcx = target; rax = ~cached;
      // rcx + rax + 1 = target - cached, zero on a hit (jrcxz). An empty cache (0) never hits.
      save_light(c);
      emit(c, {0x51});  // push rcx
      if (spec.kind == FlowKind::Return) {
        emit(c, {0x48, 0x8b, 0x8c, 0x24});  // mov rcx,[rsp+128+16]
        put32(c, kRedZone + 16);
      } else {
        if (!emit_modrm(c, stub_addr + c.size(), 0x8b, 1, *f.operand)) return Error{ERANGE, "operand out of range"};
      }
      std::vector<size_t> cache_refs;  // disp32 fields that address the cache slot
      emit(c, {0x48, 0x8b, 0x05});  // mov rax,[rip+cache]
      cache_refs.push_back(c.size());
      put32(c, 0);
      emit(c, {0x48, 0xf7, 0xd0});        // not rax
      emit(c, {0x48, 0x8d, 0x4c, 0x01, 0x01});  // lea rcx,[rcx+rax+1]
      emit(c, {0xe3, 0x05});              // jrcxz hit
      emit(c, {0xe9});                    // jmp cache_miss
      size_t jmp_miss = c.size();
      put32(c, 0);
      // hit: a 4-byte entry, the id of the edge (this site, the cached target)
      load_head(c);
      emit(c, {0x8b, 0x0d});  // mov ecx,[rip+cache+8]
      cache_refs.push_back(c.size());
      put32(c, 8);
      s.ring_stores.push_back(static_cast<uint32_t>(c.size()));
      emit(c, {0x89, 0x08});              // mov [rax],ecx
      emit(c, {0x48, 0x8d, 0x40, 0x04});  // lea rax,[rax+4]
      store_head(c);
      emit(c, {0x59});  // pop rcx
      restore_light(c);
      if (spec.kind == FlowKind::Return) {
        uint32_t imm = (f.len >= 3 && f.bytes[f.len - 3] == 0xc2) ? (f.bytes[f.len - 2] | f.bytes[f.len - 1] << 8) : 0;
        emit(c, {0x48, 0x8d, 0xa4, 0x24});  // lea rsp,[rsp+8+imm16]
        put32(c, 8 + imm);
      } else if (spec.kind == FlowKind::IndirectCall) {
        push_return(c, f);
      }
      // An indirect jmp through the cache (predicted per site, unlike a `ret` after a call
      // that was never a real call), to where the target's code runs: the target itself or
      // the translation of its block.
      emit(c, {0xff, 0x25});  // jmp [rip+cache+16]
      cache_refs.push_back(c.size());
      put32(c, 16);
      uint32_t miss_at = static_cast<uint32_t>(c.size());
      uint32_t rel = miss_at - static_cast<uint32_t>(jmp_miss + 4);
      std::memcpy(c.data() + jmp_miss, &rel, 4);
      emit(c, {0x59});  // pop rcx
      restore_light(c);
      save_heavy(c);
      // rcx = the target, computed from the program's registers (rax/rcx/rdx are still intact).
      if (spec.kind == FlowKind::Return) {
        emit(c, {0x48, 0x8b, 0x8c, 0x24});  // mov rcx,[rsp+frame]
        put32(c, kHeavyFrame);
      } else {
        Operand op = *f.operand;
        if (!emit_modrm(c, stub_addr + c.size(), 0x8b, 1, op)) return Error{ERANGE, "operand out of range"};
      }
      emit(c, {0x48, 0xba});  // movabs rdx, table
      put64(c, spec.table_addr);
      emit(c, {0x48, 0x69, 0xc1});  // imul rax, rcx, kHashMul
      put32(c, static_cast<uint32_t>(kHashMul));
      emit(c, {0x48, 0xc1, 0xe8, 0x10});  // shr rax, 16
      emit(c, {0x23, 0x42, 0xf8});        // and eax,[rdx-8]: the mask in use (the table grows)
      size_t probe = c.size();
      emit(c, {0x48, 0x39, 0x0c, 0xc2});        // cmp [rdx+rax*8], rcx
      emit(c, {0x74, 0x00});                    // je hit
      size_t je_hit = c.size() - 1;
      emit(c, {0x48, 0x83, 0x3c, 0xc2, 0x00});  // cmp qword [rdx+rax*8], 0
      emit(c, {0x74, 0x00});                    // je miss
      size_t je_miss = c.size() - 1;
      emit(c, {0xff, 0xc0});        // inc eax
      emit(c, {0x23, 0x42, 0xf8});  // and eax,[rdx-8]
      emit(c, {0xeb, static_cast<uint8_t>(static_cast<int8_t>(static_cast<int64_t>(probe) - static_cast<int64_t>(c.size() + 2)))});
      c[je_hit] = static_cast<uint8_t>(c.size() - (je_hit + 1));
      // hit: where the target's code runs (the target, or the translation of its block) goes
      // to gs:[8], the thread's own scratch word beside its ring head.
      emit(c, {0x48, 0x8b, 0x94, 0xc2});  // mov rdx,[rdx+rax*8+slots*8]
      put32(c, (spec.table_mask + 1) * 8);
      emit(c, {0x65, 0x48, 0x89, 0x14, 0x25, 8, 0, 0, 0});  // mov gs:[8],rdx
      // Then append {id|dynamic, target}; the target (the farther store) first, so a full ring
      // faults before anything of the entry is written.
      load_head(c);
      s.ring_stores.push_back(static_cast<uint32_t>(c.size()));
      emit(c, {0x48, 0x89, 0x48, 0x04});  // mov [rax+4], rcx
      emit(c, {0xc7, 0x00});              // mov dword [rax], id|dynamic
      put32(c, spec.edge_id | kDynamicEntry);
      emit(c, {0x48, 0x8d, 0x40, 0x0c});  // lea rax,[rax+12]
      store_head(c);
      restore_heavy(c);
      if (spec.kind == FlowKind::Return) {
        uint32_t imm = (f.len >= 3 && f.bytes[f.len - 3] == 0xc2) ? (f.bytes[f.len - 2] | f.bytes[f.len - 1] << 8) : 0;
        emit(c, {0x48, 0x8d, 0xa4, 0x24});  // lea rsp,[rsp+8+imm16]
        put32(c, 8 + imm);
      } else if (spec.kind == FlowKind::IndirectCall) {
        push_return(c, f);
      }
      emit(c, {0x65, 0xff, 0x24, 0x25, 8, 0, 0, 0});  // jmp gs:[8]
      if (c.size() - (je_miss + 1) > 127) return Error{ERANGE, "stub too long"};
      c[je_miss] = static_cast<uint8_t>(c.size() - (je_miss + 1));
      // miss: a target not known to be instrumented; the server takes over at the original
      // instruction (nothing of it has happened).
      restore_heavy(c);
      s.miss_int3 = static_cast<uint32_t>(c.size());
      c.push_back(0xcc);
      while (c.size() % 8) c.push_back(0xcc);
      s.cache = static_cast<uint32_t>(c.size());
      c.resize(c.size() + kCacheBytes, 0);
      for (size_t ref : cache_refs) {
        int32_t add;
        std::memcpy(&add, c.data() + ref, 4);  // 0: the target, 8: the edge id, 16: where to go
        int32_t d = static_cast<int32_t>(*s.cache + add) - static_cast<int32_t>(ref + 4);
        std::memcpy(c.data() + ref, &d, 4);
      }
      break;
    }
    default:
      return Error{EINVAL, "not a patchable control-flow instruction"};
  }
  return s;
}

namespace {

// The argument registers of the x86-64 syscall convention, by argument index.
constexpr int kArgRegs[6] = {7 /*rdi*/, 6 /*rsi*/, 2 /*rdx*/, 10 /*r10*/, 8 /*r8*/, 9 /*r9*/};

// `op modrm` with a gs:[off] operand (SIB 0x25: no base, no index, disp32).
void emit_gs(std::vector<uint8_t>& c, std::initializer_list<uint8_t> op_modrm, int32_t off) {
  c.push_back(0x65);
  c.insert(c.end(), op_modrm);
  c.push_back(0x25);
  put32(c, static_cast<uint32_t>(off));
}

}  // namespace

std::optional<SyscallOutput> buffered_syscall_output(uint64_t nr) {
  switch (nr) {
    case SYS_statx: return SyscallOutput{4, 256, -1};
    case SYS_newfstatat: return SyscallOutput{2, 144, -1};
    case SYS_stat: case SYS_lstat: case SYS_fstat: return SyscallOutput{1, 144, -1};
    case SYS_readlink: return SyscallOutput{1, 0, 2};
    case SYS_readlinkat: return SyscallOutput{2, 0, 3};
    case SYS_getxattr: case SYS_lgetxattr: case SYS_fgetxattr: return SyscallOutput{2, 0, 3};
    case SYS_access: case SYS_faccessat: case SYS_faccessat2: return SyscallOutput{};
    default: return std::nullopt;
  }
}

Result<Stub> build_syscall_stub(const SyscallStubSpec& spec, uint64_t stub_addr) {
  Stub s;
  auto& c = s.code;
  const SyscallOutput& out = spec.out;
  if (out.ptr_arg > 5 || out.size_arg > 5 || (out.ptr_arg >= 0 && !out.fixed && out.size_arg < 0))
    return Error{EINVAL, "bad output shape"};
  for (const Insn& d : spec.displaced) {
    auto r = relocate(d, stub_addr + c.size());
    if (!r) return Error{ERANGE, fmt::format("cannot relocate the instruction at {:#x}", d.addr)};
    s.exact.emplace_back(static_cast<uint32_t>(c.size()), d.addr);
    c.insert(c.end(), r->begin(), r->end());
  }
  s.exact.emplace_back(static_cast<uint32_t>(c.size()), spec.syscall_addr);
  if (spec.stop_only) {
    s.miss_int3 = static_cast<uint32_t>(c.size());
    c.push_back(0xcc);
    return s;
  }
  const uint64_t next = spec.syscall_addr + 2;
  // Below the red zone: the program's flags, rcx, rdi, rsi (the copy's registers).
  emit(c, {0x48, 0x8d, 0x64, 0x24, 0x80});  // lea rsp,[rsp-128]
  emit(c, {0x9c, 0x51, 0x57, 0x56});        // pushfq; push rcx; push rdi; push rsi
  // Room for the largest record this call can make, else the original `syscall`.
  emit_gs(c, {0x48, 0x8b, 0x0c}, kGsSyscallBufNext);  // mov rcx,gs:[next]
  uint32_t most = static_cast<uint32_t>(kSyscallRecordHeader + (out.fixed ? out.fixed : out.ptr_arg >= 0 ? kSyscallRecordMaxData : 0));
  emit(c, {0x48, 0x8d, 0x89});  // lea rcx,[rcx+most]
  put32(c, most);
  emit_gs(c, {0x48, 0x3b, 0x0c}, kGsSyscallBufEnd);  // cmp rcx,gs:[end]
  std::vector<size_t> to_slow;
  emit(c, {0x0f, 0x87});  // ja slow
  to_slow.push_back(c.size());
  put32(c, 0);
  if (out.ptr_arg >= 0 && !out.fixed) {
    int r = kArgRegs[out.size_arg];
    emit(c, {static_cast<uint8_t>(0x48 | (r >= 8 ? 1 : 0)), 0x81, static_cast<uint8_t>(0xf8 | (r & 7))});  // cmp reg,imm32
    put32(c, static_cast<uint32_t>(kSyscallRecordMaxData));
    emit(c, {0x0f, 0x87});  // ja slow (unsigned: a huge size too)
    to_slow.push_back(c.size());
    put32(c, 0);
  }
  emit(c, {0x0f, 0x05});  // syscall
  // rax holds the result; the argument registers are the call's (the kernel keeps them).
  emit_gs(c, {0x48, 0x8b, 0x0c}, kGsSyscallBufNext);  // mov rcx,gs:[next]
  emit(c, {0x48, 0xc7, 0x01});                        // mov qword [rcx],nr
  put32(c, static_cast<uint32_t>(spec.nr));
  emit(c, {0x48, 0x89, 0x79, 0x08, 0x48, 0x89, 0x71, 0x10, 0x48, 0x89, 0x51, 0x18});  // rdi, rsi, rdx
  emit(c, {0x4c, 0x89, 0x51, 0x20, 0x4c, 0x89, 0x41, 0x28, 0x4c, 0x89, 0x49, 0x30});  // r10, r8, r9
  emit(c, {0x48, 0x89, 0x41, 8 * kRecordResult});    // mov [rcx+56],rax
  emit_gs(c, {0x4c, 0x8b, 0x1c}, 0);                  // mov r11,gs:[0] (the ring head)
  emit(c, {0x4c, 0x89, 0x59, 8 * kRecordHead});      // mov [rcx+64],r11
  emit(c, {0x49, 0xbb});                              // mov r11,next
  put64(c, next);
  emit(c, {0x4c, 0x89, 0x59, 8 * kRecordPc});        // mov [rcx+80],r11
  emit(c, {0x48, 0xc7, 0x41, 0x58, 0, 0, 0, 0});      // mov qword [rcx+88],0
  emit(c, {0x45, 0x31, 0xdb});                        // xor r11d,r11d: the data's length
  if (out.ptr_arg >= 0) {
    emit(c, {0x48, 0x85, 0xc0});                      // test rax,rax
    if (out.fixed) {
      emit(c, {0x75, 0x06});                          // jnz +6
      emit(c, {0x41, 0xbb});                          // mov r11d,fixed
      put32(c, out.fixed);
    } else {
      emit(c, {0x7e, 0x03});                          // jle +3
      emit(c, {0x49, 0x89, 0xc3});                    // mov r11,rax
    }
  }
  emit(c, {0x4c, 0x89, 0x59, 8 * kRecordLength});    // mov [rcx+72],r11
  if (out.ptr_arg >= 0) {
    int r = kArgRegs[out.ptr_arg];
    if (r != 6)  // mov rsi,reg
      emit(c, {static_cast<uint8_t>(0x48 | (r >= 8 ? 4 : 0)), 0x89, static_cast<uint8_t>(0xc0 | ((r & 7) << 3) | 6)});
  }
  emit(c, {0x48, 0x8d, 0x79, static_cast<uint8_t>(kSyscallRecordHeader)});  // lea rdi,[rcx+96]
  if (out.ptr_arg >= 0) {
    emit(c, {0x4c, 0x89, 0xd9});                      // mov rcx,r11
    emit(c, {0xfc, 0xf3, 0xa4});                      // cld; rep movsb (the flags come back below)
  }
  emit(c, {0x48, 0x83, 0xc7, 0x07, 0x48, 0x83, 0xe7, 0xf8});  // add rdi,7; and rdi,-8
  emit_gs(c, {0x48, 0x89, 0x3c}, kGsSyscallBufNext);  // mov gs:[next],rdi
  emit(c, {0x5e, 0x5f, 0x59, 0x9d});                  // pop rsi; pop rdi; pop rcx; popfq
  emit(c, {0x9c, 0x41, 0x5b});                        // pushfq; pop r11: the flags, as the kernel leaves r11
  emit(c, {0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00});  // lea rsp,[rsp+128]
  emit(c, {0x48, 0xb9});                              // mov rcx,next: as the kernel leaves rcx
  put64(c, next);
  if (!jmp_to(s, stub_addr, next)) return Error{ERANGE, "the next instruction is out of reach"};
  // slow: everything back, then the int3 that stands for the original `syscall`.
  for (size_t at : to_slow) {
    int32_t rel = static_cast<int32_t>(c.size() - (at + 4));
    std::memcpy(c.data() + at, &rel, 4);
  }
  emit(c, {0x5e, 0x5f, 0x59, 0x9d});                  // pop rsi; pop rdi; pop rcx; popfq
  emit(c, {0x48, 0x8d, 0xa4, 0x24, 0x80, 0x00, 0x00, 0x00});  // lea rsp,[rsp+128]
  s.miss_int3 = static_cast<uint32_t>(c.size());
  c.push_back(0xcc);
  return s;
}

}  // namespace backend::patch
