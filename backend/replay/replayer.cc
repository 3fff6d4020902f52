#include "backend/replay/replayer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>

#include <fmt/format.h>

#include "backend/host/cpu_id.h"
#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_memory.h"
#include "backend/replay/branch_counter.h"
#include "backend/replay/exec_setup.h"
#include "backend/replay/register_digest.h"
#include "backend/replay/syscall_table.h"
#include "backend/replay/trace_format.h"
#include "backend/x86/rep_string.h"

namespace backend::replay {

namespace {

std::string describe_call(long nr, const uint64_t args[6]) {
  std::string out = syscall_name(nr) + "(";
  for (int i = 0; i < syscall_arg_count(nr); ++i) out += fmt::format("{}{:#x}", i ? ", " : "", args[i]);
  return out + ")";
}

// A call that returns only when a signal comes and sets the signal mask while it waits
// (rt_sigsuspend): the signal recorded at its return is sent at its entry instead, so that it
// ends the call at once and is delivered under the call's mask (its handler runs with it, the
// old mask comes back after), as when recorded. Sent after the call, it could stay blocked.
bool signal_sent_at_entry(long nr) { return nr == SYS_rt_sigsuspend; }

std::string describe(const TraceEvent& e) {
  switch (e.kind) {
    case EventKind::Syscall: return fmt::format("{} at pc {:#x}", describe_call(e.nr, e.args), e.pc);
    case EventKind::Rdtsc: return fmt::format("rdtsc at pc {:#x}, branch {}", e.pc, e.branches);
    case EventKind::Signal: return fmt::format("signal {} at pc {:#x}, branch {}", e.nr, e.pc, e.branches);
    case EventKind::Exit: return fmt::format("the program's end (status {})", e.nr);
    case EventKind::Instruction:
      return fmt::format("{} at pc {:#x}, branch {}",
                         e.nr >= 0 && e.nr <= 3 ? kind_name(static_cast<NondeterministicInsn::Kind>(e.nr)) : "?",
                         e.pc, e.branches);
  }
  return "?";
}

class Replayer final : public SyscallInterceptor, public ReplayClock {
 public:
  Replayer(std::shared_ptr<const TraceReader> trace, pid_t pid) : trace_(std::move(trace)), pid_(pid), mem_(pid) {}

  uint64_t branches() const override { return counter_.count(pid_); }
  uint64_t events() const override { return cursor_; }
  BranchCounter::Last last_branch() const override { return counter_.last(pid_); }
  bool diverged() const override { return !diverged_.empty(); }
  void hold_at_end(bool on) override { hold_at_end_ = on; }
  bool held_at_end() const override { return held_at_end_; }
  std::shared_ptr<const ReplayState> save() const override;
  void set_watched(std::vector<std::pair<uint64_t, uint64_t>> ranges) override { watched_ = std::move(ranges); }
  void set_diverted(bool on) override { diverted_ = on; }
  // The same replay, going on in a copy of the process.
  std::unique_ptr<Replayer> copy_for(pid_t pid) const {
    auto r = std::make_unique<Replayer>(trace_, pid);
    r->counter_ = counter_;
    r->counter_.rename(pid_, pid);
    r->cursor_ = cursor_;
    r->diverged_ = diverged_;
    r->signal_sent_ = signal_sent_;
    r->hold_at_end_ = hold_at_end_;
    r->held_at_end_ = held_at_end_;
    r->watched_ = watched_;
    return r;
  }

  Verdict syscall_entry(pid_t tid) override;
  bool syscalls_emulated() const override { return diverged_.empty() && !diverted_; }
  Verdict syscall_exit(pid_t tid) override;
  Verdict exec_done(pid_t tid) override;
  bool take_signal(pid_t tid, int signo, std::string* message) override;
  InstructionVerdict take_instruction(pid_t tid, const NondeterministicInsn& insn) override;
  BranchCounter& counter() { return counter_; }
  bool recorded_with_buffer() const { return trace_->header().syscall_buffer; }
  void tracer_replaced(BranchTracer& tracer) override {
    (void)start_counting(tracer, counter_, pid_, trace_->header().syscall_buffer);
  }
  // The next event is a signal that arrived in the program's code, or a run goes to a goal
  // (set_goal): the thread stops at its pc.
  uint64_t watch_pc() const override {
    if (goal_watched()) return goal_->second;
    const TraceEvent* n = next();
    bool in_code = n && n->kind == EventKind::Signal && n->args[1] == kSignalInCode;
    return in_code && diverged_.empty() && !signal_sent_ && !diverted_ ? n->pc : 0;
  }
  WatchVerdict at_watch_pc(pid_t tid, std::span<const uint8_t> code) override;
  uint64_t branches_before_watch(pid_t) const override {
    uint64_t seen = counter_.count(pid_);
    if (goal_watched()) return goal_->first > seen ? goal_->first - seen : 1;
    const TraceEvent* n = next();
    return n && n->branches > seen ? n->branches - seen : 1;
  }
  bool set_goal(std::optional<std::pair<uint64_t, uint64_t>> goal) override {
    goal_.reset();
    if (!goal) return true;
    for (size_t i = cursor_; i < trace_->events().size(); ++i) {
      const TraceEvent& e = trace_->events()[i];
      if (e.branches > goal->first) break;
      // Not across a signal yet: with one on the way, gdb.reverse's sigall-reverse counted 13
      // branches short at the next system call (a handler's entry or sigreturn under a budget).
      if (e.kind == EventKind::Signal) return false;
    }
    goal_ = goal;
    return true;
  }

 private:
  std::string set_up_exec(const TraceEvent& e);
  static void give_tsc(const TraceEvent& e, user_regs_struct& regs);
  uint64_t put_scratch_path(const user_regs_struct& regs, const std::string& path);
  void finish_interrupted_rep(pid_t tid, user_regs_struct& regs, std::span<const uint8_t> code, uint64_t digest,
                              uint64_t rcx_left);
  bool run_rep(pid_t tid, const RepString& rep, user_regs_struct& regs, uint64_t k);
  // The event's branch count against the thread's: a divergence message, or "" when equal.
  std::string count_mismatch(const TraceEvent& e) const {
    uint64_t seen = counter_.count(pid_);
    if (seen == e.branches) return {};
    return fmt::format("{}: expected branch count {}, saw {}", describe(e), e.branches, seen);
  }
  // The watch is the goal's (set_goal refused any goal with a signal on the way to it).
  bool goal_watched() const { return goal_ && diverged_.empty() && !diverted_; }
  const TraceEvent* next() const {
    return cursor_ < trace_->events().size() ? &trace_->events()[cursor_] : nullptr;
  }
  // The first divergence: said once, with the event's position; afterwards every syscall
  // stops again (the program cannot go on as recorded).
  Verdict diverge(pid_t tid, std::string what) {
    skip(tid);
    return {true, divergence(what)};
  }
  std::string divergence(const std::string& what) {
    if (!diverged_.empty()) return {};
    diverged_ = fmt::format("branchstub replay: divergence at event {} of {}: {}\n", cursor_,
                            trace_->events().size(), what);
    std::fputs(diverged_.c_str(), stderr);
    return diverged_;
  }
  void skip(pid_t tid) {  // the syscall at its entry stop does not run
    ::ptrace(PTRACE_POKEUSER, tid, offsetof(user_regs_struct, orig_rax), static_cast<long>(-1));
  }

  std::shared_ptr<const TraceReader> trace_;
  pid_t pid_;
  ProcMemory mem_;
  BranchCounter counter_;
  size_t cursor_ = 0;
  std::string diverged_;
  // Between a syscall's entry and exit stops.
  const TraceEvent* current_ = nullptr;
  ReplayAs as_ = ReplayAs::Emulate;
  user_regs_struct saved_{};           // registers to put back (rewritten arguments)
  uint64_t scratch_ = 0;               // where a path was written below the stack
  std::vector<uint8_t> scratch_saved_;
  bool signal_sent_ = false;  // the in-code signal is pending (tgkill'd at its pc)
  std::optional<std::pair<uint64_t, uint64_t>> goal_;  // set_goal(): branches, pc
  bool hold_at_end_ = false;
  bool held_at_end_ = false;  // stopped at the exit's entry; resumed, the program ends
  bool diverted_ = false;     // the client runs code in the program: its syscalls are real
  std::vector<std::pair<uint64_t, uint64_t>> watched_;  // the client's write watchpoints
  // The first watched region whose bytes `bytes` at `addr` change (its start; 0: none).
  uint64_t watched_change(uint64_t addr, const std::vector<uint8_t>& bytes) const {
    for (auto [start, len] : watched_) {
      uint64_t lo = std::max(start, addr), hi = std::min(start + len, addr + bytes.size());
      if (lo >= hi) continue;
      std::vector<uint8_t> old(hi - lo);
      auto n = mem_.read(lo, old);
      if (!n || *n != old.size() || !std::equal(old.begin(), old.end(), bytes.begin() + (lo - addr))) return start;
    }
    return 0;
  }
};

struct SavedReplay final : ReplayState {
  std::unique_ptr<Replayer> replayer;
};

std::shared_ptr<const ReplayState> Replayer::save() const {
  auto saved = std::make_shared<SavedReplay>();
  saved->replayer = copy_for(pid_);
  return saved;
}

// k iterations of the rep string at the thread's pc: their memory written through mem_, the
// thread's registers (and regs) as the CPU leaves them. false: nothing changed.
bool Replayer::run_rep(pid_t tid, const RepString& rep, user_regs_struct& regs, uint64_t k) {
  ProgramMemory memory{
      [this](uint64_t addr, std::span<uint8_t> out) {
        auto n = mem_.read(addr, out);
        return n && *n == out.size();
      },
      [this](uint64_t addr, std::span<const uint8_t> in) {
        auto n = mem_.write(addr, in);
        return n && *n == in.size();
      }};
  if (!run_iterations(rep, regs, k, memory)) return false;
  user_regs_struct after = after_iterations(rep, regs, k);
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &after) != 0) return false;
  regs = after;
  return true;
}

// A `rep movs`/`rep stos` at the signal's pc that the recording's signal interrupted halfway
// (backend/x86/rep_string.h): its iterations up to the recorded registers are done here; regs
// become the thread's. Unchanged when it is no such instruction or no count of iterations
// gives the recorded registers (a divergence then, as before).
void Replayer::finish_interrupted_rep(pid_t tid, user_regs_struct& regs, std::span<const uint8_t> code,
                                      uint64_t digest, uint64_t rcx_left) {
  auto rep = decode_rep_string(code);
  if (!rep) return;
  auto matches = [&](const user_regs_struct& r) { return register_digest(r) == digest; };
  std::optional<uint64_t> k;
  if (rcx_left && rcx_left < regs.rcx && matches(after_iterations(*rep, regs, regs.rcx - rcx_left)))
    k = regs.rcx - rcx_left;
  constexpr uint64_t kMostIterations = uint64_t{1} << 32;  // a trace without the rcx: tried one by one
  if (!k && !rcx_left) k = iterations_until(*rep, regs, kMostIterations, matches);
  if (k) (void)run_rep(tid, *rep, regs, *k);
}

// The thread is at the recorded pc, the instruction there not executed: the signal goes now
// when the count and the registers are the recorded ones; before the count, it goes on.
SyscallInterceptor::WatchVerdict Replayer::at_watch_pc(pid_t tid, std::span<const uint8_t> code) {
  if (goal_watched()) {
    // At the goal's count the thread stops (past it too: the run that set it says so).
    if (counter_.count(pid_) < goal_->first) return {};
    return {true, false, {}};
  }
  const TraceEvent* e = next();
  if (!e || e->kind != EventKind::Signal || e->args[1] != kSignalInCode) return {};
  uint64_t seen = counter_.count(pid_);
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
  if (seen < e->branches) {
    // A rep string at the signal's pc met before its count (an earlier call, or right after
    // the previous signal's sigreturn): the CPU finishes it without a branch. Run under the
    // int3 one iteration a step, each would look like a taken branch; done here at once.
    auto rep = decode_rep_string(code);
    if (!rep || regs.rcx == 0 || !run_rep(tid, *rep, regs, regs.rcx)) return {};
    WatchVerdict ran;
    ran.ran_it = true;
    return ran;
  }
  if (seen == e->branches && register_digest(regs) != e->args[2])
    finish_interrupted_rep(tid, regs, code, e->args[2], e->args[3]);
  if (seen == e->branches && register_digest(regs) == e->args[2]) {
    ::syscall(SYS_tgkill, pid_, tid, static_cast<int>(e->nr));
    signal_sent_ = true;
    return {false, true, {}};
  }
  std::string why = seen == e->branches
                        ? fmt::format("{}: reached it with other registers (digest {:#x}, recorded {:#x})",
                                      describe(*e), register_digest(regs), e->args[2])
                        : fmt::format("{}: passed pc {:#x} at branch count {} without reaching it", describe(*e),
                                      e->pc, seen);
  return {true, false, divergence(why)};
}

SyscallInterceptor::Verdict Replayer::syscall_entry(pid_t tid) {
  current_ = nullptr;
  if (diverted_) return {};
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
  long nr = static_cast<long>(regs.orig_rax);
  uint64_t args[6] = {regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9};
  if (!diverged_.empty()) {
    skip(tid);
    return {true, "branchstub replay: the replay diverged earlier; the program cannot go on as recorded.\n"};
  }
  std::string seen = fmt::format("{} at pc {:#x}", describe_call(nr, args), regs.rip);
  const TraceEvent* e = next();
  if (!e) return diverge(tid, "the trace has no more events; saw " + seen);
  if (e->kind != EventKind::Syscall) return diverge(tid, "expected " + describe(*e) + ", saw " + seen);
  bool same = e->nr == nr && e->pc == regs.rip;
  for (int i = 0; same && i < syscall_arg_count(nr); ++i) same = e->args[i] == args[i];
  if (!same) return diverge(tid, "expected " + describe(*e) + ", saw " + seen);
  if (auto bad = count_mismatch(*e); !bad.empty()) return diverge(tid, bad);
  if ((nr == SYS_exit || nr == SYS_exit_group) && hold_at_end_ && !held_at_end_) {
    held_at_end_ = true;  // resumed from here, the entry goes on and the program ends
    return {true, ""};
  }
  as_ = syscall_policy(nr, args, trace_->header().pid).as;
  if (signal_sent_at_entry(nr)) {
    const auto& events = trace_->events();
    const TraceEvent* n = cursor_ + 1 < events.size() ? &events[cursor_ + 1] : nullptr;
    if (!n || n->kind != EventKind::Signal || n->args[1] != kSignalAtSyscallExit)
      return diverge(tid, describe(*e) + ": the recording has no signal at its return to end it with");
    ::syscall(SYS_tgkill, pid_, tid, static_cast<int>(n->nr));
  }
  saved_ = regs;
  current_ = e;
  user_regs_struct changed = regs;
  // An open, a descriptor or an exec that failed when recorded (an exec: a miss of a PATH
  // search) made and loaded nothing: its error is given back.
  bool makes_something = as_ == ReplayAs::OpenFile || as_ == ReplayAs::Placeholder || as_ == ReplayAs::Exec;
  if (makes_something && e->result < 0) as_ = ReplayAs::Emulate;
  switch (as_) {
    case ReplayAs::OpenFile:
      // An open of the trace's copy of a file the program maps, else of /dev/null: the
      // descriptor gets the recorded number and mmap finds the recorded bytes.
      changed.rsi = put_scratch_path(regs, e->mapped_file >= 0 ? trace_->file_copy_path(e->mapped_file) : "/dev/null");
      changed.rdx = O_RDONLY | (regs.rdx & O_CLOEXEC);
      break;
    case ReplayAs::Placeholder:
      // openat(AT_FDCWD, "/dev/null", O_RDONLY) instead: the kernel gives it the lowest free
      // number, the recorded one when the replay is on its path.
      changed.orig_rax = SYS_openat;
      changed.rdi = static_cast<uint64_t>(AT_FDCWD);
      changed.rsi = put_scratch_path(regs, "/dev/null");
      changed.rdx = O_RDONLY | (placeholder_cloexec(nr, args) ? O_CLOEXEC : 0);
      changed.r10 = 0;
      break;
    case ReplayAs::SignalSelf:
      changed.rdi = static_cast<uint64_t>(pid_);
      if (nr == SYS_tgkill) changed.rsi = static_cast<uint64_t>(pid_);
      break;
    case ReplayAs::Emulate:
      skip(tid);
      changed.orig_rax = static_cast<uint64_t>(-1);
      break;
    default:
      break;
  }
  if (as_ == ReplayAs::OpenFile || as_ == ReplayAs::Placeholder || as_ == ReplayAs::SignalSelf)
    ::ptrace(PTRACE_SETREGS, tid, nullptr, &changed);
  if (nr == SYS_exit || nr == SYS_exit_group) {  // no exit stop follows
    ++cursor_;
    current_ = nullptr;
  }
  return {};
}

// `path` written below the thread's stack (saved first; put back at the syscall's exit), for
// an open the replay runs instead of the recorded call. Its address.
uint64_t Replayer::put_scratch_path(const user_regs_struct& regs, const std::string& path) {
  scratch_ = (regs.rsp - 4096 - path.size() - 1) & ~uint64_t{15};
  scratch_saved_.assign(path.size() + 1, 0);
  (void)mem_.read(scratch_, scratch_saved_);
  std::vector<uint8_t> bytes(path.begin(), path.end());
  bytes.push_back(0);
  (void)mem_.write(scratch_, bytes);
  return scratch_;
}

// The new image an execve loaded, before its first instruction: set up as the recording's
// was, with its AT_RANDOM bytes (the event's write). What went wrong, or "".
std::string Replayer::set_up_exec(const TraceEvent& e) {
  std::vector<uint8_t> random;
  if (!e.writes.empty())
    if (auto bytes = trace_->bytes(e.writes.front())) random = *bytes;
  auto facts = prepare_exec(pid_, random);
  if (!facts) return "cannot set the new image up: " + facts.error().message;
  if (!e.writes.empty() && facts->at_random_addr != e.writes.front().addr)
    return fmt::format("AT_RANDOM at {:#x} in replay, {:#x} when recorded", facts->at_random_addr,
                       e.writes.front().addr);
  return {};
}

SyscallInterceptor::Verdict Replayer::exec_done(pid_t tid) {
  const TraceEvent* e = current_;
  if (!e || as_ != ReplayAs::Exec) return {};  // the launch's own exec
  current_ = nullptr;
  if (e->result != 0) return diverge(tid, describe(*e) + ": it loaded a new image in replay, failed when recorded");
  if (auto bad = set_up_exec(*e); !bad.empty()) return diverge(tid, describe(*e) + ": " + bad);
  ++cursor_;
  return {};
}

SyscallInterceptor::Verdict Replayer::syscall_exit(pid_t tid) {
  const TraceEvent* e = current_;
  current_ = nullptr;
  if (!e) return {};  // execve's exit at the start, or after a divergence
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
  int64_t got = static_cast<int64_t>(regs.rax);
  user_regs_struct out = saved_;  // arguments as the program set them
  out.rip = regs.rip;
  out.rcx = regs.rcx;
  out.r11 = regs.r11;
  out.rax = static_cast<uint64_t>(got);
  std::string mismatch;
  uint64_t watch_addr = 0;
  switch (as_) {
    case ReplayAs::Emulate:
      for (const auto& w : e->writes) {
        auto bytes = trace_->bytes(w);
        if (bytes && !watch_addr) watch_addr = watched_change(w.addr, *bytes);
        if (!bytes || !mem_.write(w.addr, *bytes))
          mismatch = fmt::format("cannot put the recorded {} bytes at {:#x}", w.length, w.addr);
      }
      out.rax = static_cast<uint64_t>(e->result);
      break;
    case ReplayAs::OpenFile:
    case ReplayAs::Placeholder:
      (void)mem_.write(scratch_, scratch_saved_);
      [[fallthrough]];
    case ReplayAs::Execute:
    case ReplayAs::SignalSelf:
      if (got != e->result) mismatch = fmt::format("it returned {:#x} in replay, {:#x} when recorded", got, e->result);
      // What it reported back is the recording's (rt_sigaction's old action: the replay server
      // may have inherited other dispositions than the recorder).
      for (const auto& w : e->writes)
        if (auto bytes = trace_->bytes(w); mismatch.empty() && bytes) (void)mem_.write(w.addr, *bytes);
      break;
    case ReplayAs::ExecuteAnyResult:
      out.rax = static_cast<uint64_t>(e->result);
      break;
    case ReplayAs::Exec:
      mismatch = got != e->result ? fmt::format("it returned {:#x} in replay, {:#x} when recorded", got, e->result)
                                  : set_up_exec(*e);
      break;
    default:
      break;
  }
  // What ran for real keeps the kernel's registers (rt_sigreturn's restored context above all).
  if (as_ != ReplayAs::Execute && as_ != ReplayAs::ExecuteUnchecked && as_ != ReplayAs::Exec)
    ::ptrace(PTRACE_SETREGS, tid, nullptr, &out);
  if (!mismatch.empty()) return diverge(tid, describe(*e) + ": " + mismatch);
  ++cursor_;
  // An asynchronous signal recorded right at this syscall's return: sent now, it is delivered
  // before the next instruction (take_signal gives it the recorded siginfo).
  if (const TraceEvent* n = next();
      n && n->kind == EventKind::Signal && n->args[1] == kSignalAtSyscallExit && !signal_sent_at_entry(e->nr))
    ::syscall(SYS_tgkill, pid_, tid, static_cast<int>(n->nr));
  if (watch_addr) return {true, "", watch_addr};
  return {};
}

// The recorded rdtsc (nr 0) or rdtscp (nr 1) result, the thread moved past the instruction.
void Replayer::give_tsc(const TraceEvent& e, user_regs_struct& regs) {
  regs.rax = e.args[0];
  regs.rdx = e.args[1];
  if (e.nr == 1) regs.rcx = e.args[2];
  regs.rip += e.nr == 1 ? 3 : 2;
}

// The recorded result, where the recording had the same instruction at the same place (an
// rdtsc met before it runs, where the hypervisor ignores PR_SET_TSC, as if trapped).
SyscallInterceptor::InstructionVerdict Replayer::take_instruction(pid_t tid, const NondeterministicInsn& insn) {
  if (diverted_) return {};  // the client's own calls run on this CPU
  if (!diverged_.empty())
    return {false, true, "branchstub replay: the replay diverged earlier; the program cannot go on as recorded.\n"};
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return {};
  const TraceEvent* e = next();
  std::string seen = fmt::format("{} at pc {:#x}, branch {}", kind_name(insn.kind), regs.rip, counter_.count(pid_));
  bool tsc = is_tsc(insn);
  EventKind kind = tsc ? EventKind::Rdtsc : EventKind::Instruction;
  int64_t nr = tsc ? int64_t{insn.kind == NondeterministicInsn::Kind::Rdtscp} : static_cast<int64_t>(insn.kind);
  if (!e || e->kind != kind || e->nr != nr || e->pc != regs.rip)
    return {false, true, divergence(fmt::format("expected {}, saw {}", e ? describe(*e) : "nothing more", seen))};
  if (auto bad = count_mismatch(*e); !bad.empty()) return {false, true, divergence(bad)};
  if (tsc) {
    give_tsc(*e, regs);
  } else {
    if (uint64_t in = input_of(insn, regs); in != e->args[4])
      return {false, true,
              divergence(fmt::format("{}: expected input {:#x}, saw {:#x}", describe(*e), e->args[4], in))};
    NondeterministicResult result;
    std::copy(e->args, e->args + 4, result.value);
    apply_result(insn, result, regs);
  }
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0) return {};
  ++cursor_;
  return {true, false, {}};
}

bool Replayer::take_signal(pid_t tid, int signo, std::string* message) {
  if (diverted_) return false;
  siginfo_t si{};
  ::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
  const TraceEvent* e = next();
  if (signo == SIGSEGV && si.si_code == SI_KERNEL && e && e->kind == EventKind::Rdtsc && e->pc == regs.rip &&
      count_mismatch(*e).empty()) {
    give_tsc(*e, regs);
    ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs);
    ++cursor_;
    return true;
  }
  if (e && e->kind == EventKind::Signal && e->nr == signo) {
    if (auto bad = count_mismatch(*e); !bad.empty() || e->pc != regs.rip) {
      if (bad.empty()) bad = fmt::format("{}: saw it at pc {:#x}", describe(*e), regs.rip);
      *message = divergence(bad);
      return false;
    }
    bool sent = e->args[1] == kSignalAtSyscallExit || e->args[1] == kSignalInCode;
    if (sent && !e->writes.empty()) {  // the recorded siginfo, not our tgkill's
      if (auto info = trace_->bytes(e->writes.front()); info && info->size() == sizeof(siginfo_t))
        ::ptrace(PTRACE_SETSIGINFO, tid, nullptr, info->data());
    }
    signal_sent_ = false;
    ++cursor_;
    return false;
  }
  *message = divergence(fmt::format("expected {}, saw signal {} at pc {:#x}", e ? describe(*e) : "nothing more", signo,
                                    regs.rip));
  return false;
}

}  // namespace

Result<std::shared_ptr<const TraceReader>> open_replay(const std::string& dir) {
  auto trace = TraceReader::open(dir);
  if (!trace) return trace.error();
  const TraceHeader& h = trace->header();
  if (!h.complete) return Error{EINVAL, dir + ": the recording did not finish; it cannot be replayed."};
  if (auto hash = hash_file(h.exe); !hash || *hash != h.exe_hash)
    return Error{EINVAL, fmt::format("{} changed (or is gone) since it was recorded in {}.", h.exe, dir)};
  for (size_t i = 0; i < h.files.size(); ++i) {
    auto hash = hash_file(trace->file_copy_path(static_cast<int>(i)));
    if (!hash || *hash != h.files[i].hash)
      return Error{EINVAL, fmt::format("the trace's copy of {} is damaged or gone.", h.files[i].path)};
  }
  // The program gets the recording CPU's cpuid answers. Register states this CPU saves and
  // that one did not would overflow every xsave area the program sized from them: refused.
  // Features this CPU lacks fault where the program uses them: a divergence, said then.
  CpuFeatures here = read_cpu_features();
  if (uint64_t extra = here.xcr0 & ~h.xcr0; extra)
    return Error{EINVAL, fmt::format("{} was recorded on a CPU whose XCR0 is {:#x} ({}); this one's is {:#x}: the "
                                     "program sized its register save areas for the recording's (from the recorded "
                                     "cpuid), so it cannot be replayed here.",
                                     dir, h.xcr0, h.cpu, here.xcr0)};
  std::string missing = missing_features(CpuFeatures{h.cpu, h.cpu_features, h.xcr0}, here);
  if (h.xcr0 & ~here.xcr0)
    missing += fmt::format("{}XCR0 bits {:#x}", missing.empty() ? "" : ", ", h.xcr0 & ~here.xcr0);
  if (!missing.empty())
    std::fprintf(stderr,
                 "branchstub replay: warning: %s was recorded on %s, which had features this CPU lacks (%s); the "
                 "replay diverges if the program uses them.\n",
                 dir.c_str(), h.cpu.c_str(), missing.c_str());
  return std::shared_ptr<const TraceReader>(std::make_shared<TraceReader>(std::move(*trace)));
}

Result<ReplayStart> start_replay(std::shared_ptr<const TraceReader> trace, const LaunchOptions& base) {
  const TraceHeader& h = trace->header();
  LaunchOptions launch = base;
  launch.argv = h.argv;
  launch.wrapper.clear();
  launch.startup_with_shell = false;
  launch.disable_randomization = true;
  launch.trap_tsc = true;
  launch.working_dir = h.cwd;
  launch.exact_environment = h.env;
  launch.env_set.clear();
  launch.env_unset.clear();
  auto process = LinuxProcess::launch_process(launch);
  if (!process) return process.error();
  pid_t pid = (*process)->pid();
  auto facts = prepare_exec(pid, h.at_random);
  if (!facts) return facts.error();
  if (h.fds)
    if (auto same = match_descriptors(pid, *h.fds); !same)
      return Error{same.error().code, "Cannot give the program the recorded descriptors: " + same.error().message};
  if (h.sig_ignored && h.sig_blocked)
    if (auto same = match_signal_state(pid, *h.sig_ignored, *h.sig_blocked); !same)
      return Error{same.error().code, "Cannot give the program the recorded signal state: " + same.error().message};
  auto replayer = std::make_unique<Replayer>(std::move(trace), pid);
  // The thread's taken branches, counted as record counted them.
  if (auto on = start_counting((*process)->tracer(), replayer->counter(), pid, h.syscall_buffer); !on) return on.error();
  ReplayStart start;
  start.clock = replayer.get();
  (*process)->set_syscall_interceptor(std::move(replayer));
  start.process = std::move(*process);
  return start;
}

Result<ReplayStart> continue_replay(pid_t copy, const ReplayState& state) {
  const auto* saved = dynamic_cast<const SavedReplay*>(&state);
  if (!saved) return Error{EINVAL, "not a replay's state"};
  auto process = LinuxProcess::adopt_stopped_child(copy);
  auto replayer = saved->replayer->copy_for(copy);
  if (auto on = start_counting(process->tracer(), replayer->counter(), copy, replayer->recorded_with_buffer()); !on)
    return on.error();
  ReplayStart start;
  start.clock = replayer.get();
  process->set_syscall_interceptor(std::move(replayer));
  start.process = std::move(process);
  return start;
}

}  // namespace backend::replay
