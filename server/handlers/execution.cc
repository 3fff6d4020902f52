// Resuming, stepping, stepbranch, kill, detach, run and attach.
#include <algorithm>

#include "protocol/signals.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

backend::ResumeAction to_backend(const Session& s, const protocol::ResumeAction& a) {
  backend::ResumeAction out;
  switch (a.op) {
    case protocol::VContOp::Continue: out.kind = backend::ResumeKind::Continue; break;
    case protocol::VContOp::Step: out.kind = backend::ResumeKind::Step; break;
    case protocol::VContOp::RangeStep: out.kind = backend::ResumeKind::RangeStep; break;
    case protocol::VContOp::Stop: out.kind = backend::ResumeKind::Stop; break;
  }
  out.signo = s.host_signal(a.gdb_signal);
  out.range_start = a.range_start;
  out.range_end = a.range_end;
  return out;
}

using Plans = Session::ResumePlans;

// Non-stop: whether `plans` leave the thread that forked `child` stopped at its fork. GDB stops
// the other threads (vCont;t) before it detaches a vfork child, and may run other threads
// meanwhile: the child stays held until the forking thread itself goes on.
bool fork_still_pending(Session& s, const Plans& plans, pid_t child) {
  for (auto* p : s.server().processes()) {
    for (const auto& ev : p->stopped_threads()) {
      if ((ev.kind != backend::StopKind::Fork && ev.kind != backend::StopKind::VFork) || ev.child_pid != child) continue;
      for (const auto& [q, plan] : plans) {
        if (q != p) continue;
        auto it = plan.threads.find(ev.tid);
        auto a = it != plan.threads.end() ? std::optional(it->second) : plan.others;
        if (a && a->kind != backend::ResumeKind::Stop) return false;
      }
      return true;
    }
  }
  return false;
}

Reply start_resume(Session& s, Plans plans) {
  auto requests = s.begin_resume(plans);  // a stepbranch-next it fulfils comes back; any other expires
  if (plans.empty()) return error_reply(EINVAL, "No thread to resume.");
  // LLDB expects the server to step over a breakpoint at the resume pc; GDB does that itself.
  for (auto& [p, plan] : plans) plan.step_over_client_breakpoints = s.dialect().lldb;
  auto& table = s.server().process_table();
  for (pid_t child : table.held()) {
    // A fork child the client neither detached nor named (so never took on) is let go
    // rather than left stopped for ever.
    if (s.non_stop() && fork_still_pending(s, plans, child)) continue;
    s.server().log().notice(fmt::format("Fork child {} is not debugged: it runs on.", child));
    if (auto* p = table.find(child)) (void)p->detach();
    s.server().remove_process(child);
  }
  for (auto* p : s.server().processes()) p->set_fork_reporting(s.dialect().fork_events, s.dialect().vfork_events);
  if (auto* p = requests.step_branch_process) {
    const auto& step_branch = *requests.step_branch;
    // The client's step becomes a stepbranch: that thread alone, as the stepbranch packet
    // does (the other actions, e.g. GDB's `c` for the other threads of `vCont;s:t;c`, are
    // not taken). The stop reply is the stepbranch's, which the client takes for its step.
    // The breakpoint the client lifted for this step is put back for the run (the backend
    // passes one at the starting pc, as it does for the stepbranch packet), so the thread
    // still stops there if it comes back before its N-th branch.
    uint64_t lifted = step_branch.lifted_breakpoint;
    bool hold = lifted && !p->has_client_breakpoint(backend::BreakpointKind::Software, lifted) &&
                p->insert_breakpoint(backend::BreakpointKind::Software, lifted, 1).ok();
    if (auto r = p->step_branch(step_branch.tid, step_branch.count); !r) {
      if (hold) (void)p->remove_breakpoint(backend::BreakpointKind::Software, lifted, 1);
      return error_reply(r.error());
    }
    if (hold) s.hold_breakpoint_for_run(p->pid(), lifted);
    s.expect_stop(Waiting::StepBranch);
    s.server().resumed();
    return reply::NoReply{};
  }
  for (const auto& [p, plan] : plans)
    if (auto r = p->resume(plan); !r) return error_reply(r.error());
  if (!s.non_stop()) s.expect_stop();  // before polling: the stop may come at once
  s.server().resumed();
  if (s.non_stop()) return reply::Ok{};  // the stops follow as %Stop notifications
  return reply::NoReply{};  // the stop reply follows when the process stops
}

void kill_everything(Session& s) {
  auto& server = s.server();
  for (auto* p : server.process_table().all()) {
    if (p->alive()) (void)p->kill();
    server.remove_process(p->pid());
  }
  s.select_process(0);
}

// The stop a new process (vRun, vAttach) starts in, with that process selected.
Reply reply_for_new_process(Session& s, pid_t pid) {
  auto* p = s.server().process_for(pid);
  if (!p) return no_process();
  s.select_process(p->pid());
  if (p->alive()) s.set_general_thread(p->last_stop().tid);
  return s.stop_reply_for(p->last_stop());
}

}  // namespace

Reply handle(Session&, const VContQuery&) { return reply::ResumeActions{}; }

Reply handle(Session& s, const VCont& v) {
  // Non-stop: actions that name only threads that are gone are no error (gdbserver). After one
  // process's exit GDB stops every thread it believes runs, those of processes whose exits
  // still wait in the notification queue too; here those processes are gone already.
  if (!s.process()) return s.non_stop() ? Reply{reply::Ok{}} : no_process();
  // Naming a held fork child's process in an action takes it on, as Hg does.
  for (const auto& action : v.actions)
    if (action.thread && action.thread->pid && *action.thread->pid > 0)
      s.server().process_table().name(*action.thread->pid);
  Plans plans;
  for (auto* p : s.server().processes()) {
    if (!p->alive()) {
      // It exited while paused for another process's stop: its exit is the next event.
      if (p->exit_unreported()) plans.emplace_back(p, backend::ResumePlan{{}, backend::ResumeAction{}});
      continue;
    }
    backend::ResumePlan plan;
    // The leftmost action that matches a thread applies to it; p<pid>.<tid> names a process.
    for (const auto& action : v.actions) {
      if (action.thread && action.thread->pid && *action.thread->pid > 0 && *action.thread->pid != p->pid()) continue;
      if (action.thread && action.thread->tid > 0) {
        if (p->has_thread(action.thread->tid)) plan.threads.try_emplace(action.thread->tid, to_backend(s, action));
      } else if (!plan.others) {
        plan.others = to_backend(s, action);
      }
    }
    if (!plan.threads.empty() || plan.others) plans.emplace_back(p, std::move(plan));
  }
  if (plans.empty() && s.non_stop()) return reply::Ok{};
  return start_resume(s, plans);
}

Reply handle(Session& s, const LegacyResume& r) {
  auto* p = s.process();
  if (!p) return no_process();
  pid_t tid = s.continue_thread() > 0 && p->has_thread(s.continue_thread()) ? s.continue_thread() : s.general_thread();
  if (r.addr) {
    auto regs = p->read_registers(tid);
    if (!regs) return error_reply(regs.error());
    regs->set_u64(p->register_layout(), backend::RegisterLayout::kRip, *r.addr);
    if (auto w = p->write_registers(tid, *regs); !w) return error_reply(w.error());
  }
  backend::ResumePlan plan;
  if (r.action.op == protocol::VContOp::Step) plan.threads[tid] = to_backend(s, r.action);
  else plan.others = to_backend(s, r.action);
  return start_resume(s, Plans{{p, plan}});
}

Reply handle(Session& s, const VCtrlC&) {
  if (s.non_stop()) {
    // One running thread stops with SIGINT (gdbserver's SIGINT to the process): the first
    // process that runs, the primary one first.
    for (auto* p : s.server().processes())
      if (p->alive() && p->running()) {
        p->interrupt();
        s.server().resumed();
        break;
      }
    return reply::Ok{};
  }
  s.server().interrupt();
  return reply::Ok{};
}

Reply handle(Session& s, const VStopped&) {
  if (!s.non_stop()) return error_reply(EINVAL, "vStopped outside non-stop mode.");
  return s.acknowledge_notification();
}

Reply handle(Session& s, const StepBranch& b) {
  auto* p = s.process();
  if (!p) return no_process();
  s.begin_resume();  // a stepbranch of its own: a stepbranch-next request expires
  // Its reply is a stop reply to this very packet, which non-stop has no place for.
  if (s.non_stop()) return error_reply(EOPNOTSUPP, "stepbranch needs all-stop mode (set non-stop off).");
  pid_t tid = s.general_thread();
  if (auto r = p->step_branch(tid, b.count == 0 ? 1 : b.count); !r) return error_reply(r.error());
  s.expect_stop(Waiting::StepBranch);
  s.server().resumed();
  return reply::NoReply{};
}

Reply handle(Session& s, const StepBranchNext& n) {
  // The converted step runs the thread alone with the process stopped, which non-stop cannot
  // promise; and GDB steps over a breakpoint out of line there (displaced stepping: the
  // instruction copied to a scratch pad), where a run on to the next branch would execute the
  // pad. The GDB command falls back to stepping from the client (scripts/gdb/branchstub.py).
  if (s.non_stop()) return error_reply(EOPNOTSUPP, "stepbranch needs all-stop mode (set non-stop off).");
  backend::Process* p = n.thread.pid && *n.thread.pid > 0 ? s.server().process_for(*n.thread.pid) : s.process();
  if (!p || !p->alive()) return no_process();
  if (!p->has_thread(n.thread.tid)) return no_thread();
  s.arm_step_branch({p->pid(), n.thread.tid, n.count, n.lifted_breakpoint.value_or(0)});
  return reply::Ok{};
}

// What the stepbranch that the last stop ended did, in the stop reply's words, or "none" when
// the last stop did not end a stepbranch (a script asks this after its client's own step).
Reply handle(Session& s, const StepBranchLast&) {
  const auto& e = s.last_step_branch();
  if (!e) return reply::StepBranchSummary{};
  std::string mechanism = e->step_mechanism.empty() ? s.server().probe().stepbranch_mechanism : e->step_mechanism;
  return reply::StepBranchSummary{false, e->pid, e->tid, e->branch_from, e->branch_to, mechanism};
}

// bc / bs: the thread of Hc (or the one last reported) backwards; a replay only (the packets
// are listed and parsed only there). The stop reply follows as for any resume.
Reply handle(Session& s, const ReverseResume& r) {
  auto* p = s.process();
  if (!p) return no_process();
  if (!p->can_reverse()) return error_reply(EOPNOTSUPP, "Target does not support reverse execution.");
  pid_t tid = s.continue_thread() > 0 && p->has_thread(s.continue_thread()) ? s.continue_thread() : s.general_thread();
  s.begin_resume();
  auto kind = r.step ? backend::ReverseKind::Step : backend::ReverseKind::Continue;
  if (auto res = p->resume_reverse(tid, kind, [&s] { return s.client_cancels(); }); !res)
    return error_reply(res.error());
  if (!s.non_stop()) s.expect_stop();
  s.server().resumed();
  if (s.non_stop()) return reply::Ok{};
  return reply::NoReply{};
}

Reply handle(Session& s, const Kill& k) {
  auto& server = s.server();
  if (k.pid) {  // vKill;pid: that process
    auto* p = server.process_for(*k.pid);
    // Without multiprocess GDB names no real pid (42000): the process is the one we debug.
    // With it, a pid we do not have is an error (gdbserver), never another process killed.
    if (!p && s.dialect().multiprocess) return error_reply(ESRCH, "No such process.");
    if (!p) p = s.process();
    if (p) {
      pid_t pid = p->pid();
      (void)p->kill();
      server.remove_process(pid);
    }
    s.select_process(0);
    return reply::Ok{};
  }
  // plain 'k': everything. LLDB waits for the exit status, GDB ignores it.
  auto* main = s.process();
  int pid = main ? main->pid() : 0;
  kill_everything(s);
  return ExitReply{pid, 0, true, 9};  // "X09": SIGKILL is 9 in both numberings
}

Reply handle(Session& s, const Detach& d) {
  auto& server = s.server();
  // D;pid may name a held fork child the client never took on (detach-on-fork on).
  backend::Process* target = d.pid ? server.process_for(*d.pid) : s.process();
  if (!target || !target->alive()) return error_reply(ESRCH, "No such process.");
  // Detaching a process while a fork child of it is held: the client follows the child
  // (follow-fork-mode child), which is debugged from now on.
  server.process_table().name_children_of(target->pid());
  pid_t pid = target->pid();
  server.log().notice(fmt::format("Detaching from process {}", pid));
  if (auto r = target->detach(); !r) return error_reply(r.error());
  if (!target->was_attached() && !server.process_table().is_fork_child(pid)) server.reap_later(pid);
  server.remove_process(pid);  // the next oldest process becomes the primary one
  s.select_process(0);
  if (auto* p = server.process(); p && p->alive()) s.set_general_thread(p->pid());
  return reply::Ok{};
}

Reply handle(Session& s, const VRun& r) {
  if (!s.server().options().multi && !s.extended())
    return error_reply(EPERM, "vRun needs extended-remote (branchstub --multi).");
  std::vector<std::string> argv = r.argv;
  if (argv.empty() || argv.front().empty()) {
    // No program named: the program of the last run (vRun or command line), with the new
    // arguments, as gdbserver does. GDB sends that for a second inferior's `run` and for a
    // `run` without `set remote exec-file`.
    const auto& last = s.server().last_run();
    if (last.empty()) return error_reply(ENOENT, "No program given to run.");
    if (argv.empty()) argv.push_back(last.front());
    else argv.front() = last.front();
  }
  // A client that can name processes (multiprocess) runs a second inferior beside the first
  // and kills what it wants with vKill; for any other, the new run replaces the old one.
  if (!s.dialect().multiprocess) kill_everything(s);
  s.server().forget_dead_processes();
  auto launched = s.server().launch(argv);
  if (!launched) return error_reply(launched.error());
  return reply_for_new_process(s, *launched);
}

// R (GDB's `run` when vRun is off): kill everything and start the last program again with
// its last arguments. Nothing is answered, as by gdbserver: GDB never reads a reply to R.
Reply handle(Session& s, const Restart&) {
  if (!s.extended()) return reply::Unsupported{};  // not understood outside extended-remote
  kill_everything(s);
  std::vector<std::string> argv = s.server().last_run();
  if (argv.empty()) {
    s.server().log().notice("Restart: no program was run before.");
    return reply::NoReply{};
  }
  s.server().log().notice(fmt::format("Restarting {}", argv.front()));
  auto launched = s.server().launch(std::move(argv));
  if (!launched) {
    s.server().log().notice(launched.error().message);
    return reply::NoReply{};
  }
  if (auto* p = s.server().process_for(*launched); p && p->alive()) {
    s.select_process(p->pid());
    s.set_general_thread(p->last_stop().tid);
  }
  return reply::NoReply{};
}

Reply handle(Session& s, const VAttach& a) {
  if (s.process() && !s.dialect().multiprocess) return error_reply(EBUSY, "Already debugging a process.");
  if (s.server().process_for(a.pid)) return error_reply(EBUSY, "Already debugging that process.");
  s.server().forget_dead_processes();
  if (auto r = s.server().attach(a.pid); !r) return error_reply(r.error());
  if (s.non_stop()) {
    // gdbserver's non-stop attach: OK, and each thread's stop only when GDB stops it (vCont;t).
    auto* p = s.server().process_for(a.pid);
    if (!p) return no_process();
    p->hold_attach_stops();
    s.select_process(p->pid());
    s.server().resumed();
    return reply::Ok{};
  }
  return reply_for_new_process(s, a.pid);
}

}  // namespace server
