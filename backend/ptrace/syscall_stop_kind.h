// What kind of ptrace stop a thread is in, as PTRACE_GET_SYSCALL_INFO (Linux 5.3+) tells it:
// a system call's entry, its exit, or neither (a signal, an event, an older kernel).
#pragma once

#include <sys/ptrace.h>
#include <sys/types.h>

#include <cstdint>

namespace backend {

enum class SyscallStopKind { Other, Entry, Exit };

inline SyscallStopKind syscall_stop_kind(pid_t tid) {
  // The head of struct ptrace_syscall_info (<linux/ptrace.h> clashes with glibc's <sys/ptrace.h>).
  struct {
    uint8_t op;
    uint8_t pad[3];
    uint32_t arch;
    uint64_t rest[10];
  } info{};
  long n = ::ptrace(static_cast<__ptrace_request>(0x420e) /* PTRACE_GET_SYSCALL_INFO */, tid,
                    reinterpret_cast<void*>(sizeof info), &info);
  if (n <= 0) return SyscallStopKind::Other;
  return info.op == 1 ? SyscallStopKind::Entry : info.op == 2 ? SyscallStopKind::Exit : SyscallStopKind::Other;
}

}  // namespace backend
