// Sends a signal to one thread of a process (tgkill: kill() would let any thread take it).
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace backend {

// 0 when sent, -1 with errno set otherwise (ESRCH: the thread is gone).
inline int signal_thread(pid_t pid, pid_t tid, int sig) {
  return static_cast<int>(::syscall(SYS_tgkill, pid, tid, sig));
}

}  // namespace backend
