// Connection set-up, thread selection and listing, settings for the next `run`.
#include <signal.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "backend/ptrace/launch.h"
#include "protocol/qsupported.h"
#include "protocol/signals.h"
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
// vfork, clone or exec is never replayed (GDB would follow it again, and a new client has not seen
// it): the thread is only stopped, with SIGTRAP, as gdbserver reports those events to a
// client that did not ask for them.
backend::StopEvent as_plain_stop(backend::StopEvent event) {
  using backend::StopKind;
  switch (event.kind) {
    case StopKind::Fork:
    case StopKind::VFork:
    case StopKind::VForkDone:
    case StopKind::Exec:
    case StopKind::Clone:
      event.kind = StopKind::Signal;
      event.signo = SIGTRAP;
      event.child_pid = 0;
      event.exec_path.clear();
      break;
    case StopKind::ThreadCreated:  // non-stop '?': a new thread that never ran is just stopped
      event.kind = StopKind::Signal;
      event.signo = 0;
      break;
    default: break;
  }
  return event;
}

}  // namespace

Reply handle(Session& s, const QuerySupported& q) {
  // The one place the client dialect is decided: GDB always offers swbreak+, LLDB never does.
  DisabledPackets disabled = s.dialect().disabled;  // the server's --disable-packet, not negotiated
  const auto& capabilities = s.server().capabilities();
  s.dialect() = negotiate(q, capabilities);
  s.dialect().disabled = disabled;
  return reply::Features{capabilities};  // encoded in the dialect just negotiated
}

Reply handle(Session&, const MustReplyEmpty&) { return reply::Unsupported{}; }

// GDB 18: the program the server was started with, or last ran (gdbserver's program_path and
// program_args), so that `show args` has them.
Reply handle(Session& s, const QueryExecAndArgs&) {
  std::vector<std::string> argv = s.server().last_run();
  if (!argv.empty()) argv.front() = backend::program_path(argv.front());  // as it was run
  return reply::ExecAndArgs{std::move(argv)};
}

Reply handle(Session& s, const StartNoAckMode&) {
  s.set_no_ack();
  return reply::Ok{};
}

Reply handle(Session& s, const EnableExtendedMode&) {
  s.set_extended(true);
  return reply::Ok{};
}

namespace {
// '?' in non-stop: every stopped thread of every process, the first now, the others through
// vStopped (nothing stopped: OK).
Reply non_stop_halt_reasons(Session& s) {
  std::vector<Reply> stops;
  for (auto* p : s.server().process_table().all()) {
    if (!p->alive() && !p->exit_unreported()) continue;
    for (const auto& event : p->stopped_threads()) stops.push_back(s.stop_reply_for(as_plain_stop(event)));
  }
  return s.restart_notifications(std::move(stops));
}
}  // namespace

Reply handle(Session& s, const QueryHaltReason&) {
  if (s.non_stop()) return non_stop_halt_reasons(s);
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
    return ExitReply{};  // "W00": nothing ever ran
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
  if (!p) return no_process();
  if (h.thread.pid && *h.thread.pid > 0) {
    // Another process: one we debug already, or a held fork child, which the client takes
    // on by naming it (GDB and LLDB name the child to take breakpoints out of it, or to
    // debug it).
    backend::Process* target = s.server().process_for(*h.thread.pid);
    if (!target || !target->alive()) return error_reply(ESRCH, "No such process.");
    s.server().process_table().name(target->pid());
    if (h.op == 'g') s.select_process(*h.thread.pid);
    p = target;
  } else if (h.op == 'g' && !h.thread.pid) {
    s.select_process(0);
    p = s.process();
    if (!p) return no_process();
  }
  pid_t tid = h.thread.tid;
  if (tid > 0 && !p->has_thread(tid)) return no_thread();
  if (h.op == 'g') s.set_general_thread(tid);
  else s.set_continue_thread(tid);
  return reply::Ok{};
}

Reply handle(Session& s, const QueryCurrentThread&) {
  auto* p = s.process();
  if (!p) return no_process();
  return reply::CurrentThread{p->pid(), s.general_thread()};
}

Reply handle(Session& s, const ThreadAlive& t) {
  // Any process's thread: GDB asks about inferior 1's thread while inferior 2 is selected.
  if (t.thread.tid <= 0) return no_thread();
  for (auto* p : s.server().processes()) {
    if (t.thread.pid && *t.thread.pid > 0 && *t.thread.pid != p->pid()) continue;
    if (p->alive() && p->has_thread(t.thread.tid)) return reply::Ok{};
  }
  return no_thread();
}

Reply handle(Session& s, const ThreadInfoFirst&) {
  if (!s.process()) return reply::ThreadListEnd{};
  reply::ThreadList list;
  for (auto* p : s.server().processes()) {
    if (!p->alive()) continue;
    for (pid_t tid : p->threads()) list.threads.push_back({p->pid(), tid});
  }
  return list;
}

Reply handle(Session&, const ThreadInfoNext&) { return reply::ThreadListEnd{}; }

Reply handle(Session& s, const QueryAttached& q) {
  // qAttached:<pid> (multiprocess) asks about that process, not the selected one: GDB asks
  // for each inferior, and kills on quit the ones said to be launched.
  backend::Process* p = q.pid ? s.server().process_for(*q.pid) : s.process();
  if (!p || !p->alive()) return error_reply(ESRCH, "No such process.");
  return reply::Attached{p->was_attached()};
}

Reply handle(Session&, const QueryOffsets&) { return reply::Unsupported{}; }
Reply handle(Session&, const QuerySymbol&) { return reply::Ok{}; }
Reply handle(Session& s, const SetNonStop& n) {
  if (n.on && !s.server().capabilities().has(protocol::Capability::NonStop))
    return error_reply(EOPNOTSUPP, "Non-stop mode is not supported.");
  for (auto* p : s.server().process_table().all())
    if (p->alive())
      if (auto r = p->set_non_stop(n.on); !r) return error_reply(r.error());
  s.set_non_stop(n.on);
  return reply::Ok{};
}

Reply handle(Session& s, const SetPassSignals& q) {
  if (auto* p = s.process()) p->set_pass_signals(host_signals(s, q.gdb_signals));
  return reply::Ok{};
}

Reply handle(Session& s, const SetProgramSignals& q) {
  if (auto* p = s.process()) p->set_program_signals(host_signals(s, q.gdb_signals));
  return reply::Ok{};
}

Reply handle(Session& s, const SetDisableRandomization& q) {
  s.server().launch_settings().disable_randomization = q.on;
  return reply::Ok{};
}

Reply handle(Session& s, const SetStartupWithShell& q) {
  s.server().launch_settings().startup_with_shell = q.on;
  return reply::Ok{};
}

Reply handle(Session& s, const SetEnvironment& q) {
  auto eq = q.var_eq_value.find('=');
  if (eq == std::string::npos) return error_reply(EINVAL, "QEnvironmentHexEncoded: expected NAME=VALUE.");
  auto& launch = s.server().launch_settings();
  launch.env_set[q.var_eq_value.substr(0, eq)] = q.var_eq_value.substr(eq + 1);
  launch.env_unset.erase(q.var_eq_value.substr(0, eq));
  return reply::Ok{};
}

Reply handle(Session& s, const UnsetEnvironment& q) {
  auto& launch = s.server().launch_settings();
  launch.env_set.erase(q.var);
  launch.env_unset.insert(q.var);
  return reply::Ok{};
}

// GDB means "back to the server's own environment" (not an empty one).
Reply handle(Session& s, const ResetEnvironment&) {
  auto& launch = s.server().launch_settings();
  launch.env_set.clear();
  launch.env_unset.clear();
  return reply::Ok{};
}

Reply handle(Session& s, const SetWorkingDir& q) {
  auto& launch = s.server().launch_settings();
  if (q.dir.empty()) launch.working_dir.reset();
  else launch.working_dir = q.dir;
  return reply::Ok{};
}

Reply handle(Session& s, const SetCatchSyscalls& q) {
  if (auto* p = s.process()) p->set_catch_syscalls(q.on, std::set<int>(q.syscalls.begin(), q.syscalls.end()));
  return reply::Ok{};
}


// Thread creation (T05create) and exit (w) events, for every process and the ones to come.
Reply handle(Session& s, const SetThreadEvents& q) {
  s.set_thread_events(q.on);
  for (auto* p : s.server().process_table().all())
    if (p->alive()) p->set_thread_events(q.on);
  return reply::Ok{};
}

namespace {
// Whether a QThreadOptions entry's thread id names tid of process pid (gdbserver's ptid
// matching): "-1" or "p-1.-1" every thread, "p<pid>.-1" (or ".0") every thread of pid; an id
// without "p" is in the selected process.
bool names_thread(const std::optional<ThreadId>& id, int selected_pid, int pid, int tid) {
  if (!id) return true;
  int want_pid = id->pid.value_or(selected_pid);
  bool every_thread = id->is_all() || id->is_any();
  if (want_pid == ThreadId::kAll) return every_thread;
  return want_pid == pid && (every_thread || id->tid == tid);
}
}  // namespace

// GDB 15's per-thread options: clone events (T05clone:) and exit events (w) of the threads
// named. Checked whole first: an unknown option refuses the packet and changes nothing.
Reply handle(Session& s, const SetThreadOptions& q) {
  for (const auto& e : q.entries)
    if (e.options & ~kSupportedThreadOptions)
      return error_reply(EINVAL, fmt::format("Unknown thread options requested: {:#x}", e.options));
  int selected = s.process() ? s.process()->pid() : 0;
  for (auto* p : s.server().process_table().all()) {
    if (!p->alive()) continue;
    for (pid_t tid : p->threads()) {
      std::optional<uint64_t> options;  // the rightmost entry naming it wins
      for (const auto& e : q.entries)
        if (names_thread(e.thread, selected, p->pid(), tid)) options = e.options;
      if (options)
        p->set_thread_options(tid, {(*options & kThreadOptionClone) != 0, (*options & kThreadOptionExit) != 0});
    }
  }
  return reply::Ok{};
}

Reply handle(Session& s, const Malformed& m) {
  s.server().log().event("malformed packet: {}", m.what);
  return error_reply(EINVAL, m.what);
}

Reply handle(Session&, const Unknown&) { return reply::Unsupported{}; }

}  // namespace server
