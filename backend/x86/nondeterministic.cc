#include "backend/x86/nondeterministic.h"

#include <cpuid.h>
#include <x86intrin.h>

namespace backend {

namespace {

bool legacy_prefix(uint8_t b) {
  switch (b) {
    case 0x66: case 0x67: case 0xf0: case 0xf2: case 0xf3:
    case 0x2e: case 0x36: case 0x3e: case 0x26: case 0x64: case 0x65:
      return true;
    default:
      return false;
  }
}

unsigned long long& gpr(user_regs_struct& r, uint8_t n) {
  switch (n) {
    case 0: return r.rax;
    case 1: return r.rcx;
    case 2: return r.rdx;
    case 3: return r.rbx;
    case 4: return r.rsp;
    case 5: return r.rbp;
    case 6: return r.rsi;
    case 7: return r.rdi;
    case 8: return r.r8;
    case 9: return r.r9;
    case 10: return r.r10;
    case 11: return r.r11;
    case 12: return r.r12;
    case 13: return r.r13;
    case 14: return r.r14;
    default: return r.r15;
  }
}

bool has_feature(unsigned leaf, int reg_index, unsigned bit) {
  unsigned r[4] = {};
  if (static_cast<unsigned>(__get_cpuid_max(leaf & 0x80000000u, nullptr)) < leaf) return false;
  __cpuid_count(leaf, 0, r[0], r[1], r[2], r[3]);
  return (r[reg_index] >> bit) & 1;
}

}  // namespace

std::optional<NondeterministicInsn> nondeterministic_insn(std::span<const uint8_t> code) {
  size_t at = 0;
  bool opsize = false, rep = false, repne = false, lock = false;
  uint8_t rex = 0;  // counts only right before the opcode (the CPU ignores an earlier one)
  for (; at < code.size() && at < 13; ++at) {
    uint8_t b = code[at];
    if ((b & 0xf0) == 0x40) {
      rex = b;
      continue;
    }
    if (!legacy_prefix(b)) break;
    rex = 0;
    opsize |= b == 0x66;
    rep |= b == 0xf3;
    repne |= b == 0xf2;
    lock |= b == 0xf0;
  }
  if (at + 2 > code.size() || code[at] != 0x0f || lock) return std::nullopt;
  NondeterministicInsn insn;
  if (code[at + 1] == 0x31) {
    insn.kind = NondeterministicInsn::Kind::Rdtsc;
    insn.len = static_cast<uint8_t>(at + 2);
    return insn;
  }
  if (code[at + 1] == 0x01) {  // rdtscp is 0f 01 f9; the rest of 0f 01 is system instructions
    if (at + 3 > code.size() || code[at + 2] != 0xf9) return std::nullopt;
    insn.kind = NondeterministicInsn::Kind::Rdtscp;
    insn.len = static_cast<uint8_t>(at + 3);
    return insn;
  }
  if (code[at + 1] == 0xa2) {
    insn.kind = NondeterministicInsn::Kind::Cpuid;
    insn.len = static_cast<uint8_t>(at + 2);
    return insn;
  }
  if (code[at + 1] != 0xc7 || at + 3 > code.size() || repne) return std::nullopt;
  uint8_t modrm = code[at + 2];
  unsigned mod = modrm >> 6, op = (modrm >> 3) & 7;
  if (mod != 3 || (op != 6 && op != 7)) return std::nullopt;  // cmpxchg8b/16b, vmptrld... (memory forms)
  insn.reg = static_cast<uint8_t>((modrm & 7) | ((rex & 1) << 3));
  insn.len = static_cast<uint8_t>(at + 3);
  if (rep) {
    if (op != 7) return std::nullopt;  // f3 0f c7 /6 is senduipi
    insn.kind = NondeterministicInsn::Kind::Rdpid;
    insn.size = 8;
    return insn;
  }
  insn.kind = op == 6 ? NondeterministicInsn::Kind::Rdrand : NondeterministicInsn::Kind::Rdseed;
  insn.size = (rex & 8) ? 8 : opsize ? 2 : 4;
  return insn;
}

std::optional<NondeterministicResult> execute_here(const NondeterministicInsn& insn, const user_regs_struct& regs) {
  NondeterministicResult out;
  switch (insn.kind) {
    case NondeterministicInsn::Kind::Cpuid: {
      unsigned a = 0, b = 0, c = 0, d = 0;
      __cpuid_count(static_cast<unsigned>(regs.rax), static_cast<unsigned>(regs.rcx), a, b, c, d);
      out.value[0] = a;
      out.value[1] = b;
      out.value[2] = c;
      out.value[3] = d;
      return out;
    }
    case NondeterministicInsn::Kind::Rdrand:
    case NondeterministicInsn::Kind::Rdseed: {
      bool seed = insn.kind == NondeterministicInsn::Kind::Rdseed;
      if (seed ? !has_feature(7, 1, 18) : !has_feature(1, 2, 30)) return std::nullopt;
      unsigned long long v = 0;
      unsigned char ok = 0;
      if (seed) asm volatile("rdseed %0; setc %1" : "=r"(v), "=qm"(ok) : : "cc");
      else asm volatile("rdrand %0; setc %1" : "=r"(v), "=qm"(ok) : : "cc");
      out.value[0] = v;
      out.value[1] = ok;
      return out;
    }
    case NondeterministicInsn::Kind::Rdtsc:
      out.value[0] = __rdtsc();
      return out;
    case NondeterministicInsn::Kind::Rdtscp: {
      if (!has_feature(0x80000001, 3, 27)) return std::nullopt;
      unsigned aux = 0;
      out.value[0] = __rdtscp(&aux);
      out.value[2] = aux;
      return out;
    }
    case NondeterministicInsn::Kind::Rdpid: {
      if (!has_feature(7, 2, 22)) return std::nullopt;
      unsigned long long v = 0;
      asm volatile("rdpid %0" : "=r"(v));
      out.value[0] = v;
      return out;
    }
  }
  return std::nullopt;
}

void apply_result(const NondeterministicInsn& insn, const NondeterministicResult& result, user_regs_struct& regs) {
  regs.rip += insn.len;
  if (insn.kind == NondeterministicInsn::Kind::Cpuid) {
    regs.rax = result.value[0] & 0xffffffffu;
    regs.rbx = result.value[1] & 0xffffffffu;
    regs.rcx = result.value[2] & 0xffffffffu;
    regs.rdx = result.value[3] & 0xffffffffu;
    return;
  }
  if (is_tsc(insn)) {
    regs.rax = result.value[0] & 0xffffffffu;
    regs.rdx = result.value[0] >> 32;
    if (insn.kind == NondeterministicInsn::Kind::Rdtscp) regs.rcx = result.value[2] & 0xffffffffu;
    return;
  }
  unsigned long long& dest = gpr(regs, insn.reg);
  if (insn.size == 8) dest = result.value[0];
  else if (insn.size == 4) dest = result.value[0] & 0xffffffffu;
  else dest = (dest & ~0xffffULL) | (result.value[0] & 0xffffu);
  if (insn.kind == NondeterministicInsn::Kind::Rdpid) return;  // no flags
  constexpr unsigned long long kCF = 1, kPF = 1 << 2, kAF = 1 << 4, kZF = 1 << 6, kSF = 1 << 7, kOF = 1 << 11;
  regs.eflags &= ~(kCF | kPF | kAF | kZF | kSF | kOF);
  if (result.value[1]) regs.eflags |= kCF;
}

uint64_t input_of(const NondeterministicInsn& insn, const user_regs_struct& regs) {
  if (insn.kind == NondeterministicInsn::Kind::Cpuid) return (regs.rax & 0xffffffffu) | ((regs.rcx & 0xffffffffu) << 32);
  if (is_tsc(insn)) return 0;
  return insn.reg | (uint64_t{insn.size} << 8);
}

const char* kind_name(NondeterministicInsn::Kind kind) {
  switch (kind) {
    case NondeterministicInsn::Kind::Cpuid: return "cpuid";
    case NondeterministicInsn::Kind::Rdrand: return "rdrand";
    case NondeterministicInsn::Kind::Rdseed: return "rdseed";
    case NondeterministicInsn::Kind::Rdpid: return "rdpid";
    case NondeterministicInsn::Kind::Rdtsc: return "rdtsc";
    case NondeterministicInsn::Kind::Rdtscp: return "rdtscp";
  }
  return "?";
}

}  // namespace backend
