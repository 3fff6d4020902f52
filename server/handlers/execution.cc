// Resuming, stepping, stepbranch, kill, detach, run and attach.
#include <algorithm>

#include "protocol/signals.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

backend::ResumeAction to_backend(const Session& s, const protocol::ResumeAction& a) {
  backend::ResumeAction out;
  switch (a.kind) {
    case protocol::ResumeKind::Continue: out.kind = backend::ResumeKind::Continue; break;
    case protocol::ResumeKind::Step: out.kind = backend::ResumeKind::Step; break;
    case protocol::ResumeKind::RangeStep: out.kind = backend::ResumeKind::RangeStep; break;
    case protocol::ResumeKind::Stop: out.kind = backend::ResumeKind::Stop; break;
  }
  out.signo = s.host_signal(a.gdb_signal);
  out.range_start = a.range_start;
  out.range_end = a.range_end;
  return out;
}

Reply start_resume(Session& s, backend::Process& p, const backend::ResumePlan& plan) {
  if (plan.threads.empty() && !plan.others) return error(1);
  s.select_fork_child(0);
  // One process at a time: a fork child the client neither detached nor followed (GDB's
  // detach-on-fork off) is let go rather than left stopped for ever.
  for (pid_t child : p.held_children()) {
    s.server().log().notice(fmt::format("Fork child {} is not debugged (one process at a time): it runs on.", child));
    (void)p.detach_child(child);
  }
  p.set_fork_reporting(s.dialect().fork_events, s.dialect().vfork_events);
  if (auto r = p.resume(plan); !r) return error_reply(s, r.error());
  s.expect_stop();
  s.server().resumed();
  return std::nullopt;  // the stop reply follows when the process stops
}

}  // namespace

Reply handle(Session&, const VContQuery&) { return std::string("vCont;c;C;t;s;S;r"); }

Reply handle(Session& s, const VCont& v) {
  auto* p = s.process();
  if (!p) return error(1);
  backend::ResumePlan plan;
  // The leftmost action that matches a thread applies to it.
  for (const auto& action : v.actions) {
    if (action.thread && action.thread->tid > 0) {
      if (p->has_thread(action.thread->tid)) plan.threads.try_emplace(action.thread->tid, to_backend(s, action));
    } else if (!plan.others) {
      plan.others = to_backend(s, action);
    }
  }
  return start_resume(s, *p, plan);
}

Reply handle(Session& s, const LegacyResume& r) {
  auto* p = s.process();
  if (!p) return error(1);
  pid_t tid = s.continue_thread() > 0 && p->has_thread(s.continue_thread()) ? s.continue_thread() : s.general_thread();
  if (r.addr) {
    auto regs = p->read_registers(tid);
    if (!regs) return error_reply(s, regs.error());
    regs->set_u64(p->register_layout(), backend::RegisterLayout::kRip, *r.addr);
    if (auto w = p->write_registers(tid, *regs); !w) return error_reply(s, w.error());
  }
  backend::ResumePlan plan;
  if (r.action.kind == protocol::ResumeKind::Step) plan.threads[tid] = to_backend(s, r.action);
  else plan.others = to_backend(s, r.action);
  return start_resume(s, *p, plan);
}

Reply handle(Session& s, const VCtrlC&) {
  s.server().interrupt();
  return ok();
}

Reply handle(Session& s, const StepBranch& b) {
  auto* p = s.process();
  if (!p) return error_text("No process.");
  pid_t tid = s.general_thread();
  if (auto r = p->step_branch(tid, b.count == 0 ? 1 : b.count); !r) return error_text(r.error().message);
  s.expect_stop(Waiting::StepBranch);
  s.server().resumed();
  return std::nullopt;
}

Reply handle(Session& s, const Kill& k) {
  auto* p = s.process();
  int pid = p ? p->pid() : 0;
  if (p) (void)p->kill();
  s.server().forget_process();
  if (!k.pid) {  // plain 'k': LLDB waits for the exit status, GDB ignores it
    std::string reply = "X09";
    if (s.dialect().multiprocess && pid) reply += ";process:" + fmt::format("{:x}", pid);
    return reply;
  }
  return ok();
}

Reply handle(Session& s, const Detach& d) {
  auto* p = s.process();
  if (!p) return error(1);
  auto held = p->held_children();
  if (d.pid && *d.pid != p->pid()) {
    // The fork child, after a fork stop (follow-fork-mode parent, detach-on-fork on).
    if (std::find(held.begin(), held.end(), *d.pid) == held.end()) return error(1);
    s.server().log().notice(fmt::format("Detaching from process {}", *d.pid));
    if (auto r = p->detach_child(*d.pid); !r) return error_reply(s, r.error());
    if (s.fork_child() == *d.pid) s.select_fork_child(0);
    return ok();
  }
  // Detaching the parent while a fork child is held: the client follows the child.
  std::unique_ptr<backend::Process> child;
  if (!held.empty()) {
    pid_t follow = s.fork_child() ? s.fork_child() : held.front();
    auto adopted = p->adopt_child(follow);
    if (!adopted) return error_reply(s, adopted.error());
    child = std::move(*adopted);
  }
  s.server().log().notice(fmt::format("Detaching from process {}", p->pid()));
  if (auto r = p->detach(); !r) return error_reply(s, r.error());
  if (!p->was_attached()) s.server().reap_later(p->pid());
  s.select_fork_child(0);
  if (child) {
    s.set_general_thread(child->pid());
    s.server().replace_process(std::move(child));
  } else {
    s.server().forget_process();
  }
  return ok();
}

Reply handle(Session& s, const VRun& r) {
  if (!s.server().options().multi && !s.extended()) return error_text("vRun needs extended-remote (branchstub --multi).");
  std::vector<std::string> argv = r.argv;
  if (argv.empty() || argv.front().empty()) {
    const auto& program = s.server().options().program;
    if (program.empty()) return error_text("No program given to run.");
    if (argv.empty()) argv = program;
    else argv.front() = program.front();
  }
  if (auto* p = s.process()) (void)p->kill();
  s.server().forget_process();
  if (auto launched = s.server().launch(argv); !launched) return error_text(launched.error().message);
  auto* p = s.server().process();
  if (!p->alive()) return s.stop_reply_for(p->last_stop());
  s.set_general_thread(p->last_stop().tid);
  return s.stop_reply_for(p->last_stop());
}

Reply handle(Session& s, const VAttach& a) {
  if (s.process()) return error_text("Already debugging a process.");
  s.server().forget_process();
  if (auto r = s.server().attach(a.pid); !r) return error_text(r.error().message);
  auto* p = s.server().process();
  s.set_general_thread(p->last_stop().tid);
  return s.stop_reply_for(p->last_stop());
}

}  // namespace server
