// The general-purpose registers as the access decoder counts them: slots of a small table of
// offsets into user_regs_struct, and capstone's register names mapped onto them. Internal to
// backend/x86/ (access decoder), not part of its public interface.
#pragma once

#include <sys/user.h>

#include <capstone/capstone.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backend::access {

// Registers that can take part in an address, as slots of a small table of offsets into
// user_regs_struct (kRip is the address of the NEXT instruction: RIP-relative terms add the
// instruction length to their displacement when the recipe is built).
enum Slot : uint8_t {
  kRax, kRcx, kRdx, kRbx, kRsp, kRbp, kRsi, kRdi,
  kR8, kR9, kR10, kR11, kR12, kR13, kR14, kR15, kRip, kNoReg = 0xff
};

inline constexpr size_t kSlotOffset[] = {
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

inline uint64_t slot_value(const user_regs_struct& regs, uint8_t slot) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&regs) + kSlotOffset[slot], sizeof v);
  return v;
}

inline uint64_t& slot_ref(user_regs_struct& regs, uint8_t slot) {
  return *reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(&regs) + kSlotOffset[slot]);
}

// A general-purpose register as capstone names it: which slot, how wide, ah/ch/dh/bh.
struct GprRef {
  uint8_t slot = kNoReg;
  uint8_t width = 8;
  bool high8 = false;
};

GprRef gpr(x86_reg r);

// The register's bit in a set of slots (bit = slot); 0 for anything that is not one of the 16.
uint16_t slot_bit(x86_reg r);

constexpr uint16_t bit(uint8_t slot) { return static_cast<uint16_t>(1u << slot); }

}  // namespace backend::access
