// Connection set-up, thread selection and listing, settings for the next `run`.
#include <signal.h>

#include <algorithm>
#include <set>

#include "protocol/qsupported.h"
#include "protocol/signals.h"
#include "protocol/thread_id.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

// The Linux signals a QPassSignals/QProgramSignals list names. GDB lists its own numbers;
// LLDB lists Linux ones (see Session::host_signal).
std::set<int> host_signals(Session& session, const std::vector<int>& wire_signals) {
  if (session.dialect().lldb) {
    std::set<int> out;
    for (int s : wire_signals)
      if (int host = session.host_signal(s); host > 0) out.insert(host);
    return out;
  }
  return protocol::host_signals_listed(wire_signals);
}

// What '?' says about a stop the client was (or may have been) told about already: a fork,
// vfork or exec is never replayed (GDB would follow it again, and a new client has not seen
// it): the thread is only stopped, with SIGTRAP, as gdbserver reports those events to a
// client that did not ask for them.
backend::StopEvent as_plain_stop(backend::StopEvent event) {
  using backend::StopKind;
  switch (event.kind) {
    case StopKind::Fork:
    case StopKind::VFork:
    case StopKind::VForkDone:
    case StopKind::Exec:
      event.kind = StopKind::Signal;
      event.signo = SIGTRAP;
      event.child_pid = 0;
      event.exec_path.clear();
      break;
    default: break;
  }
  return event;
}

}  // namespace

std::string error_reply(Session& s, const backend::Error& e, int code) {
  return error_for(s.dialect(), code, e.message);
}

Reply handle(Session& s, const QuerySupported& q) {
  // The one place the client dialect is decided: GDB always offers swbreak+, LLDB never does.
  DisabledPackets disabled = s.dialect().disabled;  // the server's --disable-packet, not negotiated
  s.dialect() = negotiate(q);
  s.dialect().disabled = disabled;
  if (!s.dialect().swbreak) s.note_lldb();
  ServerFeatures features;
  features.btrace_pt = s.server().pt_available();  // only where the intel_pt PMU is
  return format_qsupported(features, s.dialect());
}

Reply handle(Session&, const MustReplyEmpty&) { return empty(); }

Reply handle(Session& s, const StartNoAckMode&) {
  s.set_no_ack();
  return ok();
}

Reply handle(Session& s, const EnableExtendedMode&) {
  s.set_extended(true);
  return ok();
}

Reply handle(Session& s, const QueryHaltReason&) {
  auto& server = s.server();
  const auto& last = server.last_event();
  bool last_gone = last && (last->kind == backend::StopKind::Exited || last->kind == backend::StopKind::Killed);
  // The server-wide last event, in whichever process it happened (gdbserver's last_ptid): a
  // fork child followed by the client is not the main process.
  if (last && !last_gone) {
    auto* p = server.process_for(last->pid);
    if (p && p->alive() && p->has_thread(last->tid)) {
      s.select_process(p->pid());
      s.set_general_thread(last->tid);
      return s.stop_reply_for(as_plain_stop(*last));
    }
  }
  auto* p = s.process();
  if (!p) {
    if (last) return s.stop_reply_for(*last);  // the exit the client has not seen
    return std::string("W00");
  }
  // No such event (an exit, or its thread is gone): the selected (or main) process, as it
  // stopped (a thread that did not stop for itself reports signal 0, as with gdbserver).
  backend::StopEvent event = p->last_stop();
  if (!p->has_thread(event.tid)) {
    auto threads = p->threads();
    event = backend::StopEvent{};
    event.pid = p->pid();
    event.tid = threads.empty() ? p->pid() : threads.front();
  }
  s.select_process(p->pid());
  s.set_general_thread(event.tid);
  return s.stop_reply_for(as_plain_stop(event));
}

Reply handle(Session& s, const SetThread& h) {
  auto* p = s.process();
  if (!p) return error(1);
  if (h.thread.pid && *h.thread.pid > 0) {
    // Another process: one we debug already, or a held fork child that becomes one (GDB and
    // LLDB name the child to take breakpoints out of it, or to debug it).
    backend::Process* target = s.server().process_for(*h.thread.pid);
    if (!target) {
      auto adopted = s.server().adopt_fork_child(*h.thread.pid);
      if (!adopted) return error(1);
      target = *adopted;
    }
    if (!target->alive()) return error(1);
    if (h.op == 'g') s.select_process(*h.thread.pid);
    p = target;
  } else if (h.op == 'g' && !h.thread.pid) {
    s.select_process(0);
    p = s.process();
    if (!p) return error(1);
  }
  pid_t tid = h.thread.tid;
  if (tid > 0 && !p->has_thread(tid)) return error(1);
  if (h.op == 'g') s.set_general_thread(tid);
  else s.set_continue_thread(tid);
  return ok();
}

Reply handle(Session& s, const QueryCurrentThread&) {
  auto* p = s.process();
  if (!p) return error(1);
  return "QC" + format_thread_id(p->pid(), s.general_thread(), s.dialect().multiprocess);
}

Reply handle(Session& s, const ThreadAlive& t) {
  // Any process's thread: GDB asks about inferior 1's thread while inferior 2 is selected.
  if (t.thread.tid <= 0) return error(1);
  for (auto* p : s.server().processes()) {
    if (t.thread.pid && *t.thread.pid > 0 && *t.thread.pid != p->pid()) continue;
    if (p->alive() && p->has_thread(t.thread.tid)) return ok();
  }
  return error(1);
}

Reply handle(Session& s, const ThreadInfoFirst&) {
  if (!s.process()) return std::string("l");
  std::string reply = "m";
  bool first = true;
  for (auto* p : s.server().processes()) {
    if (!p->alive()) continue;
    for (pid_t tid : p->threads()) {
      if (!first) reply += ",";
      reply += format_thread_id(p->pid(), tid, s.dialect().multiprocess);
      first = false;
    }
  }
  return reply;
}

Reply handle(Session&, const ThreadInfoNext&) { return std::string("l"); }

Reply handle(Session& s, const QueryAttached&) {
  auto* p = s.process();
  if (!p) return error(1);
  return std::string(p->was_attached() ? "1" : "0");
}

Reply handle(Session&, const QueryOffsets&) { return empty(); }
Reply handle(Session&, const QuerySymbol&) { return ok(); }
Reply handle(Session&, const QueryTStatus&) { return empty(); }
Reply handle(Session&, const SetNonStop& n) { return n.on ? error(1) : ok(); }

Reply handle(Session& s, const SetPassSignals& q) {
  if (auto* p = s.process()) p->set_pass_signals(host_signals(s, q.gdb_signals));
  return ok();
}

Reply handle(Session& s, const SetProgramSignals& q) {
  if (auto* p = s.process()) p->set_program_signals(host_signals(s, q.gdb_signals));
  return ok();
}

Reply handle(Session& s, const SetDisableRandomization& q) {
  s.server().launch_settings().disable_randomization = q.on;
  return ok();
}

Reply handle(Session& s, const SetStartupWithShell& q) {
  s.server().launch_settings().startup_with_shell = q.on;
  return ok();
}

Reply handle(Session& s, const SetEnvironment& q) {
  auto eq = q.var_eq_value.find('=');
  if (eq == std::string::npos) return error(1);
  auto& launch = s.server().launch_settings();
  launch.env_set[q.var_eq_value.substr(0, eq)] = q.var_eq_value.substr(eq + 1);
  launch.env_unset.erase(q.var_eq_value.substr(0, eq));
  return ok();
}

Reply handle(Session& s, const UnsetEnvironment& q) {
  auto& launch = s.server().launch_settings();
  launch.env_set.erase(q.var);
  launch.env_unset.insert(q.var);
  return ok();
}

Reply handle(Session& s, const ResetEnvironment&) {
  auto& launch = s.server().launch_settings();
  launch.env_set.clear();
  launch.env_unset.clear();
  launch.env_reset = false;  // GDB means "back to the server's own environment"
  return ok();
}

Reply handle(Session& s, const SetWorkingDir& q) {
  auto& launch = s.server().launch_settings();
  if (q.dir.empty()) launch.working_dir.reset();
  else launch.working_dir = q.dir;
  return ok();
}

Reply handle(Session& s, const SetCatchSyscalls& q) {
  if (auto* p = s.process()) p->set_catch_syscalls(q.on, std::set<int>(q.syscalls.begin(), q.syscalls.end()));
  return ok();
}

Reply handle(Session&, const SetThreadEvents&) { return ok(); }

Reply handle(Session& s, const Malformed& m) {
  s.server().log().event("malformed packet: {}", m.what);
  return error_for(s.dialect(), 1, m.what);
}

Reply handle(Session&, const Unknown&) { return empty(); }

}  // namespace server
