// What kind of ptrace stop a thread is in, as PTRACE_GET_SYSCALL_INFO (Linux 5.3+) tells it:
// a system call's entry, its exit, or neither (a signal, an event, an older kernel).
#pragma once

#include <sys/ptrace.h>
#include <sys/types.h>

#include <cstdint>

namespace backend {

// struct ptrace_syscall_info (<linux/ptrace.h> clashes with glibc's <sys/ptrace.h>).
struct SyscallInfo {
  uint8_t op;  // kSyscallInfoEntry, kSyscallInfoExit, or another stop
  uint8_t pad[3];
  uint32_t arch;
  uint64_t instruction_pointer;
  uint64_t stack_pointer;
  union {
    struct { uint64_t nr; uint64_t args[6]; } entry;
    struct { int64_t rval; uint8_t is_error; } exit;
  };
};
constexpr uint8_t kSyscallInfoEntry = 1, kSyscallInfoExit = 2;

// PTRACE_GET_SYSCALL_INFO of a stopped thread: the bytes the kernel filled (<= 0: none).
inline long read_syscall_info(pid_t tid, SyscallInfo& info) {
  info = SyscallInfo{};
  return ::ptrace(static_cast<__ptrace_request>(0x420e) /* PTRACE_GET_SYSCALL_INFO */, tid,
                  reinterpret_cast<void*>(sizeof info), &info);
}

enum class SyscallStopKind { Other, Entry, Exit };

inline SyscallStopKind syscall_stop_kind(pid_t tid) {
  SyscallInfo info;
  if (read_syscall_info(tid, info) <= 0) return SyscallStopKind::Other;
  return info.op == kSyscallInfoEntry ? SyscallStopKind::Entry
         : info.op == kSyscallInfoExit ? SyscallStopKind::Exit
                                       : SyscallStopKind::Other;
}

}  // namespace backend
