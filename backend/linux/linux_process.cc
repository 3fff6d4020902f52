// LinuxProcess: creation (launch, attach, a fork child's process in linux_process_children.cc),
// detach and kill, the public queries and the small helpers every part uses. Which file holds
// which job of LinuxProcess: see linux_process.h.
#include "backend/linux/linux_process.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstddef>
#include <utility>

#include <fmt/format.h>

#include "backend/ptrace/launch.h"
#include "backend/ptrace/proc_info.h"

namespace backend {

namespace {

constexpr long kTraceOptions = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEFORK |
                               PTRACE_O_TRACEVFORK | PTRACE_O_TRACEVFORKDONE | PTRACE_O_TRACESYSGOOD;

}  // namespace

const char* mode_name(const RunMode& mode) {
  struct Name {
    const char* operator()(const run::Normal&) const { return "normal"; }
    const char* operator()(const run::RangeStep&) const { return "range-step"; }
    const char* operator()(const run::StepOver&) const { return "step-over"; }
    const char* operator()(const run::Traced&) const { return "traced"; }
    const char* operator()(const run::StepBranch&) const { return "stepbranch"; }
    const char* operator()(const run::WatchStep&) const { return "watch-step"; }
  };
  return std::visit(Name{}, mode);
}

// ---------------------------------------------------------------- creation

Result<std::unique_ptr<Process>> Process::launch(const LaunchOptions& options) {
  auto p = LinuxProcess::launch_process(options);
  if (!p) return p.error();
  return std::unique_ptr<Process>(std::move(p.value()));
}

Result<std::unique_ptr<Process>> Process::attach(pid_t pid) {
  auto p = LinuxProcess::attach_process(pid);
  if (!p) return p.error();
  return std::unique_ptr<Process>(std::move(p.value()));
}

LinuxProcess::LinuxProcess(pid_t pid, bool attached)
    : pid_(pid), attached_(attached), layout_(make_register_layout(host_xcr0())), mem_(pid),
      tracer_(std::make_unique<TraceManager>(TraceSource::Auto, [this](pid_t tid) { return get_pc(tid); })),
      code_cache_([this](uint64_t addr, std::span<uint8_t> out) -> size_t {
        if (alive_ && stepper_.patch_read_code(addr, out)) return out.size();
        auto n = read_memory(addr, out);  // through the breakpoint shadow: original bytes
        return n ? *n : 0;
      }),
      stepper_(*this, breakpoints_, mem_, code_cache_, tracer_, layout_),
      watch_reader_([this](uint64_t addr, std::span<uint8_t> out) {
        auto n = mem_.read(addr, out);
        if (!n || *n != out.size()) return false;
        breakpoints_.unshadow(addr, out);
        return true;
      }),
      code_reader_([this](uint64_t addr, std::span<uint8_t> out) -> size_t {
        auto n = read_memory(addr, out);
        return n ? *n : 0;
      }) {}

void LinuxProcess::configure(const ProcessSettings& settings) {
  settings_ = settings;
  uint64_t size = tracer_->buffer_size(0);
  tracer_ = std::make_unique<TraceManager>(settings.trace_source, [this](pid_t tid) { return get_pc(tid); });
  tracer_->set_buffer_size(size);
  TraceSetup setup = settings.trace_setup;
  setup.code = [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = read_memory(addr, out);  // our breakpoints hidden
    return n ? *n : 0;
  };
  tracer_->configure(setup);
  if (interceptor_) interceptor_->tracer_replaced(*tracer_);
}

LinuxProcess::~LinuxProcess() {
  // Launched programs die with us (as gdbserver's do); attached ones are let go. Fork children
  // not handed over go the same way (their own destructors).
  fork_children_.clear();
  if (!alive_) return;
  if (attached_) (void)detach();
  else (void)kill();
}

void LinuxProcess::set_trace_options(pid_t tid) {
  // EXITKILL only for what we launched: an attached program must survive the server.
  long opts = kTraceOptions | (attached_ ? 0 : PTRACE_O_EXITKILL);
  ::ptrace(PTRACE_SETOPTIONS, tid, nullptr, reinterpret_cast<void*>(opts));
}

Result<std::unique_ptr<LinuxProcess>> LinuxProcess::launch_process(const LaunchOptions& options) {
  auto pid = launch_traced(options);
  if (!pid) return pid.error();
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(*pid, false));
  p->tsc_trapped_ = options.trap_tsc;
  p->set_trace_options(*pid);
  p->threads_.emplace(*pid, LinuxThread{*pid});
  p->last_stop_ = p->make_event(StopKind::Signal, *pid, SIGTRAP);
  return p;
}

Result<std::unique_ptr<LinuxProcess>> LinuxProcess::attach_process(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))
    return Error{ESRCH, fmt::format("Cannot attach to process {}: No such process.", pid)};
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(pid, true));
  p->fresh_attach_ = true;
  int first_signal = 0;
  pid_t first_signal_tid = pid;
  // Threads may be created while we attach: re-scan until no new one shows up.
  for (bool added = true; added;) {
    added = false;
    for (pid_t tid : list_tasks(pid)) {
      if (p->threads_.count(tid)) continue;
      if (::ptrace(PTRACE_ATTACH, tid, nullptr, nullptr) != 0) {
        int e = errno;
        if (e == ESRCH && tid != pid) continue;  // the thread exited meanwhile
        p->alive_ = false;
        for (auto& [other, t] : p->threads_) ::ptrace(PTRACE_DETACH, other, nullptr, nullptr);
        if (e == EPERM)
          return Error{EPERM, fmt::format("Cannot attach to process {}: Operation not permitted (is it already "
                                          "traced, owned by another user, or does "
                                          "/proc/sys/kernel/yama/ptrace_scope forbid it?).", pid)};
        return errno_error(fmt::format("Cannot attach to process {}", pid), e);
      }
      // Wait for the attach SIGSTOP. A signal that comes first is what the attach stop reports
      // (as gdbserver does); the client decides whether to pass it on.
      for (;;) {
        int status = 0;
        if (::waitpid(tid, &status, __WALL) < 0) {
          if (errno == EINTR) continue;
          break;
        }
        if (!WIFSTOPPED(status)) break;
        if (WSTOPSIG(status) == SIGSTOP) break;
        if (WSTOPSIG(status) != SIGTRAP && !first_signal) {
          first_signal = WSTOPSIG(status);
          first_signal_tid = tid;
        }
        ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
      }
      p->threads_.emplace(tid, LinuxThread{tid});
      added = true;
    }
  }
  if (!p->threads_.count(pid)) {
    p->alive_ = false;
    return Error{ESRCH, fmt::format("Cannot attach to process {}: No such process.", pid)};
  }
  for (auto& [tid, t] : p->threads_) p->set_trace_options(tid);
  if (first_signal && p->threads_.count(first_signal_tid)) {
    p->last_stop_ = p->make_event(StopKind::Signal, first_signal_tid, first_signal);
    p->threads_.at(first_signal_tid).last_signal = first_signal;
  } else {
    p->last_stop_ = p->make_event(StopKind::Signal, pid, 0);  // GDB shows T00 after attach
  }
  return p;
}

// ---------------------------------------------------------------- detach and kill

void LinuxProcess::forget_process(StopEvent exit_event) {
  log("process {}: gone ({})", pid_, exit_event.kind == StopKind::Killed ? "killed" : "exited");
  for (const auto& [tid, t] : threads_) tracer_->thread_exited(tid);
  code_cache_.clear();
  alive_ = false;
  threads_.clear();
  deferred_.clear();
  chosen_.reset();
  untold_exits_.clear();
  option_exits_.clear();
  leader_exit_status_.reset();
  mem_.close();
  breakpoints_.clear();
  tracepoint_sites_.clear();
  conditions_.clear();
  debug_.clear();
  watch_.clear();
  last_stop_ = std::move(exit_event);
}

Result<void> LinuxProcess::detach() {
  if (!alive_) return {};
  if (leader_exit_status_) {  // every thread is gone and reaped: nothing to detach
    forget_process(make_event(StopKind::Exited, pid_));
    exit_unreported_ = false;
    return {};
  }
  stop_all_sync();
  if (!alive_) return {};
  settle_fast_sites();     // no thread in a pad, no jump to one
  if (page_.armed)         // the program goes on with its own page protection
    if (LinuxThread* t = find(pid_); t && set_page_protection(*t, *page_.armed, false)) page_.armed.reset();
  release_patches(true);  // the program goes on with its own code and no areas of ours
  breakpoints_.restore_all(mem_);
  tracepoint_sites_.clear();
  for (auto& [tid, t] : threads_) {
    DebugRegisters::clear_thread(tid);
    int sig = t.deliver_signal;
    if (!sig && t.pending && t.pending->kind == StopKind::Signal) sig = t.pending->signo;
    if (!sig && t.last_signal && t.last_signal != SIGTRAP &&
        (!program_signals_set_ || program_signals_.count(t.last_signal)))
      sig = t.last_signal;
    // Our SIGSTOP is still queued: collect it first, or the program would stop untraced.
    if (t.sigstop_expected && ::ptrace(PTRACE_CONT, tid, nullptr, nullptr) == 0) {
      for (;;) {
        int status = 0;
        if (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) continue;
        if (!WIFSTOPPED(status) || WSTOPSIG(status) == SIGSTOP) break;
        if (WSTOPSIG(status) != SIGTRAP) sig = WSTOPSIG(status);
        ::ptrace(PTRACE_CONT, tid, nullptr, nullptr);
      }
    }
    ::ptrace(PTRACE_DETACH, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
  }
  forget_process(make_event(StopKind::Exited, pid_));
  exit_unreported_ = false;
  return {};
}

Result<void> LinuxProcess::kill() {
  if (!alive_) return {};
  if (leader_exit_status_) {  // every thread is gone and reaped (its pid may be reused): no signal
    phase_ = Phase::Stopped;
    forget_process(make_event(StopKind::Killed, pid_, SIGKILL));
    exit_unreported_ = false;
    return {};
  }
  ::kill(pid_, SIGKILL);
  // Reap every thread, the leader last, so nothing is left as a zombie.
  for (auto& [tid, t] : threads_) {
    if (tid == pid_) continue;
    int status = 0;
    while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
  }
  for (;;) {
    int status = 0;
    pid_t w = ::waitpid(pid_, &status, __WALL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 || WIFEXITED(status) || WIFSIGNALED(status)) break;
  }
  phase_ = Phase::Stopped;
  forget_process(make_event(StopKind::Killed, pid_, SIGKILL));
  exit_unreported_ = false;
  return {};
}

// ---------------------------------------------------------------- small helpers

std::vector<pid_t> LinuxProcess::threads() const {
  std::vector<pid_t> out;
  if (has_thread(pid_)) out.push_back(pid_);
  for (const auto& [tid, t] : threads_)
    if (tid != pid_) out.push_back(tid);
  return out;
}

std::string LinuxProcess::thread_name(pid_t tid) const { return read_thread_name(pid_, tid); }

int LinuxProcess::thread_core(pid_t tid) const { return read_thread_core(pid_, tid); }

LinuxThread* LinuxProcess::find(pid_t tid) {
  auto it = threads_.find(tid);
  return it == threads_.end() ? nullptr : &it->second;
}

uint64_t LinuxProcess::get_pc(pid_t tid) const {
  errno = 0;
  long v = ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

void LinuxProcess::set_pc(pid_t tid, uint64_t pc) const {
  ::ptrace(PTRACE_POKEUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), reinterpret_cast<void*>(pc));
}

void LinuxProcess::set_mode(LinuxThread& t, RunMode mode) {
  if (settings_.log && mode.index() != t.mode.index())
    log("thread {}: {} -> {}", t.tid, mode_name(t.mode), mode_name(mode));
  t.mode = std::move(mode);
}

StopEvent LinuxProcess::make_event(StopKind kind, pid_t tid, int signo) const {
  StopEvent ev;
  ev.kind = kind;
  ev.pid = pid_;
  ev.tid = tid;
  ev.signo = signo;
  return ev;
}

bool LinuxProcess::lifted_elsewhere(const LinuxThread& t, uint64_t addr) const {
  for (const auto& [tid, other] : threads_)
    if (&other != &t && other.lifted_step && other.lifted_step->lifted == addr) return true;
  return false;
}

}  // namespace backend
