#include "backend/linux/branch_stepper.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include <fmt/format.h>

namespace backend {

namespace {
// int3 stops between two pauses of the other threads for block patching's catch-up (a pause
// costs a SIGSTOP and a wait per thread: a few int3 stops' worth).
constexpr uint64_t kCatchUpStops = 64;
}  // namespace

BranchStepper::BranchStepper(Host& host, SoftwareBreakpoints& breakpoints, ProcMemory& memory, BlockCache& code,
                             std::unique_ptr<TraceManager>& tracer, const RegisterLayout& layout)
    : host_(host), breakpoints_(breakpoints), memory_(memory), code_(code), tracer_(tracer),
      layout_(layout) {}

void BranchStepper::record(LinuxThread& t, uint64_t from, uint64_t to) {
  if (traced(t.tid)) tracer_->record(t.tid, from, to);
}

void BranchStepper::arm(LinuxThread& t, uint64_t addr) {
  if (t.armed == addr) return;
  if (t.armed) (void)breakpoints_.remove(memory_, t.armed, BreakpointOwner::Internal);
  t.armed = 0;
  if (addr && breakpoints_.insert(memory_, addr, BreakpointOwner::Internal)) t.armed = addr;
}

FlowInsn BranchStepper::insn_at(uint64_t addr) {
  FlowInsn f;
  f.addr = addr;
  f.kind = FlowKind::Trap;
  if (auto d = code_.insn_at(addr)) {
    if (d->second) f = *d->second;
    else f.len = d->first;
  }
  return f;
}

// ---------------------------------------------------------------- software tracing

void BranchStepper::commit_plan(LinuxThread& t, uint64_t pc) {
  auto* traced_mode = std::get_if<run::Traced>(&t.mode);
  if (!traced_mode || !traced_mode->plan.active()) return;
  auto passed = traced_mode->plan.commit(pc, t.cursor.block_start);
  for (const Branch& b : passed) record(t, b.from, b.to);
  if (!passed.empty()) {
    t.cursor.last_flow = passed.back().from;
    t.cursor.last_flow_taken = true;
  }
}

void BranchStepper::continue_traced(LinuxThread& t, int signo) {
  if (!traced(t.tid)) {
    arm(t, 0);
    if (patch_) patch_->untraced_run(patch_thread(t));  // through the patches with a ring of its own, or none
    t.mode = run::Normal{};
    return host_.resume(t, signo);
  }
  if (!t.in<run::Traced>()) t.mode = run::Traced{};
  auto& plan = std::get<run::Traced>(t.mode).plan;
  if (!patch_ && tracer_->patch_traced(t.tid)) {
    patch_ = std::make_unique<PatchTracer>(memory_, breakpoints_, code_, tracer_);
    patch_->set_hardware_breakpoints(
        [this](uint64_t addr) { return host_.hw_breakpoint_at(addr) || host_.exact_stop_at(addr); });
    patch_->set_branch_budget([this](pid_t tid) { return host_.branch_budget(tid); });
  }
  // Replay's watch int3 goes in once the count is near (patches out first); here, before every
  // traced run, and at the stops the patcher consumes.
  if (patch_) (void)host_.exact_stop_changed();
  // The engine's int3 of the last stretch goes first: left in, the patches going in now would
  // take it for a breakpoint and leave that block end to int3 stops for good.
  if (patch_) arm(t, 0);
  // Threads that never all stop at once (workers of a compression) would leave what waits for
  // that (exits to translations, fenced patches) undone for the rest of the run, an int3 stop
  // at each pass: after some int3 stops the others are stopped for a moment and it is done.
  if (patch_ && patch_->wants_all_stopped() && int3_stops_ - catch_up_at_ >= kCatchUpStops && !host_.non_stop_mode()) {
    catch_up_at_ = int3_stops_;
    auto paused = host_.pause_others(t);
    patch_->catch_up();
    ++catch_ups_;
    host_.resume_others(paused);
  }
  if (patch_ && patch_->prepare_run(patch_thread(t), host_.watch_stepping(), host_.non_stop_mode())) {
    plan.clear();  // runs free through patched code: every exit from it stops
    t.calls_never_unseen = patch_->calls_never_unseen();
    return host_.resume(t, signo);
  }
  std::function<bool(uint64_t)> stop_before;
  if (patch_ && patch_->installed()) stop_before = [this](uint64_t target) { return patch_->enters_patched(target); };
  if (plan.plan(code_, host_.pc(t.tid), stop_before)) arm(t, plan.stop_addr());
  else arm(t, 0);  // undecodable code: it runs untraced until something stops it
  host_.resume(t, signo);
}

void BranchStepper::deliver_traced_signal(LinuxThread& t, int signo) {
  // Single-stepping with the signal stops at the handler's first instruction.
  uint64_t pc = host_.pc(t.tid);
  t.signal_entry = SignalEntry{insn_before_pc(t, pc).value_or(0), std::nullopt};
  // Came by a branch with nothing of its block run, or nothing run since recording began:
  // the handler takes that place in the history (TraceManager::signal_entry).
  t.signal_entry->arrived_by = Branch{pc == t.cursor.block_start ? t.cursor.last_flow : 0, pc};
  host_.resume(t, signo);
}

void BranchStepper::signal_entry_done(LinuxThread& t) {
  // Stopped at the handler's first instruction: the signal was a branch from the last
  // instruction executed before it.
  uint64_t pc = host_.pc(t.tid);
  if (traced(t.tid)) tracer_->signal_entry(t.tid, t.signal_entry->from, t.signal_entry->arrived_by, pc);
  t.signal_entry.reset();
  t.cursor.block_start = pc;
  t.cursor.last_flow_taken = true;
  if (t.action.kind == ResumeKind::Continue) return continue_traced(t, 0);
  host_.report(t, host_.event(StopKind::Step, t.tid, SIGTRAP));
}

void BranchStepper::internal_hit(LinuxThread& t, uint64_t addr) {
  ++int3_stops_;
  std::optional<FlowInsn> insn;
  if (auto* traced_mode = std::get_if<run::Traced>(&t.mode)) {
    if (traced_mode->plan.active() && traced_mode->plan.stop_addr() == addr) insn = traced_mode->plan.stop_insn();
    commit_plan(t, addr);
  }
  if (!insn) insn = insn_at(addr);
  if (host_.stopping()) return;  // the process is stopping: execute it at the next resume
  if (auto out = execute_flow(t, *insn)) {
    flow_done(t, *insn, *out);
    host_.proceed(t);
  }
}

std::optional<uint64_t> BranchStepper::insn_before_pc(LinuxThread& t, uint64_t pc) {
  const BranchCursor& c = t.cursor;
  if (c.block_start == 0) return std::nullopt;
  if (pc == c.block_start) {
    // Nothing ran in this block yet: the previous instruction is the last control-flow one
    // if execution fell through it (syscall, not-taken jcc).
    if (c.last_flow && !c.last_flow_taken) return c.last_flow;
    return std::nullopt;
  }
  return insn_before(code_, c.block_start, pc);
}

bool BranchStepper::rep_string_at(uint64_t pc) const {
  uint8_t code[15] = {};
  size_t n = code_.reader()(pc, code);
  bool rep = false;
  for (size_t i = 0; i < n; ++i) {
    uint8_t b = code[i];
    if (b == 0xf2 || b == 0xf3) {
      rep = true;
    } else if (b == 0x66 || b == 0x67 || b == 0x2e || b == 0x3e || b == 0x26 || b == 0x36 || b == 0x64 ||
               b == 0x65 || (b & 0xf0) == 0x40) {
      continue;  // another prefix, or REX
    } else {
      bool string_op = (b >= 0xa4 && b <= 0xa7) || (b >= 0xaa && b <= 0xaf) || (b >= 0x6c && b <= 0x6f);
      return rep && string_op;
    }
  }
  return false;
}

void BranchStepper::record_step(LinuxThread& t, uint64_t pc) {
  BranchCursor& c = t.cursor;
  if (c.step_into_handler) {
    c.step_into_handler = false;
    if (c.signal_from) record(t, c.signal_from, pc);
    c.block_start = pc;
    c.last_flow_taken = true;
    return;
  }
  auto insn = code_.insn_at(c.step_from);
  if (!insn) return;
  // Still at a rep-prefixed string instruction: one iteration of `rep movs` and the like ran,
  // nothing was taken.
  if (pc == c.step_from && !insn->second && rep_string_at(pc)) return;
  if (pc != c.step_from + insn->first) {
    record(t, c.step_from, pc);
    c.block_start = pc;
    c.last_flow = c.step_from;
    c.last_flow_taken = true;
  } else if (insn->second) {
    c.block_start = pc;
    c.last_flow = c.step_from;
    c.last_flow_taken = false;
  }
}

bool BranchStepper::patch_stop(LinuxThread& t, int status, bool settle_later) {
  if (!patch_) return false;
  uint64_t flow = 0;
  PatchThread view = patch_thread(t);
  if (t.syscall_stop) view.syscall_nr = t.syscall_stop->nr;
  switch (patch_->on_stop(view, status, &flow, settle_later)) {
    case PatchTracer::StopKind::None:
      return false;
    case PatchTracer::StopKind::Consumed:
      if (!host_.stopping()) {
        if (host_.exact_stop_changed()) continue_traced(t, 0);  // the patches came out for its int3
        else {
          t.calls_never_unseen = patch_->calls_never_unseen();  // it runs on in the patches
          host_.resume(t, 0);
        }
      }
      // The full ring is read while its thread runs on in the other: a piece at a time by
      // LinuxProcess::poll_events(), which looks for stops in between.
      return true;
    case PatchTracer::StopKind::Frontier:
      if (!host_.stopping()) continue_traced(t, 0);
      return true;
    case PatchTracer::StopKind::Miss:
      internal_hit(t, flow);  // as if the engine's int3 were there
      return true;
  }
  return false;
}

// ---------------------------------------------------------------- control-flow instructions

Result<FlowOutcome> BranchStepper::emulate(LinuxThread& t, const FlowInsn& insn) {
  // Only the general registers matter: GETREGS/SETREGS instead of the full register file.
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) != 0) return errno_error("PTRACE_GETREGS");
  return emulate(t, insn, gp);
}

Result<FlowOutcome> BranchStepper::emulate(LinuxThread& t, const FlowInsn& insn, user_regs_struct& gp) {
  gprs_to_file(gp, layout_, scratch_regs_);
  MemoryReader reader = [this](uint64_t addr, std::span<uint8_t> out) {
    auto n = memory_.read(addr, out);
    return n && *n == out.size();
  };
  MemoryWriter writer = [this](uint64_t addr, std::span<const uint8_t> data) {
    auto n = memory_.write(addr, data);
    return n && *n == data.size();
  };
  auto out = emulate_flow(insn, scratch_regs_, layout_, reader, writer);
  if (!out) return out.error();
  file_to_gprs(scratch_regs_, layout_, gp);
  if (::ptrace(PTRACE_SETREGS, t.tid, nullptr, &gp) != 0) return errno_error("PTRACE_SETREGS");
  ++emulated_flows_;
  return out;
}

std::optional<FlowOutcome> BranchStepper::execute_flow(LinuxThread& t, const FlowInsn& insn) {
  if (insn.kind == FlowKind::Trap && insn.len) {  // record/replay's cpuid, rdrand...: the interceptor's
    switch (host_.take_nondeterministic(t)) {
      case Host::Taken::Emulated: return FlowOutcome{insn.addr + insn.len, false};
      case Host::Taken::Stopped: return std::nullopt;
      case Host::Taken::No: break;
    }
  }
  if (flow_is_emulatable(insn.kind))
    if (auto out = emulate(t, insn)) return *out;
  // A syscall where other threads run: from a copy, so the int3 stays in for them (a call that
  // blocks would keep it lifted for as long as it blocks).
  if (insn.kind == FlowKind::Syscall && host_.run_syscall_displaced(t, insn)) return std::nullopt;
  // The CPU runs it (syscall, trap, or a form we cannot emulate): lift our int3 for one step.
  // Others keep running and could pass the lifted address unseen; only rare kinds get here.
  LiftedStep step{insn, 0};
  if (!host_.lifted_elsewhere(t, insn.addr) && breakpoints_.contains(insn.addr) && breakpoints_.lift(memory_, insn.addr))
    step.lifted = insn.addr;
  t.lifted_step = step;
  host_.resume(t, 0);
  return std::nullopt;
}

void BranchStepper::flow_done(LinuxThread& t, const FlowInsn& insn, const FlowOutcome& raw) {
  // A branch to the very next instruction looks like straight-line code in a trace (and to a
  // single-stepping user): it is not counted or recorded as taken.
  FlowOutcome out = raw;
  if (insn.len && out.next_pc == insn.addr + insn.len) out.taken = false;
  if (out.taken) record(t, insn.addr, out.next_pc);
  t.cursor.last_flow = insn.addr;
  t.cursor.last_flow_taken = out.taken;
  t.cursor.block_start = out.next_pc;
  if (auto* sb = std::get_if<run::StepBranch>(&t.mode); sb && out.taken) {
    sb->last = Branch{insn.addr, out.next_pc};
    if (sb->left) --sb->left;
  }
}

void BranchStepper::lifted_step_done(LinuxThread& t) {
  LiftedStep step = *t.lifted_step;
  t.lifted_step.reset();
  if (step.lifted) (void)breakpoints_.lower(memory_, step.lifted);
  uint64_t pc = host_.pc(t.tid);
  // Landing elsewhere than after the instruction: rt_sigreturn, or a handler entered at
  // syscall exit. Unknown length (undecodable bytes): nothing is recorded.
  bool moved = step.insn.len != 0 && pc != step.insn.addr + step.insn.len;
  flow_done(t, step.insn, FlowOutcome{pc, moved});
  host_.proceed(t);
}

// ---------------------------------------------------------------- stepbranch

void BranchStepper::start_step_branch(LinuxThread& t, uint32_t count, bool singleblock) {
  run::StepBranch sb;
  sb.singleblock = singleblock;
  sb.left = count == 0 ? 1 : count;
  uint64_t pc = host_.pc(t.tid);
  // GDB re-inserts its breakpoints before the packet: the one under pc is stepped over.
  sb.pass_client_at = breakpoints_.has_client(pc) ? pc : 0;
  t.mode = sb;
  stepbranch_run(t);
}

// Software stepbranch: run alone to the next control-flow instruction (client breakpoints and
// watchpoints on the way still stop it), execute it; count taken branches until done.
void BranchStepper::stepbranch_run(LinuxThread& t) {
  for (int guard = 0; guard < 100000 && !host_.stopping(); ++guard) {
    auto& sb = std::get<run::StepBranch>(t.mode);
    if (sb.left == 0) {
      StopEvent ev = host_.event(StopKind::StepBranch, t.tid, SIGTRAP);
      ev.branch_from = sb.last.from;
      ev.branch_to = sb.last.to;
      ev.step_mechanism = sb.singleblock ? "singleblock" : "software";
      arm(t, 0);
      return host_.report(t, ev);
    }
    uint64_t pc = host_.pc(t.tid);
    bool pass_client = pc == sb.pass_client_at;
    sb.pass_client_at = 0;
    if (breakpoints_.has_client(pc) && !pass_client && host_.client_breakpoint_stops(t, pc)) {
      arm(t, 0);
      return host_.report(t, host_.event(StopKind::Breakpoint, t.tid, SIGTRAP));
    }
    if (t.watch_hit) return host_.report(t, host_.event(StopKind::StepBranch, t.tid, SIGTRAP));  // the hit wins
    auto block = code_.block_at(pc);
    if (!block) {
      arm(t, 0);
      return host_.report(t, host_.event(StopKind::Signal, t.tid, SIGSEGV));  // no code at pc
    }
    bool one_at_a_time = host_.watch_stepping() || (sb.singleblock && !breakpoints_.contains(pc));
    if (breakpoints_.contains(pc) && (host_.watch_stepping() || block->end.addr != pc)) {
      // Our int3 over an ordinary instruction (or any, when every step is checked): the CPU
      // runs it alone, lifted (never emulated, so a checked step sees its accesses).
      FlowInsn one = insn_at(pc);
      one.kind = FlowKind::Trap;
      if (!execute_flow(t, one)) return;
      continue;
    }
    if (one_at_a_time) {
      // A checked single step (stepbranch_step_done), or PTRACE_SINGLEBLOCK: the CPU stops
      // after the next taken branch (stepbranch_singleblock_done).
      t.cursor.step_from = pc;
      return host_.resume(t, 0);
    }
    if (block->end.addr != pc) {
      arm(t, block->end.addr);
      return host_.resume(t, 0);  // PTRACE_CONT, this thread only
    }
    auto out = execute_flow(t, block->end);
    if (!out) return;  // stepped by the CPU: lifted_step_done() comes back here
    flow_done(t, block->end, *out);
  }
}

// A PTRACE_SINGLEBLOCK step stopped: classify_block_step says whether a branch was taken (and
// which), whether the stop belongs to the stepping machinery (a syscall exit, a handler entry,
// a step the kernel made a single step), or whether it cannot be trusted.
void BranchStepper::stepbranch_singleblock_done(LinuxThread& t, int si_code, std::optional<uint64_t> dr6) {
  auto& sb = std::get<run::StepBranch>(t.mode);
  BlockStepStop stop{SIGTRAP, si_code, host_.pc(t.tid), 0, dr6};
  user_regs_struct gp{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &gp) == 0) stop.rsp = gp.rsp;
  WordReader word = [this](uint64_t addr, uint64_t* value) {
    auto n = memory_.read(addr, std::span<uint8_t>(reinterpret_cast<uint8_t*>(value), sizeof *value));
    return n && *n == sizeof *value;
  };
  BlockStepVerdict v = classify_block_step(sb.block, stop, code_, code_.reader(), word);
  if (host_.logging()) host_.log_line(fmt::format("thread {}: block step from {:#x}: {}", t.tid, sb.block.pc, v.why));
  switch (v.result) {
    case BlockStepResult::Branch:
      sb.last = Branch{v.from, v.to};
      record(t, v.from, v.to);
      t.cursor.block_start = v.to;
      if (sb.left) --sb.left;
      break;
    case BlockStepResult::NoBranch:
      t.cursor.block_start = stop.pc;
      break;
    case BlockStepResult::NotAStep:
      arm(t, 0);
      t.last_signal = SIGTRAP;
      return host_.report(t, host_.event(StopKind::Signal, t.tid, SIGTRAP));
    case BlockStepResult::Untrusted:
      // Branches may have been missed: nothing is recorded for this step, and the rest of this
      // stepbranch is counted in software, which sees every branch.
      sb.singleblock = false;
      t.cursor.block_start = stop.pc;
      break;
  }
  stepbranch_run(t);
}

// One checked single step of a stepbranch under emulated watchpoints: a step that did not land
// after the instruction took a branch.
void BranchStepper::stepbranch_step_done(LinuxThread& t) {
  auto& sb = std::get<run::StepBranch>(t.mode);
  BranchCursor& c = t.cursor;
  uint64_t pc = host_.pc(t.tid);
  auto insn = code_.insn_at(c.step_from);
  if (insn && insn->first && pc != c.step_from + insn->first) {
    record(t, c.step_from, pc);
    sb.last = Branch{c.step_from, pc};
    c.last_flow = c.step_from;
    c.last_flow_taken = true;
    c.block_start = pc;
    if (sb.left) --sb.left;
  } else if (insn && insn->second) {
    c.last_flow = c.step_from;
    c.last_flow_taken = false;
    c.block_start = pc;
  }
  stepbranch_run(t);
}

bool BranchStepper::patch_release(pid_t tid) {
  if (!patch_) return true;
  bool ok = patch_->release(tid);
  patch_.reset();
  tracer_->set_patch_status(ok ? "patch: released (original code back, areas unmapped)"
                               : "patch: released (original code back; an area could not be unmapped)");
  return ok;
}

void BranchStepper::settle(LinuxThread& t) {
  if (patch_) {
    patch_suspend(&t);
    const auto& s = patch_->stats();
    std::string line = fmt::format(
        "patch: {} block ends patched, {} left to stops; {} branches from the ring ({} full-ring traps, {} read while the program ran), {} "
        "unknown ret/indirect targets, {} step-outs, {} installs, {} short blocks translated, {} frontier traps, {} stops at int3 sites, "
        "{} catch-ups with the other threads stopped, {} system-call stops resumed without a drain; {} ret/indirect targets "
        "in a table of {} slots; {}; {} areas shared with the server{}{}",
        s.patched_sites, s.int3_sites, s.drained, s.ring_full, s.ring_swaps, s.misses, s.step_outs, s.installs, s.translated, s.frontier,
        int3_stops_, catch_ups_, s.undrained_syscall_stops, s.table_targets, s.table_slots,
        patch_->plan_dir().empty()
            ? std::string("plan cache off")
            : fmt::format("plan cache: {} block starts explored ahead, {} dropped, {} learned", s.plan_starts,
                          s.plan_dropped, s.plan_learned),
        s.shared_areas,
        s.private_areas ? fmt::format(", {} private ({})", s.private_areas, patch_->private_why()) : std::string(),
        patch_->disabled_reason().empty() ? std::string() : "; off: " + patch_->disabled_reason());
    std::string_view sep = "; areas in the program: ";  // the data page first
    for (auto [lo, hi] : patch_->areas()) {
      line += fmt::format("{}{:#x}-{:#x}", sep, lo, hi);
      sep = ", ";
    }
    if (host_.logging()) host_.log_line(line);
    tracer_->set_patch_status(std::move(line));
  }
  commit_plan(t, host_.pc(t.tid));
  arm(t, 0);
  if (t.lifted_step && t.lifted_step->lifted) (void)breakpoints_.lower(memory_, t.lifted_step->lifted);
  t.lifted_step.reset();
  t.signal_entry.reset();
}

}  // namespace backend
