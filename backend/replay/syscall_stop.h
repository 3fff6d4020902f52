// Whether a PTRACE_SYSCALL stop is a syscall's entry or its exit (PTRACE_GET_SYSCALL_INFO,
// Linux 5.3; before that the caller's own toggle decides).
#pragma once

#include <sys/types.h>

namespace backend::replay {

bool syscall_stop_is_entry(pid_t tid, bool was_in_syscall);

}  // namespace backend::replay
