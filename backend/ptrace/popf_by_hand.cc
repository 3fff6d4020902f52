#include "backend/ptrace/popf_by_hand.h"

#include <sys/ptrace.h>

#include <cstdint>
#include <span>

namespace backend {

bool popf_by_hand(pid_t tid, const ProcMemory& mem, user_regs_struct& regs) {
  constexpr uint8_t kPopf = 0x9d;
  constexpr uint64_t kTrapFlag = 0x100, kReservedOne = 0x2;
  uint8_t op = 0;
  if (auto n = mem.read(regs.rip, std::span<uint8_t>(&op, 1)); !n || *n != 1 || op != kPopf) return false;
  uint64_t flags = 0;
  auto f = mem.read(regs.rsp, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&flags), sizeof flags));
  if (!f || *f != sizeof flags) return false;
  user_regs_struct next = regs;
  next.eflags = (flags & ~kTrapFlag) | kReservedOne;
  next.rsp += 8;
  next.rip += 1;
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &next) != 0) return false;
  regs = next;
  return true;
}

}  // namespace backend
