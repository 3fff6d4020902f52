// emulate_flow: executes one near control-flow instruction on a register file.
//
// The operand forms of the handful of instructions we emulate (jcc, jmp/call rel and r/m, ret,
// loop family) are decoded here from the raw bytes: it is a few dozen lines, needs no
// disassembler handle (so no shared state), and keeps the emulator exact about prefixes
// (0x66/0x67/segment/notrack/bnd) whose meaning matters for the result.
#include "backend/x86/flow_emulator.h"

#include <fmt/format.h>

#include <cstring>

namespace backend {

namespace {

// x86 register encoding (rax rcx rdx rbx rsp rbp rsi rdi r8..r15) -> GDB register number.
constexpr int kGdbRegOfEncoding[16] = {0, 2, 3, 1, 7, 6, 4, 5, 8, 9, 10, 11, 12, 13, 14, 15};
constexpr int kRcx = 2;

// EFLAGS bits.
constexpr uint64_t kCF = 1u << 0, kPF = 1u << 2, kZF = 1u << 6, kSF = 1u << 7, kOF = 1u << 11;

struct Prefixes {
  bool opsize = false;    // 0x66
  bool addrsize = false;  // 0x67
  int segment = 0;        // 0x64 fs / 0x65 gs (others are ignored in 64-bit mode)
  uint8_t rex = 0;
  size_t opcode_at = 0;   // index of the first opcode byte
};

Prefixes parse_prefixes(const FlowInsn& insn) {
  Prefixes p;
  size_t i = 0;
  for (; i < insn.len; ++i) {
    uint8_t b = insn.bytes[i];
    if (b == 0x66) p.opsize = true;
    else if (b == 0x67) p.addrsize = true;
    else if (b == 0x64 || b == 0x65) p.segment = b;
    else if (b == 0x26 || b == 0x2e || b == 0x36 || b == 0x3e || b == 0xf0 || b == 0xf2 || b == 0xf3)
      continue;  // es/cs/ss/ds (3e = notrack), lock, bnd/rep: no effect on a near branch
    else break;
  }
  if (i < insn.len && (insn.bytes[i] & 0xf0) == 0x40) p.rex = insn.bytes[i++];
  p.opcode_at = i;
  return p;
}

bool condition_holds(unsigned cc, uint64_t fl) {
  bool cf = fl & kCF, pf = fl & kPF, zf = fl & kZF, sf = fl & kSF, of = fl & kOF;
  bool r = false;
  switch (cc >> 1) {
    case 0: r = of; break;               // jo / jno
    case 1: r = cf; break;               // jb / jae
    case 2: r = zf; break;               // je / jne
    case 3: r = cf || zf; break;         // jbe / ja
    case 4: r = sf; break;               // js / jns
    case 5: r = pf; break;               // jp / jnp
    case 6: r = sf != of; break;         // jl / jge
    case 7: r = zf || (sf != of); break; // jle / jg
  }
  return (cc & 1) ? !r : r;
}

Error unsupported(const FlowInsn& insn, const char* why) {
  return Error{ENOTSUP, fmt::format("Cannot emulate the instruction at 0x{:x}: {}.", insn.addr, why)};
}

class Emulator {
 public:
  Emulator(const FlowInsn& insn, RegisterFile& regs, const RegisterLayout& layout,
           const MemoryReader& read, const MemoryWriter& write)
      : insn_(insn), regs_(regs), layout_(layout), read_(read), write_(write) {}

  Result<FlowOutcome> run() {
    if (insn_.len == 0 || insn_.len > 15) return unsupported(insn_, "unknown instruction length");
    p_ = parse_prefixes(insn_);
    if (p_.opcode_at >= insn_.len) return unsupported(insn_, "no opcode");
    // 0x66 without REX.W on a near branch: Intel ignores it, AMD truncates rip to 16 bits.
    // Let the CPU decide.
    if (p_.opsize && !(p_.rex & 0x08)) return unsupported(insn_, "operand-size prefix on a branch");
    next_ = insn_.addr + insn_.len;
    switch (insn_.kind) {
      case FlowKind::Jump:
        if (!insn_.direct_target) return unsupported(insn_, "jump without target");
        return go(*insn_.direct_target, true);
      case FlowKind::Call: {
        if (!insn_.direct_target) return unsupported(insn_, "call without target");
        if (auto r = push(next_); !r) return r.error();
        return go(*insn_.direct_target, true);
      }
      case FlowKind::CondJump: return cond_jump();
      case FlowKind::Loop: return loop();
      case FlowKind::Return: return ret();
      case FlowKind::IndirectJump:
      case FlowKind::IndirectCall: return indirect();
      case FlowKind::Syscall: return unsupported(insn_, "system call");
      case FlowKind::Trap: return unsupported(insn_, "trapping instruction");
    }
    return unsupported(insn_, "unknown kind");
  }

 private:
  uint64_t reg(int gdb_regno) const { return regs_.get_u64(layout_, gdb_regno); }
  void set_reg(int gdb_regno, uint64_t v) { regs_.set_u64(layout_, gdb_regno, v); }
  uint8_t byte(size_t i) const { return i < insn_.len ? insn_.bytes[i] : 0; }

  Result<FlowOutcome> go(uint64_t target, bool taken) {
    set_reg(RegisterLayout::kRip, taken ? target : next_);
    return FlowOutcome{taken ? target : next_, taken};
  }

  Result<void> push(uint64_t value) {
    uint64_t sp = reg(RegisterLayout::kRsp) - 8;
    uint8_t raw[8];
    std::memcpy(raw, &value, 8);
    if (!write_(sp, std::span<const uint8_t>(raw, 8)))
      return Error{EFAULT, fmt::format("Cannot write the return address at 0x{:x}.", sp)};
    set_reg(RegisterLayout::kRsp, sp);
    return {};
  }

  Result<uint64_t> load64(uint64_t addr) {
    uint8_t raw[8];
    if (!read_(addr, std::span<uint8_t>(raw, 8)))
      return Error{EFAULT, fmt::format("Cannot read the branch target at 0x{:x}.", addr)};
    uint64_t v;
    std::memcpy(&v, raw, 8);
    return v;
  }

  Result<FlowOutcome> cond_jump() {
    uint8_t op = byte(p_.opcode_at);
    unsigned cc;
    if ((op & 0xf0) == 0x70) cc = op & 0x0f;
    else if (op == 0x0f && (byte(p_.opcode_at + 1) & 0xf0) == 0x80) cc = byte(p_.opcode_at + 1) & 0x0f;
    else return unsupported(insn_, "unknown conditional jump encoding");
    if (!insn_.direct_target) return unsupported(insn_, "jump without target");
    return go(*insn_.direct_target, condition_holds(cc, reg(RegisterLayout::kEflags)));
  }

  Result<FlowOutcome> loop() {
    uint8_t op = byte(p_.opcode_at);
    if (op < 0xe0 || op > 0xe3 || !insn_.direct_target) return unsupported(insn_, "unknown loop encoding");
    // 0x67 selects ecx as the counter; a 32-bit write zero-extends into rcx.
    uint64_t mask = p_.addrsize ? 0xffffffffull : ~0ull;
    uint64_t count = reg(kRcx) & mask;
    bool zf = reg(RegisterLayout::kEflags) & kZF;
    bool taken;
    if (op == 0xe3) {
      taken = count == 0;  // jrcxz / jecxz: no decrement
    } else {
      count = (count - 1) & mask;
      set_reg(kRcx, count);
      taken = count != 0;
      if (op == 0xe1) taken = taken && zf;   // loope
      if (op == 0xe0) taken = taken && !zf;  // loopne
    }
    return go(*insn_.direct_target, taken);
  }

  Result<FlowOutcome> ret() {
    uint8_t op = byte(p_.opcode_at);
    uint64_t pop = 8;
    if (op == 0xc2) pop += static_cast<uint64_t>(byte(p_.opcode_at + 1)) | (uint64_t(byte(p_.opcode_at + 2)) << 8);
    else if (op != 0xc3) return unsupported(insn_, "unknown return encoding");
    uint64_t sp = reg(RegisterLayout::kRsp);
    auto target = load64(sp);
    if (!target) return target.error();
    set_reg(RegisterLayout::kRsp, sp + pop);
    return go(*target, true);
  }

  Result<FlowOutcome> indirect() {
    size_t i = p_.opcode_at;
    if (byte(i) != 0xff) return unsupported(insn_, "unknown indirect branch encoding");
    uint8_t modrm = byte(i + 1);
    unsigned mod = modrm >> 6, regop = (modrm >> 3) & 7, rm = modrm & 7;
    bool is_call = regop == 2;
    if (regop != 2 && regop != 4) return unsupported(insn_, "far indirect branch");
    bool rex_b = p_.rex & 1, rex_x = p_.rex & 2;
    uint64_t target;
    if (mod == 3) {
      target = reg(kGdbRegOfEncoding[rm | (rex_b ? 8 : 0)]);
    } else {
      size_t at = i + 2;  // after modrm
      uint64_t ea = 0;
      bool has_sib = rm == 4;
      if (has_sib) {
        uint8_t sib = byte(at++);
        unsigned scale = sib >> 6, index = ((sib >> 3) & 7) | (rex_x ? 8 : 0), base = sib & 7;
        if (index != 4) ea += reg(kGdbRegOfEncoding[index]) << scale;  // index 4 (no REX.X) = none
        if (base == 5 && mod == 0) {
          ea += static_cast<uint64_t>(static_cast<int64_t>(disp32(at)));
          at += 4;
        } else {
          ea += reg(kGdbRegOfEncoding[base | (rex_b ? 8 : 0)]);
        }
      } else if (rm == 5 && mod == 0) {
        ea = next_ + static_cast<uint64_t>(static_cast<int64_t>(disp32(at)));  // rip-relative
        at += 4;
      } else {
        ea = reg(kGdbRegOfEncoding[rm | (rex_b ? 8 : 0)]);
      }
      if (mod == 1) ea += static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(byte(at))));
      else if (mod == 2) ea += static_cast<uint64_t>(static_cast<int64_t>(disp32(at)));
      if (p_.addrsize) ea &= 0xffffffffull;
      if (p_.segment) {
        auto base_reg = layout_.find(p_.segment == 0x64 ? "fs_base" : "gs_base");
        if (!base_reg) return unsupported(insn_, "no fs_base/gs_base register");
        ea += reg(*base_reg);
      }
      auto loaded = load64(ea);
      if (!loaded) return loaded.error();
      target = *loaded;
    }
    if (is_call) {
      if (auto r = push(next_); !r) return r.error();
    }
    return go(target, true);
  }

  int32_t disp32(size_t at) const {
    uint32_t v = uint32_t(byte(at)) | uint32_t(byte(at + 1)) << 8 | uint32_t(byte(at + 2)) << 16 |
                 uint32_t(byte(at + 3)) << 24;
    return static_cast<int32_t>(v);
  }

  const FlowInsn& insn_;
  RegisterFile& regs_;
  const RegisterLayout& layout_;
  const MemoryReader& read_;
  const MemoryWriter& write_;
  Prefixes p_;
  uint64_t next_ = 0;
};

}  // namespace

Result<FlowOutcome> emulate_flow(const FlowInsn& insn, RegisterFile& regs, const RegisterLayout& layout,
                                 const MemoryReader& read, const MemoryWriter& write) {
  return Emulator(insn, regs, layout, read, write).run();
}

}  // namespace backend
