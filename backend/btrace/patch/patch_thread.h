// What the patch source needs of one stopped thread, and all it sees of it: the caller (the
// engine) builds one from its LinuxThread for each call, so btrace/ never depends on linux/.
#pragma once

#include <sys/types.h>

#include "backend/btrace/branch_cursor.h"

namespace backend {

struct PatchThread {
  pid_t tid = 0;
  BranchCursor& cursor;     // the thread's own: follows the last branch drained from its ring
  bool in_syscall = false;  // between a caught syscall's entry and exit stops
  // At a syscall stop: its number as the process engine read it (-1: unknown); kNrUnread:
  // not read, the tracer reads orig_rax itself.
  static constexpr int kNrUnread = -2;
  int syscall_nr = kNrUnread;
};

}  // namespace backend
