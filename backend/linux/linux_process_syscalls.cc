// Syscall stops of LinuxProcess: QCatchSyscalls, the PTRACE_SYSCALL entry and exit stops, a
// traced thread's syscall instruction that ends at its exit stop (run out of line where other
// threads run); and record/replay's other interceptions of the program's own instructions
// (cpuid, rdrand...: take_nondeterministic).
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <utility>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/syscall_stop_kind.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/remote_syscall.h"

namespace backend {

namespace {

constexpr uint64_t kPage = 4096;
#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif
// The page: the copy (`syscall`, then an int3 that nothing should reach), then its name.
constexpr uint8_t kDisplacedCode[] = {0x0f, 0x05, 0xcc};
constexpr char kDisplacedName[] = "branchstub-syscall";
constexpr uint64_t kDisplacedNameAt = 16;

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

LinuxThread::SyscallStop LinuxProcess::read_syscall_stop(const LinuxThread& t) const {
  // Entry or exit? The kernel says so since 5.3; before that, alternate (a step from an
  // entry stop ends the syscall without an exit stop, so the toggle is only a fallback).
  SyscallInfo info;
  long n = read_syscall_info(t.tid, info);
  LinuxThread::SyscallStop s;
  s.entry = n > 0 ? info.op == kSyscallInfoEntry : !t.in_syscall;
  s.known = n <= 0 || info.op == kSyscallInfoEntry || info.op == kSyscallInfoExit;
  s.ip = n > 0 ? info.instruction_pointer : 0;
  if (s.entry && n > 0) {
    s.nr = static_cast<int>(info.entry.nr);
  } else {
    // orig_rax holds the number at any syscall stop: the entry of an old kernel, and the exit
    // of a syscall whose entry we did not see (entered before syscalls were caught, or an
    // execve that rebuilt our thread state).
    errno = 0;
    long nr = ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
    s.nr = errno ? (s.entry ? -1 : t.syscall_nr) : static_cast<int>(nr);
  }
  return s;
}

void LinuxProcess::handle_syscall_stop(LinuxThread& t) {
  LinuxThread::SyscallStop stop = t.syscall_stop ? *t.syscall_stop : read_syscall_stop(t);
  bool entry = stop.entry, known = stop.known;
  t.syscall_nr = stop.nr;
  t.in_syscall = entry;
  int nr = t.syscall_nr;
  bool wanted = known && catch_syscalls_ && nr >= 0 && (caught_syscalls_.empty() || caught_syscalls_.count(nr));
  // Block patching left this stop's drains for now (handle_stop): a stop resumed at once below
  // (no client, engine or interceptor waits on it) needs none; any other settles the thread's
  // history first.
  bool resumed_at_once = !wanted && !stopping() && !t.lifted_step && !t.syscall_flow && !t.watch_step && !interceptor_;
  if (!resumed_at_once) stepper_.patch_settle(t);
  if (entry && t.lifted_step && !t.signal_entry && t.lifted_step->insn.kind == FlowKind::Syscall) {
    // The lifted syscall instruction has run up to its entry: our int3 goes back now (as after
    // a lifted step); the exit stop records it. A displaced one returns to after the original
    // (rip, and rcx, which the instruction loaded with it): a restart, a clone's child and a
    // signal frame then see the original's address, never the copy's.
    if (t.lifted_step->lifted) (void)breakpoints_.lower(mem_, t.lifted_step->lifted);
    if (uint64_t copy = t.lifted_step->displaced) {
      user_regs_struct gp{};
      uint64_t after = t.lifted_step->insn.addr + t.lifted_step->insn.len;
      if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) == 0 && gp.rip == copy + 2) {
        gp.rip = after;
        if (gp.rcx == copy + 2) gp.rcx = after;
        ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &gp);
      }
    }
    t.syscall_flow = t.lifted_step->insn;
    t.lifted_step.reset();
  }
  bool finished_flow = !entry && t.syscall_flow;
  if (finished_flow) finish_syscall_flow(t);
  if (!entry && t.watch_step) {  // the checked step over a syscall instruction ends here
    t.watch_hit = watch_.check(*t.watch_step, watch_reader_);
    t.watch_step.reset();
  }
  if (entry && t.in<run::WatchStep>() && stepper_.traced(t.tid)) {
    t.watch_syscall_from = get_pc(t.tid) - 2;  // syscall is 0f 05
  } else if (!entry && t.watch_syscall_from) {
    // That checked step ends here: its branch, if the syscall took one (rt_sigreturn), is
    // recorded as a single step's is.
    uint64_t from = std::exchange(t.watch_syscall_from, 0);
    if (t.in<run::WatchStep>() && stepper_.traced(t.tid)) {
      t.cursor.step_from = from;
      stepper_.record_step(t, get_pc(t.tid));
      t.cursor.step_from = 0;
    }
  }
  // The system-call buffer's own call, met under PTRACE_SYSCALL: the buffer reports it.
  bool buffers_own = interceptor_ && stop.ip && stepper_.patcher() && stepper_.patcher()->in_buffered_stub(stop.ip);
  if (interceptor_ && known && !buffers_own) {
    auto verdict = entry ? interceptor_->syscall_entry(t.tid) : interceptor_->syscall_exit(t.tid);
    sync_interceptor_watch();
    if (entry && !verdict.stop && settings_.watch_emulation && watch_.active()) page_watch_syscall_entry(t);
    if (verdict.stop) {
      console_output_ += verdict.message;
      if (verdict.watch_addr) return report(t, watch_event(t.tid, WatchHit{HwKind::Write, verdict.watch_addr}));
      t.last_signal = SIGTRAP;
      return report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
    }
  }
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

// A traced thread's block ends in a syscall while other threads run. Lifting its int3 for the
// call (as for other instructions the CPU must run) would let every other thread pass that
// address untraced for as long as the call blocks: libc's read() has one syscall instruction
// for all threads. Instead the thread runs a copy in a page of ours under PTRACE_SYSCALL; its
// entry stop puts it back after the original (handle_syscall_stop), its exit stop records it.
// Not under record/replay (whose layout must not change), nor for checked or stepbranch steps,
// nor under block patching: there the calls that block run in place unstopped, only the rare
// ones (rt_sigreturn, clone, exec) are int3 sites, and a syscall stop there would take the
// patches out while an rt_sigreturn's frame may hold a stub's address.
bool LinuxProcess::run_syscall_displaced(LinuxThread& t, const FlowInsn& insn) {
  if (interceptor_ || stepper_.patcher() || threads_.size() < 2 || t.signal_entry || insn.len != 2 ||
      t.in<run::WatchStep>() || t.in<run::StepBranch>())
    return false;
  uint8_t code[2] = {};
  if (code_cache_.reader()(insn.addr, code) != sizeof code || code[0] != 0x0f || code[1] != 0x05) return false;
  uint64_t copy = displaced_page(t);
  if (!copy) return false;
  set_pc(t.tid, copy);
  t.lifted_step = LiftedStep{insn, 0, copy};
  resume_thread(t, 0);
  return true;
}

// One page per image, mapped with the other threads paused (the mmap runs from t's pc, over the
// int3 there for one step). Away from the program (ld.so maps right below it), and named.
uint64_t LinuxProcess::displaced_page(LinuxThread& t) {
  if (displaced_page_ || displaced_refused_) return displaced_page_;
  displaced_refused_ = true;  // one try per image
  auto maps = read_memory_map(pid_);
  if (!maps || maps->empty()) return 0;
  uint64_t lowest = UINT64_MAX;
  for (const auto& m : *maps)
    if (m.start >= patch::kKeepClear) lowest = std::min(lowest, m.start);
  uint64_t hint = 0;
  if (lowest != UINT64_MAX)
    if (auto at = patch::free_range_below_clear(*maps, lowest, lowest + 1, kPage, true)) hint = *at;
  std::vector<pid_t> paused = pause_running(t.tid);
  auto m = patch::inject_syscall(pid_, t.tid, mem_, SYS_mmap,
                                 {hint, kPage, PROT_READ | PROT_EXEC,
                                  MAP_PRIVATE | MAP_ANONYMOUS | (hint ? patch::kMapFixedNoReplace : 0), static_cast<uint64_t>(-1), 0});
  uint64_t page = m && *m > 0 ? static_cast<uint64_t>(*m) : 0;
  bool written = false;
  if (page) {
    auto c = mem_.write(page, kDisplacedCode);
    auto n = mem_.write(page + kDisplacedNameAt,
                        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kDisplacedName), sizeof kDisplacedName));
    written = c && *c == sizeof kDisplacedCode && n && *n == sizeof kDisplacedName;
    // Its name in the maps (Linux 5.17+ with CONFIG_ANON_VMA_NAME; unnamed elsewhere).
    if (written) (void)patch::inject_syscall(pid_, t.tid, mem_, SYS_prctl,
                                             {PR_SET_VMA, PR_SET_VMA_ANON_NAME, page, kPage, page + kDisplacedNameAt, 0}, page);
    if (!written) (void)patch::inject_syscall(pid_, t.tid, mem_, SYS_munmap, {page, kPage, 0, 0, 0, 0});
  }
  resume_paused(paused);
  if (!written) {
    log("process {}: no page for displaced syscalls; their int3s are lifted instead", pid_);
    return 0;
  }
  log("process {}: displaced syscalls run at {:#x}", pid_, page);
  displaced_page_ = page;
  return page;
}

// t stopped before its displaced syscall ran (a signal, our SIGSTOP): back at the original
// instruction, as if it had not started (it runs again when t goes on).
void LinuxProcess::undo_displaced(LinuxThread& t) {
  if (!t.lifted_step || !t.lifted_step->displaced) return;
  if (!t.running && get_pc(t.tid) == t.lifted_step->displaced) set_pc(t.tid, t.lifted_step->insn.addr);
  t.lifted_step.reset();
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
