// LinuxProcess: target-side breakpoint conditions and commands (issue 17). The stop dispatcher
// (linux_process_dispatch.cc) asks client_hit_reported() at each hit of a client code
// breakpoint that has a program; a hit that is not reported is passed here without the client
// hearing of it.
#include <signal.h>

#include "backend/linux/linux_process.h"

namespace backend {

namespace {
// Output nobody takes (no client waiting) is kept up to this much; the rest is dropped.
constexpr size_t kMaxConsoleBacklog = 1 << 20;
}  // namespace

bool LinuxProcess::client_hit_reported(LinuxThread& t, uint64_t addr, bool int3) {
  // While the process stops for another event, the thread stays on the breakpoint without
  // running anything: at the next resume it hits it again, and that hit is evaluated (so
  // commands never run twice for one hit).
  if (stopping()) return false;
  if (hit_counts(t, addr)) return true;
  if (auto* sb = std::get_if<run::StepBranch>(&t.mode)) {
    // stepbranch executes the instruction under the int3 itself (lifted) and counts on.
    sb->pass_client_at = addr;
    stepper_.stepbranch_run(t);
    return false;
  }
  if (!int3) {
    // A debug-register breakpoint: the kernel set RF at the trap, so the instruction runs
    // without trapping again when the thread resumes.
    resume_thread(t, 0);
    return false;
  }
  pass_client_breakpoint(t, addr);
  return false;
}

bool LinuxProcess::hit_counts(LinuxThread& t, uint64_t addr) {
  // Registers are read on first use, the general ones with one PTRACE_GETREGS.
  std::optional<RegisterFile> general, all;
  agent::Context ctx;
  ctx.reg = [&](int regno) -> std::optional<uint64_t> {
    if (regno < 0 || static_cast<size_t>(regno) >= layout_.regs.size() || layout_.regs[regno].bitsize > 64)
      return std::nullopt;
    bool gpr = is_general_register(regno);
    auto& file = gpr ? general : all;
    if (!file) {
      auto r = read_registers(t.tid, gpr ? RegisterSet::General : RegisterSet::All);
      if (!r) return std::nullopt;
      file = std::move(*r);
    }
    if (!file->valid[static_cast<size_t>(regno)]) return std::nullopt;
    return file->get_u64(layout_, regno);
  };
  ctx.read = [this](uint64_t a, std::span<uint8_t> out) {
    auto n = read_memory(a, out);  // as the program sees it: our int3s hidden
    return n && *n == out.size();
  };
  HitVerdict v = conditions_.hit(addr, ctx);
  if (settings_.log)
    log("thread {}: breakpoint {:#x}: {}{}{}", t.tid, addr, v.report ? "reported" : "passed",
        v.commands_ran ? ", commands ran" : "", v.error.empty() ? "" : " (" + v.error + ")");
  if (!v.output.empty() && console_output_.size() < kMaxConsoleBacklog)
    console_output_ += v.output.substr(0, kMaxConsoleBacklog - console_output_.size());
  return v.report;
}

// gdbserver's step-over: nobody else may run while the int3 is lifted (they could pass it
// unseen). With other threads running they are stopped first (their events wait as pending,
// as at any stop), then every thread that ran is resumed as by a new resume with the same
// actions: start_deferred steps t over (or emulates a branch in place) while the others wait,
// then lets them all go. A pending event found on the way is reported first, and t, still on
// its breakpoint, hits it again at the next resume.
void LinuxProcess::pass_client_breakpoint(LinuxThread& t, uint64_t addr, const std::function<void()>& while_stopped) {
  stepper_.commit_plan(t, addr);  // a traced thread: the direct branches it took on its way here
  ResumePlan plan;
  plan.step_over_client_breakpoints = step_over_clients_;
  bool others = false;
  for (auto& [tid, o] : threads_) {
    if (&o != &t && !o.running) continue;
    others = others || &o != &t;
    ResumeAction a = o.action;
    a.signo = 0;  // a signal to deliver is kept as deliver_signal, which resume() picks up
    plan.threads[tid] = a;
  }
  pid_t tid = t.tid;
  if (others) {
    std::set<pid_t> known;
    for (const auto& [id, o] : threads_) known.insert(id);
    stop_all_sync();  // phase Stopped
    // Threads created meanwhile were left stopped (the clone handler resumes none while the
    // process stops): they start now with their default action.
    for (const auto& [id, o] : threads_)
      if (!known.count(id) && !o.zombie) plan.threads[id] = o.action;
    if (interrupt_requested_) {
      // The ^C's SIGSTOP was swallowed by the stop: report it now, as it would have been.
      interrupt_requested_ = false;
      phase_ = Phase::Running;
      if (LinuxThread* leader = find(pid_)) return report(*leader, make_event(StopKind::Signal, pid_, SIGINT));
      return report(t, make_event(StopKind::Signal, tid, SIGINT));
    }
  } else {
    phase_ = Phase::Stopped;
  }
  if (while_stopped) while_stopped();
  for (auto it = plan.threads.begin(); it != plan.threads.end();)
    it = has_thread(it->first) ? std::next(it) : plan.threads.erase(it);
  pass_once_ = std::pair{tid, addr};
  auto r = resume(plan);
  pass_once_.reset();
  if (!r) {
    // Nothing to resume any more (the threads vanished meanwhile): poll_events says so.
    log("thread {}: cannot pass the breakpoint at {:#x}: {}", tid, addr, r.error().message);
    phase_ = Phase::Running;
  }
}

}  // namespace backend
