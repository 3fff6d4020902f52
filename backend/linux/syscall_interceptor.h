// Replay's hook into a LinuxProcess (backend/replay/replayer.h implements it): while one is
// set, every system call of the program stops at its entry and at its exit (continues run
// under PTRACE_SYSCALL, and a step onto a syscall instruction too) and is offered here, and so
// is every signal. The process stays an ordinary inferior for the client otherwise.
#pragma once

#include <sys/types.h>

#include <span>
#include <string>

#include "backend/btrace/branch_tracer.h"
#include "backend/x86/nondeterministic.h"

namespace backend {

class SyscallInterceptor {
 public:
  virtual ~SyscallInterceptor() = default;
  // stop: the thread stops (the client sees SIGTRAP) and `message` goes to its console.
  struct Verdict {
    bool stop = false;
    std::string message;
    // Instead of a SIGTRAP: the syscall's emulated result changed memory a client write
    // watchpoint covers (that region's start); the debug registers never see such writes.
    uint64_t watch_addr = 0;
  };
  virtual Verdict syscall_entry(pid_t tid) = 0;
  // True while the program's system calls are emulated (a replay on its recorded path): the
  // kernel then writes nothing of the program's memory but for the calls it runs for real,
  // which the process sees at their entry stops (emulated watchpoints by page protection).
  virtual bool syscalls_emulated() const { return false; }
  virtual Verdict syscall_exit(pid_t tid) = 0;
  // The thread's execve loaded a new image: its exec event, before the image's first
  // instruction (the syscall's exit stop may not follow). stop: as above, instead of the exec.
  virtual Verdict exec_done(pid_t /*tid*/) { return {}; }
  // A signal-delivery stop: true when the interceptor consumed the signal (an emulated rdtsc);
  // otherwise the signal goes on as usual, and `message`, when set, to the client's console.
  virtual bool take_signal(pid_t tid, int signo, std::string* message) = 0;
  // An instruction whose result differs between runs (cpuid, rdrand, rdseed, rdpid) is about
  // to run at the thread's pc, its branch count exact: while an interceptor is set, every
  // engine stops before one (BlockCache ends a block there). emulated: the interceptor put
  // the result in the registers and moved the pc past it; stop: a divergence (the thread
  // stops with SIGTRAP, `message` to the client's console). Neither: the CPU runs it.
  struct InstructionVerdict {
    bool emulated = false;
    bool stop = false;
    std::string message;
  };
  virtual InstructionVerdict take_instruction(pid_t /*tid*/, const NondeterministicInsn& /*insn*/) { return {}; }
  // The process's branch tracer was made anew (configure(): the server's settings); the
  // interceptor starts what it counts on it again (replay's branch count, a coverage sink).
  virtual void tracer_replaced(BranchTracer& /*tracer*/) {}
  // An address where the thread must stop before executing the instruction there (0: none):
  // replay's recorded pc of a signal that arrived in the program's own code. The process keeps
  // an internal int3 there and calls at_watch_pc() at each hit, the thread's branch count
  // exact (the engine's plan committed up to the pc).
  virtual uint64_t watch_pc() const { return 0; }
  struct WatchVerdict {
    bool stop = false;         // a divergence: the thread stops (SIGTRAP), `message` to the console
    bool signal_sent = false;  // a signal is pending for the thread: resume it without executing pc
    std::string message;
    bool ran_it = false;       // the interceptor ran the instruction at pc itself: resume from the new pc
  };
  // `code`: the program's bytes at the pc (its own, not the int3 there).
  virtual WatchVerdict at_watch_pc(pid_t /*tid*/, std::span<const uint8_t> /*code*/) { return {}; }
  // While watch_pc() is set: how many taken branches tid has left before the count it must
  // reach pc at (1 when it is there or past it). Counting through block patching, the int3
  // goes in only when few are left: the thread's ring stops it short of the count before.
  virtual uint64_t branches_before_watch(pid_t /*tid*/) const { return 1; }
};

}  // namespace backend
