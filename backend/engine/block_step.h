// The bookkeeping of one PTRACE_SINGLEBLOCK step, as a pure decision: given where the step
// began and what the thread's next stop looks like, did the thread take a branch, and which?
//
// Linux (arch/x86/kernel/step.c, kernel/entry) does more than "stop after the next taken
// branch", and each case below was seen on a real kernel (recorded stop sequences in
// tests/unit/backend/test_block_step.cc):
//  * a step trap (#DB): si_code TRAP_TRACE, DR6.BS set. With BTF armed it comes after the first
//    taken branch, at its target;
//  * every system call ends the step at its exit: si_code TRAP_BRKPT, DR6 untouched, pc after
//    the `syscall` (or wherever rt_sigreturn went). No branch was taken;
//  * a signal handler entered while stepping: si_code SIGTRAP (ptrace_notify), pc = handler;
//  * the kernel does NOT arm BTF (plain single step) when the instruction at the start is
//    popf/iret (is_setting_trap_flag) or when the program set EFLAGS.TF itself; the stop then
//    comes after exactly one instruction, branch or not;
//  * a jmp/call to the very next instruction is a taken branch for the CPU, but not for
//    stepbranch (the software mechanism cannot tell it from straight-line code).
// The branch source is never guessed: it is the first control-flow instruction on the
// straight-line path from the start whose outcome can produce the stop pc, and it is checked
// against the stack where a call or ret leaves evidence. A stop that fits none of this is
// Untrusted: the engine must not record a branch for it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "backend/x86/block_cache.h"

namespace backend {

// The thread when the engine resumed it with PTRACE_SINGLEBLOCK.
struct BlockStepStart {
  uint64_t pc = 0;
  uint64_t eflags = 0;  // as PTRACE_GETREGS shows it: the kernel hides a TF that ptrace set
};

// The thread's next stop.
struct BlockStepStop {
  int signo = 0;    // WSTOPSIG
  int si_code = 0;  // PTRACE_GETSIGINFO .si_code (0 when unknown)
  uint64_t pc = 0;
  uint64_t rsp = 0;
  // u_debugreg[6] at the stop, when the engine wrote 0 there before resuming (a syscall exit
  // report leaves it 0; a step trap sets BS). nullopt: not read.
  std::optional<uint64_t> dr6;
};

enum class BlockStepResult {
  Branch,     // a taken branch from -> to; record it
  NoBranch,   // a stop of the stepping machinery without a branch (syscall exit, handler entry,
              // a single step that fell through, a jmp to the next instruction): step again
  NotAStep,   // not the step's stop (a signal, an int3, a hardware breakpoint): report it as is
  Untrusted,  // a step stop that fits no path from the start: branches were missed (the program
              // changed TF, code changed under us); record nothing, step on in software
};

struct BlockStepVerdict {
  BlockStepResult result = BlockStepResult::Untrusted;
  uint64_t from = 0, to = 0;  // Branch
  std::string why;            // what was decided and why (logs, tests)
};

// Reads one 8-byte word of the thread's memory (the stack); false when unreadable.
using WordReader = std::function<bool(uint64_t addr, uint64_t* value)>;

// True when Linux will single-step instead of block-step from `start` (see above).
// `bytes` reads original code (breakpoint shadows hidden), as BlockCache's reader does.
bool kernel_single_steps(const BlockStepStart& start, const CodeReader& bytes);

// `code` decodes the straight-line path from start.pc; `memory` (optional) checks the return
// address a call pushed or a ret popped.
BlockStepVerdict classify_block_step(const BlockStepStart& start, const BlockStepStop& stop,
                                     BlockCache& code, const CodeReader& bytes,
                                     const WordReader& memory = {});

// si_code values (asm-generic/siginfo.h) and DR6 bits used above.
inline constexpr int kTrapBrkpt = 1, kTrapTrace = 2, kTrapHwBkpt = 4, kSiKernel = 0x80;
inline constexpr uint64_t kDr6SingleStep = 1u << 14;  // DR6.BS

}  // namespace backend
