#include "backend/replay/recorder.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <fcntl.h>

#include <climits>
#include <cstring>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

#include "backend/host/cpu_id.h"
#include "backend/linux/linux_process.h"
#include "backend/linux/syscall_interceptor.h"
#include "backend/ptrace/launch.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/proc_memory.h"
#include "backend/replay/branch_counter.h"
#include "backend/replay/exec_setup.h"
#include "backend/replay/register_digest.h"
#include "backend/replay/signal_pacer.h"
#include "backend/replay/syscall_stop.h"
#include "backend/replay/syscall_table.h"
#include "backend/replay/trace_format.h"

namespace backend::replay {

std::string default_trace_root() {
  if (const char* d = std::getenv("BRANCHSTUB_TRACE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/branchstub";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/share/branchstub";
}

std::string latest_trace() {
  std::string link = default_trace_root() + "/latest-trace";
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string target(buf, static_cast<size_t>(n));
  return target.front() == '/' ? target : default_trace_root() + "/" + target;
}

namespace {

constexpr int kCannotRecord = 125;

std::string absolute(const std::string& path) {
  if (!path.empty() && path.front() == '/') return path;
  char cwd[PATH_MAX];
  return ::getcwd(cwd, sizeof cwd) ? std::string(cwd) + "/" + path : path;
}

void make_dirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') ::mkdir(path.substr(0, i).c_str(), 0755);
}

std::string new_trace_dir(const std::string& program) {
  std::string root = default_trace_root();
  make_dirs(root);
  std::string base = program.substr(program.rfind('/') == std::string::npos ? 0 : program.rfind('/') + 1);
  for (int n = 0;; ++n) {
    std::string dir = fmt::format("{}/{}-{}", root, base, n);
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return dir;
  }
}

// A signal the program's own execution raises at the same point every run: a fault, or one
// it sent itself with kill/tgkill/tkill (delivered as that syscall returns).
bool deterministic_signal(const siginfo_t& si, pid_t pid, long last_nr) {
  int sig = si.si_signo;
  if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP) && si.si_code > 0)
    return true;
  bool self = (si.si_code == SI_USER || si.si_code == SI_TKILL) && si.si_pid == pid;
  return self && (last_nr == SYS_kill || last_nr == SYS_tgkill || last_nr == SYS_tkill);
}

class Recorder final : public SyscallInterceptor, public SyscallBufferSink {
 public:
  Recorder(pid_t pid, TraceWriter& writer, TraceHeader& header)
      : pid_(pid), mem_(pid), writer_(writer), header_(header) {
    if (::clock_getcpuclockid(pid, &cpu_clock_) != 0) cpu_clock_ = -1;
  }

  Verdict syscall_entry(pid_t tid) override {
    user_regs_struct regs{};
    ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
    return on_entry(regs) ? Verdict{} : Verdict{true, {}};
  }
  Verdict syscall_exit(pid_t tid) override {
    user_regs_struct regs{};
    ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
    return on_exit(regs) ? Verdict{} : Verdict{true, {}};
  }
  // A successful execve: its exit, result 0 (the exit stop, if one follows, finds no
  // syscall pending).
  Verdict exec_done(pid_t tid) override {
    if (!in_syscall_) return {};  // the launch's own exec
    user_regs_struct regs{};
    ::ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
    regs.rax = 0;
    return on_exit(regs) ? Verdict{} : Verdict{true, {}};
  }
  // rdtsc emulated, or an asynchronous signal held back (SignalPacer): consumed; any other
  // signal goes on to the program (or was refused).
  bool take_signal(pid_t /*tid*/, int signo, std::string* /*message*/) override { return on_signal(signo) == 0; }
  InstructionVerdict take_instruction(pid_t tid, const NondeterministicInsn& insn) override;
  // A call the program made without a stop (the system-call buffer), its branches counted.
  void buffered_syscall(pid_t tid, const BufferedSyscall& call) override;

  bool refused() const { return !why_.empty(); }
  const std::string& why() const { return why_; }
  BranchCounter& counter() { return counter_; }
  std::vector<TraceEvent>& events() { return events_; }
  uint64_t branches() const { return counter_.count(pid_); }
  uint64_t buffered() const { return buffered_; }
  // Signals held back (SignalPacer): raised again when due; true while any is held.
  bool raise_held_signals();
  uint64_t held_signals() const { return pacer_.held_count(); }

 private:
  bool refuse(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }
  // An event of the thread at pc, with its branch count now (the count since the last
  // syscall's exit no longer describes the next stop).
  TraceEvent event_here(EventKind kind, uint64_t pc) {
    TraceEvent e;
    e.kind = kind;
    e.pc = pc;
    e.branches = branches();
    exit_branches_ = UINT64_MAX;
    return e;
  }
  // The program's memory, read now.
  MemoryReader program_memory() {
    return [this](uint64_t addr, void* out, size_t size) {
      auto n = mem_.read(addr, std::span<uint8_t>(static_cast<uint8_t*>(out), size));
      return n && *n == size;
    };
  }
  // false (refused, with the message): a call the replay cannot do.
  bool replayable_call(const TraceEvent& e, const MemoryReader* reader);
  // The bytes the call wrote (read through `reader`) into the trace; false: refused.
  bool take_writes(TraceEvent& e, const MemoryReader& reader);
  bool on_entry(const user_regs_struct& regs);
  bool on_exit(const user_regs_struct& regs);
  // Signal-delivery stop: the signal to deliver (0: none), or -1 when refused.
  int on_signal(int sig);
  bool emulate_rdtsc(const user_regs_struct& regs);
  bool record_tsc(pid_t tid, const NondeterministicInsn& insn, const user_regs_struct& regs);

  pid_t pid_;
  ProcMemory mem_;
  TraceWriter& writer_;
  TraceHeader& header_;
  BranchCounter counter_;
  std::vector<TraceEvent> events_;  // written at the end: an openat learns later that it was mapped
  std::map<int, size_t> fd_open_;   // fd -> the openat event that made it
  std::string why_;
  TraceEvent pending_;              // the syscall between its entry and exit stops
  bool in_syscall_ = false;
  bool forced_enosys_ = false;
  long last_nr_ = -1;
  uint64_t exit_branches_ = UINT64_MAX;  // the count at the last syscall's exit (until the next stop)
  uint64_t buffered_ = 0;                 // calls the system-call buffer gave
  SignalPacer pacer_;
  clockid_t cpu_clock_ = -1;              // the program's CPU time (-1: unknown, nothing is held)
  int64_t cpu_ns() const {
    timespec ts{};
    if (cpu_clock_ == -1 || ::clock_gettime(cpu_clock_, &ts) != 0) return INT64_MAX / 2;
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
};

bool Recorder::raise_held_signals() {
  if (!pacer_.holding()) return false;
  // Asleep in the kernel (S, D): whatever it waits for may be the held signal.
  char state = read_thread_state(pid_, pid_);
  for (int sig : pacer_.due(cpu_ns(), state == 'S' || state == 'D')) (void)::syscall(SYS_tgkill, pid_, pid_, sig);
  return pacer_.holding();
}

bool Recorder::replayable_call(const TraceEvent& e, const MemoryReader* reader) {
  auto policy = syscall_policy(e.nr, e.args, pid_, reader);
  if (policy.as != ReplayAs::Refuse) return true;
  return refuse(fmt::format("the program called {} (at pc {:#x}, event {}): {}", syscall_name(e.nr), e.pc,
                            events_.size(), policy.why));
}

bool Recorder::take_writes(TraceEvent& e, const MemoryReader& reader) {
  if (auto why = unreplayable_result(e.nr, e.args, e.result, reader); !why.empty())
    return refuse(fmt::format("{} (at pc {:#x}, event {})", why, e.pc, events_.size()));
  for (const auto& r : written_ranges(e.nr, e.args, e.result, reader)) {
    std::vector<uint8_t> bytes(r.length);
    if (!reader(r.addr, bytes.data(), bytes.size()))
      return refuse(fmt::format("cannot read the {} bytes {} wrote at {:#x}", r.length, syscall_name(e.nr), r.addr));
    e.writes.push_back(writer_.add_data(r.addr, bytes));
  }
  return true;
}

bool Recorder::on_entry(const user_regs_struct& regs) {
  TraceEvent e = event_here(EventKind::Syscall, regs.rip);
  e.nr = static_cast<int64_t>(regs.orig_rax);
  uint64_t args[6] = {regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9};
  std::copy(args, args + 6, e.args);
  MemoryReader reader = program_memory();
  if (!replayable_call(e, &reader)) return false;
  forced_enosys_ = e.nr == SYS_rseq;  // kernel-written shared memory: the program does without
  if (forced_enosys_) ::ptrace(PTRACE_POKEUSER, pid_, offsetof(user_regs_struct, orig_rax), static_cast<long>(-1));
  last_nr_ = e.nr;
  if (e.nr == SYS_exit || e.nr == SYS_exit_group) {  // no exit stop follows
    events_.push_back(e);
    return true;
  }
  pending_ = e;
  in_syscall_ = true;
  return true;
}

bool Recorder::on_exit(const user_regs_struct& regs) {
  if (!in_syscall_) return true;  // execve's exit, right after the exec stop
  in_syscall_ = false;
  TraceEvent e = pending_;
  e.result = static_cast<int64_t>(regs.rax);
  if (forced_enosys_) {
    e.result = -ENOSYS;
    ::ptrace(PTRACE_POKEUSER, pid_, offsetof(user_regs_struct, rax), static_cast<long>(-ENOSYS));
    forced_enosys_ = false;
  }
  MemoryReader reader = program_memory();
  if (!take_writes(e, reader)) return false;
  if ((e.nr == SYS_execve || e.nr == SYS_execveat) && e.result == 0) {
    // The new image, before its first instruction: the vDSO hidden again, AT_RANDOM kept for
    // the replay (exec_setup.h), as at the start.
    auto facts = prepare_exec(pid_);
    if (!facts) return refuse(fmt::format("cannot set up the image {} loaded: {}", syscall_name(e.nr), facts.error().message));
    e.writes.push_back(writer_.add_data(facts->at_random_addr, facts->at_random));
  }
  int fd = static_cast<int>(e.result);
  if (e.nr == SYS_openat && e.result >= 0) fd_open_[fd] = events_.size();
  if ((e.nr == SYS_dup || e.nr == SYS_dup2 || e.nr == SYS_dup3 ||
       (e.nr == SYS_fcntl && (e.args[1] == F_DUPFD || e.args[1] == F_DUPFD_CLOEXEC))) && e.result >= 0) {
    if (auto it = fd_open_.find(static_cast<int>(e.args[0])); it != fd_open_.end()) fd_open_[fd] = it->second;
  }
  if (e.nr == SYS_close && e.result == 0) fd_open_.erase(static_cast<int>(e.args[0]));
  exit_branches_ = branches();
  if (e.nr == SYS_mmap && !(e.args[3] & 0x20 /*MAP_ANONYMOUS*/) && e.result >= 0) {
    int mapped_fd = static_cast<int>(e.args[4]);
    auto it = fd_open_.find(mapped_fd);
    if (it == fd_open_.end())
      return refuse(fmt::format("mmap of file descriptor {}, which the program did not open itself (event {})",
                                mapped_fd, events_.size()));
    char path[PATH_MAX];
    ssize_t n = ::readlink(fmt::format("/proc/{}/fd/{}", pid_, mapped_fd).c_str(), path, sizeof path - 1);
    if (n <= 0) return refuse(fmt::format("cannot tell which file descriptor {} maps", mapped_fd));
    auto index = writer_.add_file(std::string(path, static_cast<size_t>(n)), header_);
    if (!index) return refuse(index.error().message);
    e.mapped_file = *index;
    events_[it->second].mapped_file = *index;
  }
  events_.push_back(e);
  return true;
}

// The same event as its two stops would have made: the call's written bytes come from the
// record (the program may have changed them since), checked against the table's shapes.
void Recorder::buffered_syscall(pid_t /*tid*/, const BufferedSyscall& call) {
  if (refused()) return;
  TraceEvent e = event_here(EventKind::Syscall, call.pc);
  e.nr = static_cast<int64_t>(call.nr);
  std::copy(call.args, call.args + 6, e.args);
  e.result = call.result;
  // The record holds what was written at the call's output argument: the table's ranges
  // must lie in it.
  const uint64_t out = call.data_addr;
  MemoryReader reader = [&](uint64_t addr, void* dst, size_t size) {
    if (addr < out || addr - out > call.data.size() || size > call.data.size() - (addr - out)) return false;
    std::memcpy(dst, call.data.data() + (addr - out), size);
    return true;
  };
  if (!replayable_call(e, nullptr) || !take_writes(e, reader)) return;
  last_nr_ = e.nr;
  exit_branches_ = e.branches;
  events_.push_back(e);
  ++buffered_;
}

// An rdtsc trapped by PR_SET_TSC (a SIGSEGV at it).
bool Recorder::emulate_rdtsc(const user_regs_struct& regs) {
  uint8_t code[16] = {};
  auto n = mem_.read(regs.rip, code);
  auto insn = n ? nondeterministic_insn(std::span<const uint8_t>(code, *n)) : std::nullopt;
  return insn && is_tsc(*insn) && record_tsc(pid_, *insn, regs);
}

// rdtsc and rdtscp, however they were met (the trap, or the decoder stopping before them where
// the hypervisor ignores PR_SET_TSC), are Rdtsc events: a trace replays on either kind of host.
bool Recorder::record_tsc(pid_t tid, const NondeterministicInsn& insn, const user_regs_struct& regs) {
  auto result = execute_here(insn, regs);
  if (!result) return false;
  user_regs_struct out = regs;
  apply_result(insn, *result, out);
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &out) != 0) return false;
  TraceEvent e = event_here(EventKind::Rdtsc, regs.rip);
  e.nr = insn.kind == NondeterministicInsn::Kind::Rdtscp ? 1 : 0;
  e.args[0] = out.rax;
  e.args[1] = out.rdx;
  e.args[2] = out.rcx;
  events_.push_back(e);
  return true;
}

// Run here (this CPU's answer, as the program would have had it) and written down.
SyscallInterceptor::InstructionVerdict Recorder::take_instruction(pid_t tid, const NondeterministicInsn& insn) {
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return {};
  if (is_tsc(insn)) return record_tsc(tid, insn, regs) ? InstructionVerdict{true, false, {}} : InstructionVerdict{};
  auto result = execute_here(insn, regs);
  if (!result) return {};  // this CPU lacks it: the program's own attempt faults (SIGILL, recorded)
  TraceEvent e = event_here(EventKind::Instruction, regs.rip);
  e.nr = static_cast<int64_t>(insn.kind);
  std::copy(result->value, result->value + 4, e.args);
  e.args[4] = input_of(insn, regs);
  apply_result(insn, *result, regs);
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0) return {};
  events_.push_back(e);
  return {true, false, {}};
}

int Recorder::on_signal(int sig) {
  siginfo_t si{};
  ::ptrace(PTRACE_GETSIGINFO, pid_, nullptr, &si);
  user_regs_struct regs{};
  ::ptrace(PTRACE_GETREGS, pid_, nullptr, &regs);
  if (sig == SIGSEGV && si.si_code == SI_KERNEL && emulate_rdtsc(regs)) return 0;
  if (!deterministic_signal(si, pid_, last_nr_)) {
    bool ours = si.si_code == SI_TKILL && si.si_pid == ::getpid();
    bool in_user_code = static_cast<int64_t>(regs.orig_rax) < 0;
    if (cpu_clock_ != -1 && pacer_.arrived(&si, ours, in_user_code, cpu_ns()) != SignalPacer::Action::Deliver) return 0;
    if (ours) ::ptrace(PTRACE_SETSIGINFO, pid_, nullptr, &si);  // the held signal's own, for its handler
  }
  TraceEvent e;
  e.kind = EventKind::Signal;
  e.nr = sig;
  e.pc = regs.rip;
  e.branches = branches();
  e.args[0] = static_cast<uint64_t>(si.si_code);
  if (!deterministic_signal(si, pid_, last_nr_)) {
    // Right at the return of the last syscall (no instruction since): the replay sends it there.
    const TraceEvent* last = events_.empty() ? nullptr : &events_.back();
    bool at_exit = last && last->kind == EventKind::Syscall && !in_syscall_ && last->pc == regs.rip &&
                   exit_branches_ == e.branches;
    // Elsewhere in its code: the replay runs to this count and pc and checks the registers.
    e.args[1] = at_exit ? kSignalAtSyscallExit : kSignalInCode;
    if (!at_exit) {
      e.args[2] = register_digest(regs);
      e.args[3] = regs.rcx;
    }
    std::vector<uint8_t> info(sizeof si);
    std::memcpy(info.data(), &si, sizeof si);
    e.writes.push_back(writer_.add_data(0, info));  // the siginfo the handler gets (addr 0: not memory)
  }
  events_.push_back(e);
  return sig;
}

// Drives the program to its end, delivering the signals it gets; false when something was refused
// (the program is killed then).
bool run(Process& process, Recorder& recorder, TraceHeader& header, bool syscall_buffer) {
  if (syscall_buffer) process.tracer().set_syscall_buffer(&recorder);
  if (auto on = start_counting(process.tracer(), recorder.counter(), process.pid()); !on) return false;
  // Signals are recorded where they arrive (Recorder::take_signal) and delivered there, as a
  // client's `handle SIG nostop pass` does: a stop reported for each would take the patches
  // out and put them back (a 1 ms timer's signals then took all of the recording's time).
  std::set<int> pass;
  for (int sig = 1; sig < 65; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) pass.insert(sig);
  process.set_pass_signals(std::move(pass));
  ResumePlan plan;
  plan.others = ResumeAction{ResumeKind::Continue, 0};
  if (!process.resume(plan)) return false;
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigset_t old;
  ::sigprocmask(SIG_BLOCK, &chld, &old);
  bool ok = false;
  for (;;) {
    auto ev = process.poll_events();
    if (!ev) {
      bool holding = recorder.raise_held_signals();
      if (!process.wants_poll()) {
        timespec wait{0, holding ? 200'000 : 5'000'000};
        (void)::sigtimedwait(&chld, nullptr, &wait);
      }
      continue;
    }
    if (recorder.refused()) {
      (void)process.kill();
      break;
    }
    if (ev->kind == StopKind::Exited || ev->kind == StopKind::Killed) {
      TraceEvent e;
      e.kind = EventKind::Exit;
      e.nr = ev->kind == StopKind::Exited ? ev->exit_status : -ev->signo;
      e.branches = recorder.branches();
      header.exit_status = static_cast<int>(e.nr);
      header.complete = true;
      recorder.events().push_back(e);
      ok = true;
      break;
    }
    plan.others = ResumeAction{ResumeKind::Continue, ev->kind == StopKind::Signal ? ev->signo : 0};
    if (!process.resume(plan)) {
      (void)process.kill();
      break;
    }
  }
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  return ok;
}

}  // namespace

int record(const RecordOptions& options) {
  if (options.argv.empty()) {
    std::fputs("branchstub record: no program to record.\n", stderr);
    return kCannotRecord;
  }
  std::string dir = absolute(options.dir.empty() ? new_trace_dir(options.argv.front()) : options.dir);
  auto writer = TraceWriter::create(dir);
  if (!writer) {
    std::fprintf(stderr, "branchstub record: %s\n", writer.error().message.c_str());
    return kCannotRecord;
  }
  LaunchOptions launch;
  launch.argv = options.argv;
  launch.startup_with_shell = false;  // the shell would add to the environment and exec twice
  launch.disable_randomization = true;
  launch.trap_tsc = true;
  // An ordinary inferior, as replay's: its branches are counted the same way in both.
  auto process = LinuxProcess::launch_process(launch);
  if (!process) {
    std::fprintf(stderr, "branchstub record: %s\n", process.error().message.c_str());
    return kCannotRecord;
  }
  if (options.source != TraceSource::Auto) {  // --btrace-source=soft: the engine counts alone
    ProcessSettings settings;
    settings.trace_source = options.source;
    (*process)->configure(settings);
  }
  pid_t pid = (*process)->pid();
  TraceHeader header;
  header.argv = options.argv;
  header.pid = pid;
  CpuFeatures cpu = read_cpu_features();
  header.cpu = cpu.cpu;
  header.cpu_features = cpu.words;
  header.xcr0 = cpu.xcr0;
  char cwd[PATH_MAX];
  header.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  if (auto env = read_proc_file(pid, "environ")) {
    std::string all(env->begin(), env->end());
    for (size_t at = 0; at < all.size();) {
      size_t end = all.find('\0', at);
      if (end == std::string::npos) end = all.size();
      if (end > at) header.env.push_back(all.substr(at, end - at));
      at = end + 1;
    }
  }
  char exe[PATH_MAX];
  ssize_t n = ::readlink(fmt::format("/proc/{}/exe", pid).c_str(), exe, sizeof exe - 1);
  header.exe = n > 0 ? std::string(exe, static_cast<size_t>(n)) : options.argv.front();
  header.exe_hash = hash_file(header.exe).ok() ? *hash_file(header.exe) : 0;
  auto facts = prepare_exec(pid);
  if (!facts) {
    (void)(*process)->kill();
    std::fprintf(stderr, "branchstub record: %s\n", facts.error().message.c_str());
    return kCannotRecord;
  }
  header.auxv = facts->auxv;
  header.at_random = facts->at_random;
  header.fds = facts->fds;
  header.sig_ignored = facts->sig_ignored;
  header.sig_blocked = facts->sig_blocked;

  auto* recorder = new Recorder(pid, **writer, header);
  (*process)->set_syscall_interceptor(std::unique_ptr<SyscallInterceptor>(recorder));
  header.syscall_buffer = options.syscall_buffer && options.source != TraceSource::Software;
  bool ok = run(**process, *recorder, header, options.syscall_buffer);
  for (auto& e : recorder->events()) (void)(*writer)->add_event(std::move(e));
  if (!ok) {
    std::fprintf(stderr,
                 "branchstub record: refused: %s.\nbranchstub record: the program was stopped; %s holds no "
                 "replayable trace (docs/record-replay.md says what is supported).\n",
                 recorder->why().c_str(), dir.c_str());
    return kCannotRecord;
  }
  if (auto done = (*writer)->finish(header); !done) {
    std::fprintf(stderr, "branchstub record: %s\n", done.error().message.c_str());
    return kCannotRecord;
  }
  // latest-trace beside the default traces names this one.
  std::string link = default_trace_root() + "/latest-trace";
  make_dirs(default_trace_root());
  ::unlink(link.c_str());
  (void)::symlink(dir.c_str(), link.c_str());
  std::string buffered = recorder->buffered() ? fmt::format(" ({} system calls recorded without a stop)", recorder->buffered()) : "";
  if (recorder->held_signals())
    buffered += fmt::format(" ({} asynchronous signals delivered later than sent: the program ran too little between them)",
                            recorder->held_signals());
  std::fprintf(stderr, "branchstub record: %llu events%s; trace in %s\n",
               static_cast<unsigned long long>(header.event_count), buffered.c_str(), dir.c_str());
  return header.exit_status >= 0 ? header.exit_status : 128 - header.exit_status;
}

}  // namespace backend::replay
