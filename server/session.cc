#include "server/session.h"

#include "protocol/signals.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

Session::Session(Server& server, std::unique_ptr<Transport> transport)
    : server_(server), transport_(std::move(transport)) {
  hostio_.allow_writes(server.options().allow_file_writes);
  hostio_.set_os_pid([&server](int pid) {
    auto* p = server.process_for(pid);
    return p ? p->os_pid() : 0;
  });
  dialect_.disabled = server.options().disabled_packets;
  if (auto* p = process()) general_thread_ = p->last_stop().tid;
}

Session::~Session() {
  *alive_ = false;
  close();
}

void Session::start() {
  transport_->start([this](std::string_view bytes) { on_bytes(bytes); },
                    [this] {
                      closed_ = true;
                      server_.session_closed(this);
                    });
}

bool Session::client_cancels() {
  if (closed_) return true;
  switch (transport_->poll_peer()) {
    case Transport::PeerNews::Interrupt:
      server_.log().event("interrupt requested (during a synchronous request)");
      return true;
    case Transport::PeerNews::Gone:
      server_.log().event("the client hung up (during a synchronous request)");
      return true;
    case Transport::PeerNews::Nothing:
      return false;
  }
  return false;
}

void Session::close() {
  if (transport_) transport_->close();
}

backend::Process* Session::process() {
  backend::Process* p = selected_pid_ ? server_.process_for(selected_pid_) : nullptr;
  if (!p || !p->alive()) p = server_.process();
  return p && p->alive() ? p : nullptr;
}

void Session::note_lldb() { dialect_.lldb = true; }

int Session::wire_signal(int host) const {
  if (host == 0) return 0;
  return dialect_.lldb ? host : protocol::host_to_gdb_signal(host);
}

int Session::host_signal(int wire) const {
  if (wire == 0) return 0;
  return dialect_.lldb ? wire : protocol::gdb_to_host_signal(wire);
}

void Session::on_bytes(std::string_view bytes) {
  server_.log().loop("client connection readable: {} bytes", bytes.size());
  for (auto& event : framer_.feed(bytes)) {
    using Kind = protocol::Framer::Event::Kind;
    switch (event.kind) {
      case Kind::Packet:
        if (!no_ack_) transport_->write("+");
        on_packet(event.payload);
        break;
      case Kind::BadChecksum:
        if (!no_ack_) transport_->write("-");
        break;
      case Kind::Interrupt:
        server_.log().event("interrupt requested");
        server_.interrupt();
        break;
      case Kind::Nack:
        // Without acks a '-' is noise: resending the last reply would answer the next request.
        if (!no_ack_ && !last_sent_.empty()) transport_->write(last_sent_);
        break;
      case Kind::Oversized:
        if (!no_ack_) transport_->write("+");
        send(protocol::reply::Error{EMSGSIZE, "Packet too long."});
        break;
      case Kind::Ack:
        break;
    }
    if (closed_) return;
  }
}

void Session::on_packet(const std::string& payload) {
  server_.log().packet('<', payload);
  ++packets_seen_;
  protocol::Request request = protocol::parse_request(payload, server_.capabilities());
  const auto* read = std::get_if<protocol::ReadMemory>(&request);
  auto prepared = read ? read_ahead_.take(*read) : (read_ahead_.drop(), std::nullopt);
  if (prepared) {
    write_framed(prepared->payload, std::move(prepared->framed));
    read_ahead_after(*read);
  } else {
    answering_ = true;
    protocol::Reply reply = dispatch(request);
    answering_ = false;
    // Encoded once, here: in the dialect as the handler left it (qSupported negotiates it).
    bool silent = protocol::sends_nothing(reply);
    std::string payload = silent ? std::string() : protocol::encode(reply, dialect_);
    if (!silent) write_packet(payload);
    if (notification_due_) {
      notification_due_ = false;
      // The first stop queued while answering; unless the reply was that stop itself ('?').
      if (!notifications_.empty() && (silent || payload != notifications_.front()))
        write_notification(notifications_.front());
    }
    // Only the data of a read continues a bulk read (an error, or the empty reply of a
    // disabled packet, ends it).
    bool data = std::holds_alternative<protocol::reply::Hex>(reply) || std::holds_alternative<protocol::reply::BinaryMemory>(reply);
    if (read && data && !payload.empty()) read_ahead_after(*read);
  }
  if (no_ack_pending_) {
    // gdbserver switches before its OK is acked; GDB's one extra '+' is ignored by the framer.
    no_ack_pending_ = false;
    no_ack_ = true;
    framer_.set_no_ack(true);
  }
}

protocol::Reply Session::dispatch(const protocol::Request& request) {
  if (protocol::is_disabled(request, dialect_.disabled)) return protocol::reply::Unsupported{};  // --disable-packet
  return std::visit([this](const auto& r) -> protocol::Reply { return handle(*this, r); }, request);
}

void Session::write_packet(std::string_view payload) { write_framed(payload, protocol::Framer::encode(payload)); }

void Session::write_notification(std::string_view payload) {
  server_.log().packet('>', "%Stop:" + std::string(payload));
  transport_->write(protocol::Framer::encode_notification("Stop", payload));
}

void Session::write_framed(std::string_view payload, std::string framed) {
  server_.log().packet('>', payload);
  if (!no_ack_) last_sent_ = framed;
  transport_->write(std::move(framed));
}

void Session::read_ahead_after(const protocol::ReadMemory& answered) {
  auto next = ReadAhead::next_after(answered);
  if (!next) return;
  // Runs after the loop has sent the reply (Asio writes at once when the socket has room).
  boost::asio::post(server_.io(), [this, alive = alive_, next = *next, seen = packets_seen_] {
    if (!*alive || closed_ || packets_seen_ != seen || waiting_ != Waiting::Nothing) return;
    auto* p = process();
    if (!p || p->running()) return;
    protocol::Reply reply = handle(*this, next);  // exactly what the request would get
    if (protocol::sends_nothing(reply)) return;
    std::string payload = protocol::encode(reply, dialect_);
    std::string framed = protocol::Framer::encode(payload);
    read_ahead_.keep(next, std::move(payload), std::move(framed));
  });
}

void Session::send(const protocol::Reply& reply) { write_packet(protocol::encode(reply, dialect_)); }

void Session::send_console(std::string_view text) { send(protocol::reply::ConsoleOutput{std::string(text)}); }

protocol::Reply Session::restart_notifications(std::vector<protocol::Reply> stops) {
  std::vector<std::string> payloads;
  for (const auto& stop : stops) payloads.push_back(protocol::encode(stop, dialect_));
  notifications_.restart(std::move(payloads));
  if (stops.empty()) return protocol::reply::Ok{};
  return std::move(stops.front());
}

protocol::Reply Session::acknowledge_notification() {
  auto next = notifications_.acknowledge();
  if (!next) return protocol::reply::Ok{};
  return protocol::reply::Encoded{std::move(*next)};
}

pid_t Session::general_thread() const {
  auto* p = const_cast<Session*>(this)->process();
  if (!p) return 0;
  if (general_thread_ > 0 && p->has_thread(general_thread_)) return general_thread_;
  pid_t last = p->last_stop().tid;
  if (last > 0 && p->has_thread(last)) return last;
  auto threads = p->threads();
  return threads.empty() ? 0 : threads.front();
}

pid_t Session::thread_for(std::optional<int> suffix) const {
  if (suffix && *suffix > 0) return *suffix;
  return general_thread();
}

Session::ResumeRequests Session::begin_resume(const ResumePlans& plans) {
  ResumeRequests fulfilled;
  // stepbranch-next applies to a resume that single-steps its thread without a signal to
  // deliver (a step that delivers one stays a step: it stops at the handler's entry, where a
  // stepbranch stops too).
  if (auto r = std::exchange(step_branch_next_, std::nullopt)) {
    for (const auto& [p, plan] : plans) {
      if (p->pid() != r->pid || !p->alive()) continue;
      auto it = plan.threads.find(r->tid);
      if (it != plan.threads.end() && it->second.kind == backend::ResumeKind::Step && it->second.signo == 0) {
        fulfilled.step_branch = *r;
        fulfilled.step_branch_process = p;
        break;
      }
    }
  }
  return fulfilled;
}

void Session::on_stop(const backend::StopEvent& event) {
  if (non_stop_) {
    // Every event is a notification; the client acknowledges each with vStopped. 'N' only for
    // a client that knows it (gdbserver's report_no_resumed).
    if (event.kind == backend::StopKind::NoResumed && !dialect_.no_resumed) return;
    std::string payload = protocol::encode(stop_reply_for(event), dialect_);
    if (!notifications_.push(payload)) return;  // waits for the client's vStopped
    if (answering_) notification_due_ = true;
    else write_notification(payload);
    return;
  }
  Waiting why = waiting_;
  waiting_ = Waiting::Nothing;
  if (auto held = std::exchange(run_breakpoint_, std::nullopt)) {
    // Out before the client hears of the stop: it puts its own back as it sees fit.
    auto* p = server().process_for(held->first);
    if (p && p->alive()) (void)p->remove_breakpoint(backend::BreakpointKind::Software, held->second, 1);
  }
  bool gone = event.kind == backend::StopKind::Exited || event.kind == backend::StopKind::Killed;
  if (!gone) {
    general_thread_ = event.tid;  // a stop reply implicitly selects its thread (Hg)
    selected_pid_ = event.pid;
  } else {
    selected_pid_ = 0;
  }
  last_step_branch_.reset();
  if (why == Waiting::StepBranch && !gone) last_step_branch_ = event;
  if (why == Waiting::MonitorStepBranch) {
    send_console(monitor_stepbranch_text(*this, event));
    send(protocol::reply::Ok{});
    return;
  }
  send(stop_reply_for(event, why == Waiting::StepBranch));
}

protocol::Reply Session::stop_reply_for(const backend::StopEvent& event, bool stepbranch) {
  using backend::StopKind;
  if (event.kind == StopKind::NoResumed) {  // gdbserver's words for a client without no-resumed+
    if (dialect_.no_resumed) return protocol::reply::NoResumed{};
    return protocol::reply::Error{ECHILD, "No unwaited-for children left."};
  }
  if (event.kind == StopKind::ThreadExited) return protocol::ThreadExitReply{event.pid, event.tid, event.exit_status};
  if (event.kind == StopKind::Exited || event.kind == StopKind::Killed) {
    protocol::ExitReply exit;
    exit.pid = event.pid;
    exit.status = event.exit_status;
    exit.signalled = event.kind == StopKind::Killed;
    exit.gdb_signal = wire_signal(event.signo);
    return exit;
  }
  return describe_stop(event, stepbranch);
}

protocol::StopReply Session::describe_stop(const backend::StopEvent& event, bool stepbranch) {
  using backend::StopKind;
  protocol::StopReply stop;
  stop.pid = event.pid;
  stop.tid = event.tid;
  stop.gdb_signal = wire_signal(event.signo);
  switch (event.kind) {
    case StopKind::Breakpoint: stop.reason = protocol::StopReason::Breakpoint; stop.gdb_signal = 5; break;
    case StopKind::HwBreakpoint: stop.reason = protocol::StopReason::HwBreakpoint; stop.gdb_signal = 5; break;
    case StopKind::Watchpoint:
      stop.reason = event.watch_type == backend::WatchType::Read     ? protocol::StopReason::ReadWatch
                    : event.watch_type == backend::WatchType::Access ? protocol::StopReason::AccessWatch
                                                                     : protocol::StopReason::Watch;
      stop.watch_addr = event.watch_addr;
      stop.gdb_signal = 5;
      break;
    case StopKind::Step: stop.reason = protocol::StopReason::SingleStep; stop.gdb_signal = 5; break;
    case StopKind::StepBranch:
      stop.reason = protocol::StopReason::SingleStep;
      stop.gdb_signal = 5;
      stop.branch_from = event.branch_from;
      stop.branch_to = event.branch_to;
      break;
    case StopKind::Fork: stop.reason = protocol::StopReason::Fork; stop.child_pid = stop.child_tid = event.child_pid; break;
    case StopKind::VFork: stop.reason = protocol::StopReason::VFork; stop.child_pid = stop.child_tid = event.child_pid; break;
    case StopKind::VForkDone: stop.reason = protocol::StopReason::VForkDone; break;
    case StopKind::Exec:
      // Without exec events (old GDBs, or GDB told not to) the kernel's plain SIGTRAP is the report.
      stop.gdb_signal = 5;
      if (dialect_.exec_events || dialect_.lldb) {
        stop.reason = protocol::StopReason::Exec;
        stop.exec_path = event.exec_path;
      }
      break;
    case StopKind::SyscallEntry: stop.reason = protocol::StopReason::SyscallEntry; stop.syscall_no = event.syscall_no; break;
    case StopKind::SyscallReturn: stop.reason = protocol::StopReason::SyscallReturn; stop.syscall_no = event.syscall_no; break;
    case StopKind::ThreadCreated: stop.reason = protocol::StopReason::ThreadCreated; stop.gdb_signal = 5; break;
    case StopKind::Clone:
      stop.reason = protocol::StopReason::Clone;
      stop.gdb_signal = 5;
      stop.child_pid = event.pid;
      stop.child_tid = event.child_pid;
      break;
    case StopKind::HistoryBegin: stop.reason = protocol::StopReason::HistoryBegin; stop.gdb_signal = 0; break;
    case StopKind::HistoryEnd: stop.reason = protocol::StopReason::HistoryEnd; stop.gdb_signal = 0; break;
    default: stop.reason = protocol::StopReason::Signal; break;
  }
  if (stepbranch || event.kind == StopKind::StepBranch) {
    stop.stepbranch_mechanism = event.step_mechanism.empty() ? server_.probe().stepbranch_mechanism : event.step_mechanism;
  }
  // The event's own process (non-stop events come from any process, selected or not).
  auto* p = event.pid ? server_.process_for(event.pid) : nullptr;
  if (!p || !p->alive()) p = process();
  if (p && p->has_thread(event.tid)) {
    const auto& layout = p->register_layout();
    if (auto regs = p->read_registers(event.tid, backend::RegisterSet::General)) {
      // GDB reads nothing more after most stops when rbp/rsp/rip come along; LLDB wants the GPRs.
      std::vector<int> expedite = {backend::RegisterLayout::kRbp, backend::RegisterLayout::kRsp,
                                   backend::RegisterLayout::kRip};
      if (dialect_.lldb) {
        expedite.clear();
        for (int r = 0; r <= backend::RegisterLayout::kEflags; ++r) expedite.push_back(r);
      }
      for (int r : expedite) {
        const auto& info = layout.regs[r];
        auto begin = regs->bytes.begin() + static_cast<long>(info.offset);
        stop.registers.emplace_back(r, std::vector<uint8_t>(begin, begin + info.bitsize / 8));
      }
    }
    int core = p->thread_core(event.tid);
    if (core >= 0) stop.core = core;
    if (dialect_.lldb) stop.thread_name = p->thread_name(event.tid);
    if (dialect_.lldb && dialect_.list_threads_in_stop) {
      for (pid_t tid : p->threads()) {
        stop.all_tids.push_back(tid);
        auto regs = p->read_registers(tid, backend::RegisterSet::General);
        stop.all_pcs.push_back(regs ? regs->pc(layout) : 0);
      }
    }
  }
  return stop;
}

}  // namespace server
