// A digest of a thread's general registers, kept with a signal that arrived in the program's
// own code: replay delivers it where branch count, pc and this digest all match (a pc and count
// alone do not tell the iterations of a `rep movs` apart). The flags keep only the arithmetic
// ones and DF: RF and TF belong to the debugger, not the program.
#pragma once

#include <sys/user.h>

#include <cstdint>

#include "backend/replay/trace_format.h"

namespace backend::replay {

inline uint64_t register_digest(const user_regs_struct& r) {
  constexpr uint64_t kProgramFlags = 0xcd5;  // CF PF AF ZF SF DF OF
  const uint64_t words[] = {r.rax, r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rsp, r.r8,
                            r.r9,  r.r10, r.r11, r.r12, r.r13, r.r14, r.r15, r.rip, r.eflags & kProgramFlags};
  return fnv1a64(words, sizeof words);
}

}  // namespace backend::replay
