// LinuxProcess: tracepoints (issue 31). The experiment (backend/trace/trace_experiment.h)
// decides what a hit collects; here its sites become int3s of ours, each hit is collected
// without a stop for the client and passed as an unreported conditional breakpoint is
// (pass_client_breakpoint), and while-stepping single-steps the thread collecting each step.
#include "backend/linux/linux_process.h"

namespace backend {

Result<void> LinuxProcess::set_trace_experiment(trace::TraceExperiment* experiment) {
  if (experiment_ == experiment) return {};
  experiment_ = nullptr;
  sync_tracepoints();  // the old one's sites out
  experiment_ = experiment;
  if (experiment_) experiment_->set_register_block_size(layout_.total_bytes);
  if (experiment_) experiment_->set_pc_offset(layout_.regs[RegisterLayout::kRip].offset);
  sync_tracepoints();
  return {};
}

void LinuxProcess::sync_tracepoints() {
  std::set<uint64_t> want;
  if (experiment_ && alive()) want = experiment_->addresses();
  for (auto it = tracepoint_sites_.begin(); it != tracepoint_sites_.end();) {
    if (want.count(*it)) {
      ++it;
      continue;
    }
    (void)breakpoints_.remove(mem_, *it, BreakpointOwner::Tracepoint);
    it = tracepoint_sites_.erase(it);
  }
  for (uint64_t addr : want) {
    if (tracepoint_sites_.count(addr)) continue;
    // Patched code keeps an int3 from being met: the block-patching source gives those sites
    // back to the original code (as for the replay's watch int3).
    stepper_.patch_suspend(nullptr);
    if (auto r = breakpoints_.insert(mem_, addr, BreakpointOwner::Tracepoint); r) tracepoint_sites_.insert(addr);
    else log("tracepoint at {:#x}: {}", addr, r.error().message);
  }
  prepare_fast_sites();
}

trace::HitSite LinuxProcess::hit_site(LinuxThread& t) {
  trace::HitSite site;
  pid_t tid = t.tid;
  site.register_block = [this, tid]() -> std::optional<std::vector<uint8_t>> {
    auto r = read_registers(tid, RegisterSet::All);
    if (!r) return std::nullopt;
    return std::move(r->bytes);
  };
  site.reg = [this, tid](int regno) -> std::optional<uint64_t> {
    if (regno < 0 || static_cast<size_t>(regno) >= layout_.regs.size() || layout_.regs[regno].bitsize > 64)
      return std::nullopt;
    auto r = read_registers(tid, is_general_register(regno) ? RegisterSet::General : RegisterSet::All);
    if (!r || !r->valid[static_cast<size_t>(regno)]) return std::nullopt;
    return r->get_u64(layout_, regno);
  };
  site.read = [this](uint64_t a, std::span<uint8_t> out) {
    auto n = read_memory(a, out);  // as the program sees it: our int3s hidden
    return n && *n == out.size();
  };
  site.now_usec = trace::now_usec();
  return site;
}

bool LinuxProcess::tracepoint_hit(LinuxThread& t, uint64_t addr) {
  if (!experiment_ || !experiment_->running()) return false;
  trace::HitOutcome out = experiment_->hit(addr, hit_site(t));
  if (settings_.log)
    log("thread {}: tracepoint site {:#x}: {}{}", t.tid, addr, out.collected ? "collected" : "condition false",
        out.stop_tracing ? ", the experiment stopped" : "");
  if (out.stop_tracing) sync_tracepoints();
  if (!breakpoints_.contains(addr)) {
    // The experiment stopped and its int3 went: the thread carries on from here.
    if (breakpoints_.has_client(addr)) return false;
    if (!stopping()) resume_thread(t, 0);
    return true;
  }
  if (breakpoints_.has_client(addr) || breakpoints_.has(addr, BreakpointOwner::Internal) || t.overlaid() ||
      !(t.in<run::Normal>() || t.in<run::RangeStep>() || t.in<run::Traced>()))
    return false;
  if (stopping()) return true;  // it waits on the site; the next resume steps it over
  if (out.steps > 0 && !non_stop_ && t.action.kind == ResumeKind::Continue) {
    // While-stepping: the step over the site is the first step.
    t.trace_steps = LinuxThread::TraceSteps{out.step_tracepoint, out.step_addr, out.steps, t.action};
    t.action.kind = ResumeKind::Step;
  }
  pass_client_breakpoint(t, addr);
  return true;
}

void LinuxProcess::step_onto_tracepoint(LinuxThread& t) {
  if (!experiment_ || !experiment_->running()) return;
  uint64_t pc = get_pc(t.tid);
  if (!breakpoints_.has(pc, BreakpointOwner::Tracepoint)) return;
  if (experiment_->hit(pc, hit_site(t)).stop_tracing) sync_tracepoints();
}

void LinuxProcess::trace_step_done(LinuxThread& t) {
  if (auto* over = std::get_if<run::StepOver>(&t.mode)) {
    (void)breakpoints_.lower(mem_, over->addr);
    set_mode(t, run::Normal{});
  }
  auto& steps = *t.trace_steps;
  bool more = experiment_ && experiment_->step(steps.tracepoint, steps.addr, hit_site(t)) && --steps.left > 0;
  if (more && !stopping()) return resume_thread(t, 0);  // t.action is a step
  t.action = steps.action;
  t.trace_steps.reset();
  if (stopping()) return;
  ResumeAction next = t.action;
  next.signo = 0;
  deferred_[t.tid] = next;
  start_deferred();
}

}  // namespace backend
