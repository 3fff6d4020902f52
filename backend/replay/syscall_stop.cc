#include "backend/replay/syscall_stop.h"

#include <sys/ptrace.h>

#include <cstdint>

namespace backend::replay {

bool syscall_stop_is_entry(pid_t tid, bool was_in_syscall) {
  // The head of struct ptrace_syscall_info (<linux/ptrace.h> clashes with glibc's).
  struct {
    uint8_t op;
    uint8_t pad[3];
    uint32_t arch;
    uint64_t rest[10];
  } info{};
  long n = ::ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info);
  if (n > 0 && (info.op == 1 || info.op == 2)) return info.op == 1;
  return !was_in_syscall;
}

}  // namespace backend::replay
