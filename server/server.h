// The server: one io_context on one thread. Owns the listening socket (or stdio), the client
// session, the debugged process, and the signalfd through which SIGCHLD reaches the loop.
// Its implementation, by job:
//   server.cc            its life, the listener and the loop, sessions, termination signals
//   server_host.cc       host facts found once (probe, block step, debug registers, trace
//                        setup) and the choices made from them (capabilities, process settings)
//   server_processes.cc  the process table: launch, attach, add, remove, forget, shut down
//   server_events.cc     inferior events: resume, poll timer, interrupt, all-stop and non-stop stops
//   server_coverage.cc   monitor coverage's recording and the --coverage FILE PROG run
#pragma once

#include <utility>  // Boost 1.74 asio needs std::exchange declared first in C++20
#include <boost/asio.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>

#include "backend/btrace/branch_tracer.h"
#include "backend/process.h"
#include "backend/btrace/lbr/lbr_feed.h"
#include "backend/btrace/lbr/lbr_device.h"
#include "backend/probe/probe.h"
#include "backend/tls/thread_db.h"
#include "server/coverage_run.h"
#include "server/log.h"
#include "protocol/capabilities.h"
#include "server/options.h"
#include "server/process_table.h"
#include "server/server_hooks.h"
#include "server/session.h"

namespace server {

class Server {
 public:
  // `hooks`: what the test build injects (server/server_hooks.h); the shipped server gives none.
  explicit Server(ServerOptions options, ServerHooks hooks = {});
  ~Server();
  int run();  // returns the process exit code

  boost::asio::io_context& io() { return io_; }
  const ServerOptions& options() const { return options_; }
  Logger& log() { return log_; }

  // ---- the debugged processes (ProcessTable) ----
  // The primary process: what a client that cannot name processes talks to.
  backend::Process* process() { return processes_.primary(); }
  // Every process the client debugs (fork children it named, second inferiors), primary first.
  std::vector<backend::Process*> processes() { return processes_.debugged(); }
  // Any process, a held fork child too; null if unknown.
  backend::Process* process_for(pid_t pid) { return processes_.find(pid); }
  ProcessTable& process_table() { return processes_; }
  // After a process was detached, killed or has exited: forget it.
  void remove_process(pid_t pid);
  backend::Result<pid_t> launch(std::vector<std::string> argv);  // the new process's pid
  // The program and arguments of the last launch, tried or done (command line, vRun): what a
  // vRun without a program name and the R packet run again (gdbserver's program_path/args).
  const std::vector<std::string>& last_run() const { return last_run_; }
  backend::Result<pid_t> attach(pid_t pid);
  // A new process (the primary one when there is none yet).
  void add_process(std::unique_ptr<backend::Process> p);
  void forget_dead_processes();                    // after kill/detach/exit
  // A program we launched and then detached from is still our child: reap it when it exits.
  void reap_later(pid_t pid) { orphans_.insert(pid); }
  backend::LaunchOptions& launch_settings() { return launch_settings_; }
  // The last stop the client was told about (or would be told: '?').
  const std::optional<backend::StopEvent>& last_event() const { return last_event_; }

  // A handler resumed the process: watch for its events.
  void resumed();
  // Interrupt byte (0x03) or vCtrlC.
  void interrupt();
  // Client asked the server to exit (monitor exit).
  void request_exit();
  void session_closed(Session* session);
  // A client connected through `transport`: it becomes the session, started now (accepted
  // sockets, stdio, and unit tests with an in-memory transport).
  Session& serve(std::unique_ptr<Transport> transport);

  const backend::ProbeReport& probe();
  // Take `report` as what this machine offers instead of probing it (the probe forks traced
  // children): unit tests that drive a Session against a fake process. Call before any
  // process is added; watchpoint emulation in auto mode follows its debug-register line.
  void set_probe(backend::ProbeReport report);
  // Whether PTRACE_SINGLEBLOCK works here, probed once per server life: what the process engine
  // uses for stepbranch instead of probing per process.
  const backend::BlockStepProbe& block_step();
  const backend::CpuidStepProbe& cpuid_step();
  // Hardware breakpoints and watchpoints emulated in software (--watchpoints, and in auto mode
  // the debug-register probe, run once per server life).
  bool watch_emulation();
  // How every process is run: trace source and setup, watchpoint emulation, single-block
  // stepping (from the cached probe), busy polling, --debug logging.
  backend::ProcessSettings process_settings();
  // What this server serves and advertises (from the backend's features and the probe).
  const protocol::Capabilities& capabilities();
  // --busy-poll: how long to keep polling after an event (0 on a single CPU).
  std::chrono::microseconds busy_poll() const;
  // What every process's branch tracer gets, found out once: the one LBR feed (the msr_helper
  // device, opened once and kept open: the module ties a thread's LBR to the handle that
  // attached it, so `monitor lbr` and `record btrace` must share it), why there is none, whether
  // Intel PT can be recorded, and the test build's feeds (hooks).
  const backend::TraceSetup& trace_setup();
  // The LBR feed, or null with `why`.
  backend::LbrFeed* lbr_feed(std::string* why);
  backend::TraceSource btrace_source() const;
  // libthread_db for qGetTLSAddr, and its search path (monitor set libthread-db-search-path).
  backend::ThreadDb& thread_db() { return thread_db_; }
  // The coverage recording of the main process (monitor coverage, --coverage); null if none.
  // It stays after the process exited, until another process is started or attached.
  CoverageRun* coverage() { return coverage_.get(); }
  // GDB's tracepoints: one experiment per server, as gdbserver's (it outlives a client that
  // disconnects with disconnected tracing on).
  backend::trace::TraceExperiment& trace_experiment() { return trace_; }
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
  // dprintf-style agent output of p's breakpoint commands: to the client as console output
  // ('O' packets) while it waits for a stop reply, else on the server's stdout as gdbserver.
  void forward_console_output(backend::Process& p);
  void on_process_event(backend::Process* p, const backend::StopEvent& event);
  void on_non_stop_event(backend::Process* p, const backend::StopEvent& event);
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
  ServerHooks hooks_;
  ListenAddress address_;  // COMM, parsed once
  boost::asio::io_context io_;
  Logger log_;
  std::optional<boost::asio::ip::tcp::acceptor> acceptor_;
  std::unique_ptr<Session> session_;
  ProcessTable processes_;
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
  std::optional<protocol::Capabilities> capabilities_;
  std::optional<backend::BlockStepProbe> block_step_probe_;
  std::optional<backend::CpuidStepProbe> cpuid_step_probe_;
  std::optional<backend::TraceSetup> trace_setup_;
  std::set<pid_t> orphans_;  // detached programs we launched (see reap_later)
  backend::ThreadDb thread_db_;
  std::vector<std::string> last_run_;
  std::unique_ptr<CoverageRun> coverage_;
  backend::trace::TraceExperiment trace_;
  bool coverage_mode_ = false;  // --coverage: no client, the server drives the program
};

}  // namespace server
