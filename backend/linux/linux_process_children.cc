// LinuxProcess's children: a fork or vfork child (our int3s taken out of it, then reported as
// a process of its own or let go), the exec that replaces the image, and the hand-over of the
// reported children.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <cerrno>
#include <utility>
#include <vector>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/remote_syscall.h"

namespace backend {

void LinuxProcess::handle_fork(LinuxThread& t, int event, pid_t child) {
  // The child starts stopped and traced. Our int3s and debug registers come out of it first
  // (a vfork child shares our memory until it execs or exits: they go back in at VFORK_DONE);
  // then it is reported (a process of its own, handed over with take_fork_children), or let go.
  int status = 0;
  while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
  if (event == PTRACE_EVENT_FORK) {
    ProcMemory child_mem(child);
    breakpoints_.restore_into(child_mem);
    stepper_.patch_restore_into(child_mem);
    restore_fast_sites_into(child_mem);
  } else {
    breakpoints_.restore_into(mem_);
    breakpoints_.set_shared_with_vfork_child(true);  // int3s armed meanwhile wait for VFORK_DONE
    stepper_.patch_suspend(&t);  // the child runs in our memory: original code
  }
  DebugRegisters::clear_thread(child);
  if (tsc_trapped_ && WIFSTOPPED(status)) {
    // Runs in the child, at its pc (a vfork child's memory is ours: we are stopped meanwhile).
    auto on = patch::inject_syscall(child, child, ProcMemory(child), SYS_prctl, {PR_SET_TSC, PR_TSC_ENABLE});
    if (!on || *on != 0) log("child {}: rdtsc stays trapped (prctl failed)", child);
  }
  bool tell = event == PTRACE_EVENT_FORK ? report_forks_ : report_vforks_;
  log("thread {}: {} child {}{}", t.tid, event == PTRACE_EVENT_FORK ? "fork" : "vfork", child,
      tell && WIFSTOPPED(status) ? ", reported" : ", let go");
  if (!tell || !WIFSTOPPED(status)) {
    ::ptrace(PTRACE_DETACH, child, nullptr, nullptr);
    if (!stopping()) resume_thread(t, 0);
    return;
  }
  // Already traced with our options (inherited from the fork) and stopped; its memory holds
  // none of our int3s.
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(child, attached_));
  p->threads_.emplace(child, LinuxThread{child});
  p->last_stop_ = p->make_event(StopKind::Signal, child, SIGTRAP);
  p->configure(settings_);
  if (non_stop_) (void)p->set_non_stop(true);  // a child of a non-stop session is non-stop too
  p->thread_events_ = thread_events_;
  fork_children_.push_back(std::move(p));
  StopEvent ev = make_event(event == PTRACE_EVENT_FORK ? StopKind::Fork : StopKind::VFork, t.tid, SIGTRAP);
  ev.child_pid = child;
  report(t, ev);
}

void LinuxProcess::handle_exec() {
  exec_expected_until_ = {};
  // The image changed: breakpoints are gone, only the thread that exec'd remains, as the leader.
  // Reported as an exec; a client that did not ask for exec events sees a SIGTRAP.
  for (const auto& [tid, old] : threads_)
    if (tid != pid_) tracer_->thread_exited(tid);
  threads_.clear();
  deferred_.clear();
  chosen_.reset();
  untold_exits_.clear();
  option_exits_.clear();
  phase_ = Phase::Running;
  // Non-stop: the other threads are gone, with their unreported events and any pause.
  ns_events_.clear();
  stashed_.clear();
  step_over_tid_ = 0;
  step_over_paused_.clear();
  LinuxThread& leader = threads_.emplace(pid_, LinuxThread{pid_}).first->second;
  leader.resumed = non_stop_;
  breakpoints_.clear();
  page_ = PageWatch{};        // the protected pages went with the old image
  tracepoint_sites_.clear();  // the new image's code: sites go in again if it has them
  forget_fast_sites();
  conditions_.clear();
  code_cache_.clear();
  displaced_page_ = 0;  // gone with the old image
  displaced_refused_ = false;
  stepper_.patch_reset();
  watch_.forget_code();
  mem_.open(pid_);
  (void)debug_.apply(pid_);
  if (interceptor_) {  // record/replay: the new image is set up before it runs
    auto verdict = interceptor_->exec_done(pid_);
    if (verdict.stop) {
      console_output_ += verdict.message;
      leader.last_signal = SIGTRAP;
      return report(leader, make_event(StopKind::Signal, pid_, SIGTRAP));
    }
  }
  StopEvent ev = make_event(StopKind::Exec, pid_, SIGTRAP);
  if (auto path = read_exe_path(pid_)) ev.exec_path = *path;
  log("process {}: exec {}", pid_, ev.exec_path);
  report(leader, ev);
}

std::vector<std::unique_ptr<Process>> LinuxProcess::take_fork_children() {
  std::vector<std::unique_ptr<Process>> out;
  for (auto& child : fork_children_) out.push_back(std::move(child));
  fork_children_.clear();
  return out;
}

std::unique_ptr<LinuxProcess> LinuxProcess::adopt_stopped_child(pid_t child) {
  std::unique_ptr<LinuxProcess> p(new LinuxProcess(child, false));
  p->threads_.emplace(child, LinuxThread{child});
  p->last_stop_ = p->make_event(StopKind::Signal, child, SIGTRAP);
  return p;
}

Result<pid_t> LinuxProcess::fork_stopped() {
  if (!alive_ || threads_.size() != 1 || running()) return Error{EINVAL, "Only a stopped single-threaded process forks."};
  pid_t tid = threads_.begin()->first;
  user_regs_struct saved{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &saved) != 0) return Error{errno, "PTRACE_GETREGS"};
  uint8_t original[2] = {};
  if (auto n = mem_.read(saved.rip, original); !n || *n != 2) return Error{EIO, "cannot read the code at pc"};
  const uint8_t syscall_insn[2] = {0x0f, 0x05};
  if (auto w = mem_.write(saved.rip, syscall_insn); !w) return w.error();
  user_regs_struct regs = saved;
  regs.rax = SYS_fork;
  ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs);
  auto put_back = [&](pid_t who, const ProcMemory& mem) {
    (void)mem.write(saved.rip, original);
    ::ptrace(PTRACE_SETREGS, who, nullptr, &saved);
  };
  pid_t child = 0;
  // One step runs the fork (its event stop first), another ends it. A signal that comes first
  // waits: SIGCHLD (an earlier copy of a checkpoint ended: nothing the program ever had) is
  // dropped, any other is sent again after.
  std::vector<int> later;
  for (int steps = 0; steps < 16; ++steps) {
    if (::ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr) != 0) break;
    int status = 0;
    while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
    if (!WIFSTOPPED(status)) {
      alive_ = false;
      return Error{ESRCH, "the process ended while forking"};
    }
    if (status >> 8 == (SIGTRAP | (PTRACE_EVENT_FORK << 8))) {
      unsigned long msg = 0;
      ::ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &msg);
      child = static_cast<pid_t>(msg);
      continue;
    }
    if (WSTOPSIG(status) == SIGTRAP && child) break;
    if (WSTOPSIG(status) != SIGTRAP && WSTOPSIG(status) != SIGCHLD) later.push_back(WSTOPSIG(status));
  }
  put_back(tid, mem_);
  for (int sig : later) ::syscall(SYS_tgkill, pid_, tid, sig);
  if (!child) return Error{EIO, "the injected fork did not fork"};
  int status = 0;
  while (::waitpid(child, &status, __WALL) < 0 && errno == EINTR) {}
  if (!WIFSTOPPED(status)) return Error{ESRCH, "the forked copy did not stop"};
  ProcMemory child_mem(child);
  put_back(child, child_mem);
  breakpoints_.restore_into(child_mem);
  restore_pages_into(child, child_mem);
  stepper_.patch_restore_into(child_mem);
  restore_fast_sites_into(child_mem);
  DebugRegisters::clear_thread(child);
  return child;
}

}  // namespace backend
