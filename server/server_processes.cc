// Server: the table of debugged processes: launch, attach, add, remove, forget, shut down.
#include "server/server.h"

#include "backend/ptrace/launch.h"
#include "backend/replay/replay_process.h"

namespace server {

backend::Result<pid_t> Server::launch(std::vector<std::string> argv) {
  backend::LaunchOptions launch = launch_settings_;
  last_run_ = argv;
  launch.argv = std::move(argv);
  if (!launch.argv.empty()) launch.argv.front() = backend::program_path(launch.argv.front());
  // Replay: whatever the client names, the recorded program starts again, as recorded.
  auto process = options_.replay_dir ? backend::replay::launch_replay(*options_.replay_dir, launch)
                                     : backend::Process::launch(launch);
  if (!process) return process.error();
  pid_t pid = (*process)->pid();
  add_process(std::move(*process));
  log_.notice(fmt::format("Process {} created; pid = {}", launch.argv.front(), pid));
  return pid;
}

backend::Result<pid_t> Server::attach(pid_t pid) {
  auto process = backend::Process::attach(pid);
  if (!process) return process.error();
  add_process(std::move(*process));
  log_.notice(fmt::format("Attached; pid = {}", pid));
  return pid;
}

void Server::add_process(std::unique_ptr<backend::Process> p) {
  p->configure(process_settings());
  if (session_ && session_->non_stop()) (void)p->set_non_stop(true);  // stopped: cannot fail
  if (session_ && session_->thread_events()) p->set_thread_events(true);
  last_event_ = p->last_stop();
  processes_.add(std::move(p));
}

void Server::remove_process(pid_t pid) {
  coverage_process_gone(pid);
  (void)processes_.remove(pid);
  if (auto* p = process()) {
    last_event_ = p->last_stop();
    return;
  }
  last_event_.reset();
  poll_timer_.cancel();
  polling_ = false;
}

void Server::forget_dead_processes() {
  for (auto* p : processes_.all())
    if (!p->alive() && !p->exit_unreported()) remove_process(p->pid());
}

void Server::shut_down_inferior() {
  for (auto* p : processes_.all()) {
    if (!p->alive()) continue;
    if (p->was_attached()) {
      log_.notice(fmt::format("Detaching from process {}", p->pid()));
      (void)p->detach();
    } else {
      log_.event("killing process {}", p->pid());
      (void)p->kill();
    }
  }
  processes_.clear();
  last_event_.reset();
  poll_timer_.cancel();
  polling_ = false;
}

}  // namespace server
