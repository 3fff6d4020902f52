// Syscall stops of LinuxProcess: QCatchSyscalls, the PTRACE_SYSCALL entry and exit stops, a
// traced thread's syscall instruction that ends at its exit stop; and record/replay's other
// interceptions of the program's own instructions (cpuid, rdrand...: take_nondeterministic).
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include <cerrno>
#include <cstddef>
#include <utility>

#include "backend/linux/linux_process.h"

namespace backend {

namespace {

// struct ptrace_syscall_info of <linux/ptrace.h> (which cannot be included next to glibc's
// <sys/ptrace.h>); PTRACE_GET_SYSCALL_INFO fills it since Linux 5.3.
struct SyscallInfo {
  uint8_t op;
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

}  // namespace

void LinuxProcess::set_catch_syscalls(bool on, std::set<int> syscalls) {
  catch_syscalls_ = on;
  caught_syscalls_ = on ? std::move(syscalls) : std::set<int>{};
}

bool LinuxProcess::at_syscall(pid_t tid) {
  auto insn = code_cache_.insn_at(get_pc(tid));
  return insn && insn->second && insn->second->kind == FlowKind::Syscall;
}

void LinuxProcess::finish_syscall_flow(LinuxThread& t) {
  FlowInsn insn = *t.syscall_flow;
  t.syscall_flow.reset();
  uint64_t pc = get_pc(t.tid);
  // Elsewhere than after the instruction: rt_sigreturn, or a handler entered at syscall exit.
  stepper_.flow_done(t, insn, FlowOutcome{pc, insn.len != 0 && pc != insn.addr + insn.len});
}

void LinuxProcess::handle_syscall_stop(LinuxThread& t) {
  // Entry or exit? The kernel says so since 5.3; before that, alternate (a step from an
  // entry stop ends the syscall without an exit stop, so the toggle is only a fallback).
  SyscallInfo info{};
  long n = ::ptrace(PTRACE_GET_SYSCALL_INFO, t.tid, reinterpret_cast<void*>(sizeof info), &info);
  bool entry = n > 0 ? info.op == kSyscallInfoEntry : !t.in_syscall;
  bool known = n <= 0 || info.op == kSyscallInfoEntry || info.op == kSyscallInfoExit;
  if (entry && n > 0) {
    t.syscall_nr = static_cast<int>(info.entry.nr);
  } else {
    // orig_rax holds the number at any syscall stop: the entry of an old kernel, and the exit
    // of a syscall whose entry we did not see (entered before syscalls were caught, or an
    // execve that rebuilt our thread state).
    errno = 0;
    long nr = ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
    t.syscall_nr = errno ? (entry ? -1 : t.syscall_nr) : static_cast<int>(nr);
  }
  t.in_syscall = entry;
  if (entry && t.lifted_step && !t.signal_entry && t.lifted_step->insn.kind == FlowKind::Syscall) {
    // The lifted syscall instruction has run up to its entry: our int3 goes back now (as after
    // a lifted step); the exit stop records it.
    if (t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
    t.syscall_flow = t.lifted_step->insn;
    t.lifted_step.reset();
  }
  bool finished_flow = !entry && t.syscall_flow;
  if (finished_flow) finish_syscall_flow(t);
  if (!entry && t.watch_step) {  // the checked step over a syscall instruction ends here
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  if (interceptor_ && known) {
    auto verdict = entry ? interceptor_->syscall_entry(t.tid) : interceptor_->syscall_exit(t.tid);
    sync_interceptor_watch();
    if (verdict.stop) {
      console_output_ += verdict.message;
      if (verdict.watch_addr) return report(t, watch_event(t.tid, WatchHit{HwKind::Write, verdict.watch_addr}));
      t.last_signal = SIGTRAP;
      return report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
    }
  }
  int nr = t.syscall_nr;
  bool wanted = known && catch_syscalls_ && nr >= 0 && (caught_syscalls_.empty() || caught_syscalls_.count(nr));
  if (!wanted) {
    if (stopping()) return;
    // A traced thread plans its next block; under replay a step that ran into the syscall
    // ends (or goes on) here.
    if (finished_flow || (interceptor_ && !entry)) return proceed(t);
    resume_thread(t, 0);
    return;
  }
  StopEvent ev = make_event(entry ? StopKind::SyscallEntry : StopKind::SyscallReturn, t.tid, SIGTRAP);
  ev.syscall_no = nr;
  report(t, ev);
}

// The thread is about to execute the instruction at its pc (every engine stops before such an
// instruction while an interceptor is set: BlockCache ends a block there). One whose result
// differs between runs goes to the interceptor, which records or gives back that result.
BranchStepper::Host::Taken LinuxProcess::take_nondeterministic(LinuxThread& t) {
  if (!interceptor_) return Taken::No;
  uint64_t pc = get_pc(t.tid);
  uint8_t code[16] = {};
  size_t n = code_cache_.reader()(pc, code);
  auto insn = nondeterministic_insn(std::span<const uint8_t>(code, n));
  if (!insn) return Taken::No;
  if (t.in<run::Traced>()) stepper_.commit_plan(t, pc);  // the count, exact at pc
  auto verdict = interceptor_->take_instruction(t.tid, *insn);
  sync_interceptor_watch();
  if (verdict.stop) {
    console_output_ += verdict.message;
    t.last_signal = SIGTRAP;
    report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
    return Taken::Stopped;
  }
  return verdict.emulated ? Taken::Emulated : Taken::No;
}

}  // namespace backend
