#include "backend/replay/syscall_stop.h"

#include "backend/ptrace/syscall_stop_kind.h"

namespace backend::replay {

bool syscall_stop_is_entry(pid_t tid, bool was_in_syscall) {
  SyscallStopKind kind = syscall_stop_kind(tid);
  if (kind != SyscallStopKind::Other) return kind == SyscallStopKind::Entry;
  return !was_in_syscall;
}

}  // namespace backend::replay
