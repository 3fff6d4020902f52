// Server: the inferiors' events: polling after a resume and on a timer, the client's interrupt,
// stops in all-stop and non-stop, the agent's console output.
#include "server/server.h"

#include <signal.h>

#include <chrono>
#include <cstdio>

namespace server {

namespace asio = boost::asio;

backend::Process* Server::running_process() {
  for (auto* p : processes())
    if (p->alive() && p->running()) return p;
  return nullptr;
}

void Server::resumed() {
  if (interrupt_pending_)
    if (auto* p = running_process()) p->interrupt();
  // A single step or a short run ends within microseconds: poll for it for a moment before
  // going back to the loop, which saves the signalfd wake-up on the path GDB waits on.
  auto deadline = std::chrono::steady_clock::now() + busy_poll();
  while (running_process() && std::chrono::steady_clock::now() < deadline) poll_inferior();
  if (running_process()) {
    asio::post(io_, [this] { poll_inferior(); });
    arm_poll_timer();
  }
}

void Server::arm_poll_timer() {
  if (polling_) return;
  polling_ = true;
  // A safety net: signalfd coalesces signals, and internal work may need a nudge.
  poll_timer_.expires_after(std::chrono::milliseconds(50));
  poll_timer_.async_wait([this](boost::system::error_code ec) {
    polling_ = false;
    if (ec) return;
    log_.loop("poll timer fired");
    poll_inferior();
    if (running_process()) arm_poll_timer();
  });
}

void Server::interrupt() {
  if (!process() || !process()->alive()) return;
  // A ^C stands until a SIGINT stop is reported. GDB sends it when it believes the program
  // runs, but the program may stop for something else first (a shared-library event GDB
  // resumes at once): gdbserver's real SIGINT would then wait in the program and stop the
  // next resume; ours waits here and does the same. One running process is enough to stop:
  // the others are paused when its stop comes.
  if (session_ && session_->non_stop()) {  // a stop of one thread, nothing left pending
    if (auto* p = running_process()) p->interrupt();
    return;
  }
  interrupt_pending_ = true;
  if (auto* p = running_process()) p->interrupt();
}

void Server::poll_inferior() {
  for (auto* p : processes()) {
    auto event = p->poll_events();
    forward_console_output(*p);  // before the stop reply it may precede
    if (event) {
      on_process_event(p, *event);
      break;  // the process list may have changed
    }
  }
  bool wants = false;
  for (auto* p : processes()) wants = wants || (p->alive() && p->running() && p->wants_poll());
  if (wants) asio::post(io_, [this] { poll_inferior(); });
  if (running_process()) arm_poll_timer();
}

void Server::forward_console_output(backend::Process& p) {
  std::string text = p.take_console_output();
  if (text.empty()) return;
  if (session_ && (session_->waiting() == Waiting::StopReply || session_->waiting() == Waiting::StepBranch)) {
    session_->send_console(text);  // GDB prints 'O' output while it waits for the stop
    return;
  }
  FILE* out = address_.stdio ? stderr : stdout;  // stdout is the protocol there
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

void Server::on_process_event(backend::Process* p, const backend::StopEvent& event) {
  // Fork children it reported are processes of ours from now on, held until the client names
  // or detaches them.
  for (auto& child : p->take_fork_children()) processes_.add_fork_child(std::move(child), p->pid());
  bool non_stop = session_ && session_->non_stop();
  if (non_stop) return on_non_stop_event(p, event);
  if (event.kind == backend::StopKind::NoResumed) {
    // This process has nothing resumed left; that is news only when no other process runs.
    if (running_process()) return;
    if (session_ && session_->waiting() != Waiting::Nothing) session_->on_stop(event);
    return;
  }
  last_event_ = event;
  bool gone = event.kind == backend::StopKind::Exited || event.kind == backend::StopKind::Killed;
  if (coverage_ && coverage_->attached() && coverage_->pid() == p->pid()) {
    if (gone) coverage_->process_gone();
    else if (event.kind == backend::StopKind::Exec) coverage_->exec_happened();
  }
  if (coverage_mode_) return on_coverage_event(p, event);
  if (gone) {
    if (event.kind == backend::StopKind::Exited)
      log_.notice(fmt::format("\nChild exited with status {}", event.exit_status));
    else
      log_.notice(fmt::format("\nChild terminated with signal = {}", event.signo));
  }
  // All-stop across processes: the others stop too (their own events wait for later).
  for (auto* other : processes())
    if (other != p && other->alive() && other->running()) other->pause();
  if (gone || (event.kind == backend::StopKind::Signal && event.signo == SIGINT)) interrupt_pending_ = false;
  if (session_ && session_->waiting() != Waiting::Nothing) session_->on_stop(event);
  // A process that ended is forgotten, except the last one: a single-process session goes on
  // as before (its exit is what '?' answers until the next run).
  if (gone && processes().size() > 1) remove_process(event.pid);
}

// Non-stop: one thread's event; nothing else stops. Every event goes to the client (as a
// notification), whether or not it waits.
void Server::on_non_stop_event(backend::Process* p, const backend::StopEvent& event) {
  using backend::StopKind;
  bool gone = event.kind == StopKind::Exited || event.kind == StopKind::Killed;
  if (event.kind != StopKind::NoResumed && event.kind != StopKind::ThreadExited) last_event_ = event;
  if (coverage_ && coverage_->attached() && coverage_->pid() == p->pid()) {
    if (gone) coverage_->process_gone();
    else if (event.kind == StopKind::Exec) coverage_->exec_happened();
  }
  if (gone) {
    if (event.kind == StopKind::Exited) log_.notice(fmt::format("\nChild exited with status {}", event.exit_status));
    else log_.notice(fmt::format("\nChild terminated with signal = {}", event.signo));
  }
  if (event.kind == StopKind::NoResumed && running_process()) return;  // others still run
  session_->on_stop(event);
  if (gone && processes().size() > 1) remove_process(event.pid);
}

}  // namespace server
