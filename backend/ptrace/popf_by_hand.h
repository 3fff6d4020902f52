// Stepping a thread through code of our own (block patching's stubs, fast-tracepoint pads),
// which saves the flags with pushfq and restores them with popfq. Such a popfq must never be
// single-stepped: the kernel leaves the trap flag to an instruction that loads the flags, and
// the pushfq a debugger stepped earlier saved TF set, so the thread would trap after every
// instruction from then on. The stepper does the popfq itself instead.
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include "backend/ptrace/proc_memory.h"

namespace backend {

// When regs.rip (tid's, stopped) is at a popfq: pops the flags into eflags without the trap
// flag, moves rsp and rip on, writes regs back to the thread, and returns true. False when
// there is no popfq there or the thread could not be read or written (regs then unchanged).
bool popf_by_hand(pid_t tid, const ProcMemory& mem, user_regs_struct& regs);

}  // namespace backend
