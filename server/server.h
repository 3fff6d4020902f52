// The server: one io_context on one thread. Owns the listening socket (or stdio), the client
// session, the debugged process, and the signalfd through which SIGCHLD reaches the loop.
#pragma once

#include <utility>  // Boost 1.74 asio needs std::exchange declared first in C++20
#include <boost/asio.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "backend/btrace/tracer.h"
#include "backend/process.h"
#include "backend/btrace/lbr_source.h"
#include "backend/probe.h"
#include "backend/thread_db.h"
#include "server/coverage_run.h"
#include "server/log.h"
#include "server/options.h"
#include "server/session.h"

namespace server {

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();
  int run();  // returns the process exit code

  boost::asio::io_context& io() { return io_; }
  const ServerOptions& options() const { return options_; }
  Logger& log() { return log_; }

  // ---- the debugged process ----
  backend::Process* process() { return process_.get(); }
  // Fork children the client debugs beside the main process (GDB's detach-on-fork off, or a
  // vfork child followed while its parent waits for it). Primary first.
  std::vector<backend::Process*> processes();
  backend::Process* process_for(pid_t pid);
  bool is_follower(pid_t pid) const { return followers_.count(pid) != 0; }
  // A held fork child of one of our processes becomes a process of its own.
  backend::Result<backend::Process*> adopt_fork_child(pid_t child);
  // After a process was detached, killed or has exited: forget it; when it was the primary,
  // a follower takes its place.
  void remove_process(pid_t pid);
  backend::Result<pid_t> launch(std::vector<std::string> argv);  // the new process's pid
  backend::Result<pid_t> attach(pid_t pid);
  // The new process is the main one, or a follower when a main process is alive.
  void add_process(std::unique_ptr<backend::Process> p);
  void forget_process();                           // after kill/detach/exit
  // A program we launched and then detached from is still our child: reap it when it exits.
  void reap_later(pid_t pid) { orphans_.insert(pid); }
  backend::LaunchOptions& launch_settings() { return launch_settings_; }
  // The last stop the client was told about (or would be told: '?').
  const std::optional<backend::StopEvent>& last_event() const { return last_event_; }
  void set_last_event(backend::StopEvent e) { last_event_ = std::move(e); }

  // A handler resumed the process: watch for its events.
  void resumed();
  // Interrupt byte (0x03) or vCtrlC.
  void interrupt();
  // Client asked the server to exit (monitor exit).
  void request_exit();
  bool exit_requested() const { return exit_requested_; }
  void session_closed(Session* session);

  const backend::ProbeReport& probe();
  // Hardware breakpoints and watchpoints emulated in software (--watchpoints, and in auto mode
  // the debug-register probe, run once per server life).
  bool watch_emulation();
  // The msr_helper device, opened on first use and kept open: the module ties a thread's LBR to
  // the file it was attached through. Null (with `why`) when the module is not there.
  backend::LbrDevice* lbr_device(std::string* why);
  backend::TraceSource btrace_source() const;
  // libthread_db for qGetTLSAddr, and its search path (monitor set libthread-db-search-path).
  backend::ThreadDb& thread_db() { return thread_db_; }
  // The coverage recording of the main process (monitor coverage, --coverage); null if none.
  // It stays after the process exited, until another process is started or attached.
  CoverageRun* coverage() { return coverage_.get(); }
  CoverageRun& new_coverage(backend::Process& p);

 private:
  // Resolve, bind and listen: the resolver's error text if COMM's host does not resolve;
  // throws on other failures.
  std::optional<std::string> prepare_listener();
  void run_loop();
  void accept_next();
  void start_stdio();
  void watch_sigchld();
  void poll_inferior();
  void on_process_event(backend::Process* p, const backend::StopEvent& event);
  backend::Process* running_process();  // a live running one, primary first; null if none
  void arm_poll_timer();
  void shut_down_inferior();  // kill if launched, detach if attached
  void finish(int code);
  // --coverage FILE PROG: no client; the program runs to its exit, then the files are written.
  int start_coverage_run();
  void on_coverage_event(backend::Process* p, const backend::StopEvent& event);
  bool write_coverage_files();  // false (and said why) if a file could not be written
  void coverage_process_gone(pid_t pid);  // before the process object goes away

  ServerOptions options_;
  boost::asio::io_context io_;
  Logger log_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<backend::Process> process_;
  std::map<pid_t, std::unique_ptr<backend::Process>> followers_;
  backend::LaunchOptions launch_settings_;
  std::optional<backend::StopEvent> last_event_;
  int sigchld_fd_ = -1;
  std::optional<boost::asio::posix::stream_descriptor> sigchld_stream_;
  boost::asio::steady_timer poll_timer_;
  boost::asio::steady_timer exit_timer_;
  bool polling_ = false;
  bool exit_requested_ = false;
  bool interrupt_pending_ = false;  // a ^C not yet answered by a SIGINT stop
  int exit_code_ = 0;
  std::optional<backend::ProbeReport> probe_;
  std::optional<backend::DebugRegisterProbe> debug_register_probe_;
  std::optional<backend::LbrDevice> lbr_device_;
  std::set<pid_t> orphans_;  // detached programs we launched (see reap_later)
  backend::ThreadDb thread_db_;
  std::unique_ptr<CoverageRun> coverage_;
  bool coverage_mode_ = false;  // --coverage: no client, the server drives the program
};

}  // namespace server
