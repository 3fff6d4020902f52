// Server: its life, the listener (TCP or stdio) and the loop, the client session's coming and
// going, termination signals. The other jobs are in server_host.cc, server_processes.cc,
// server_events.cc and server_coverage.cc (see server.h).
#include "server/server.h"

#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "backend/ptrace/launch.h"

namespace server {

namespace asio = boost::asio;
using boost::asio::ip::tcp;

Server::Server(ServerOptions options, ServerHooks hooks)
    : options_(std::move(options)), hooks_(std::move(hooks)), poll_timer_(io_), exit_timer_(io_) {
  log_.debug = options_.debug;
  log_.remote_debug = options_.remote_debug;
  log_.event_loop = options_.event_loop_debug;
  log_.timestamps = options_.debug_timestamps;
  if (options_.debug_file) log_.set_file(*options_.debug_file);
  launch_settings_.startup_with_shell = options_.startup_with_shell;
  launch_settings_.disable_randomization = options_.disable_randomization;
  launch_settings_.wrapper = options_.wrapper;
  address_ = parse_comm(options_.comm).value_or(ListenAddress{});  // checked by the option parser
  launch_settings_.stdio_is_protocol = address_.stdio;
  coverage_mode_ = options_.coverage_file.has_value();
  // Like drrun: the program itself, found on PATH, not a shell that execs it.
  if (coverage_mode_) launch_settings_.startup_with_shell = false;
}

Server::~Server() {
  session_.reset();
  if (!processes_.empty()) shut_down_inferior();
  if (coverage_) coverage_->process_gone();
  if (sigchld_fd_ >= 0 && !sigchld_stream_) ::close(sigchld_fd_);
}

int Server::run() {
  ::signal(SIGPIPE, SIG_IGN);
  // SIGCHLD reaches the loop through a signalfd; it must be blocked for that.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  // Termination requests come through the same descriptor, so the inferior is killed or
  // detached (breakpoints removed) before we go, never left with our int3s in it.
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  // stdio: GDB's Ctrl-C reaches our process group too. --coverage: a Ctrl-C is the program's
  // (it shares our process group), which ends the run as it ends the program.
  if (!coverage_mode_ && !address_.stdio) sigaddset(&mask, SIGINT);
  else ::signal(SIGINT, SIG_IGN);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  sigchld_fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigchld_fd_ < 0) {
    log_.notice(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }
  sigchld_stream_.emplace(io_, sigchld_fd_);
  watch_sigchld();
  if (coverage_mode_) return start_coverage_run();

  // Bind before starting the program (as gdbserver does): a busy port must not leave a
  // launched program behind.
  if (!address_.stdio) {
    try {
      if (auto unresolved = prepare_listener()) {
        // gdbserver's words; GDB's testsuite waits for ": cannot resolve name: ".
        log_.notice(fmt::format("{}: cannot resolve name: {}", options_.comm, *unresolved));
        log_.notice("Exiting");
        return 1;
      }
    } catch (const boost::system::system_error& e) {
      std::string reason = e.code() == asio::error::address_in_use ? "Address already in use." : e.code().message() + ".";
      log_.notice(fmt::format("Can't bind address: {}", reason));
      log_.notice("Exiting");
      return 1;
    }
  }

  if (options_.attach_pid) {
    if (auto r = attach(*options_.attach_pid); !r) {
      log_.notice(fmt::format("Cannot attach to process {}: {}", *options_.attach_pid, r.error().message));
      log_.notice("Exiting");
      return 1;
    }
  } else if (!options_.program.empty()) {
    if (auto r = launch(options_.program); !r) {
      log_.notice(r.error().message);
      log_.notice("Exiting");
      return 1;
    }
    if (!process()->alive()) {
      auto stop = process()->last_stop();
      log_.notice(fmt::format("During startup program exited with code {}.", stop.exit_status));
      log_.notice("Exiting");
      return 1;
    }
  }

  if (address_.stdio) {
    start_stdio();
  } else {
    log_.notice(fmt::format("Listening on port {}", acceptor_->local_endpoint().port()));
    accept_next();
  }
  run_loop();
  return exit_code_;
}

void Server::run_loop() {
  // Busy-polling: after any event, keep polling the loop for a short while instead of sleeping.
  // A stepi or a breakpoint hit is a chain of hand-offs (GDB -> server -> inferior -> server
  // -> GDB), and on a VM each wake-up of a sleeping process on another CPU costs tens of
  // microseconds; a server that is still polling when the next packet or stop arrives skips
  // its own wake-ups. Never on a single CPU, where the spin would only delay GDB and the
  // inferior.
  auto spin = busy_poll();
  if (spin.count() == 0) {
    io_.run();
    return;
  }
  while (!io_.stopped()) {
    auto deadline = std::chrono::steady_clock::now() + spin;
    while (!io_.stopped() && std::chrono::steady_clock::now() < deadline)
      if (io_.poll() > 0) deadline = std::chrono::steady_clock::now() + spin;
    if (!io_.stopped()) io_.run_one();
  }
}

std::optional<std::string> Server::prepare_listener() {
  const ListenAddress& address = address_;
  // getaddrinfo itself rather than Asio's resolver: its error is reported in gai_strerror's
  // words, as gdbserver does.
  addrinfo hint{};
  hint.ai_family = AF_UNSPEC;
  hint.ai_socktype = SOCK_STREAM;
  hint.ai_protocol = IPPROTO_TCP;
  addrinfo* found = nullptr;
  if (int r = ::getaddrinfo(address.host.c_str(), address.port.c_str(), &hint, &found); r != 0)
    return std::string(::gai_strerror(r));
  tcp::endpoint endpoint;
  std::memcpy(endpoint.data(), found->ai_addr, found->ai_addrlen);
  endpoint.resize(found->ai_addrlen);
  ::freeaddrinfo(found);
  if (endpoint.address().is_unspecified())
    log_.notice(fmt::format("warning: listening on every interface ({}), as you asked: "
                            "anyone who can reach this port can run code as this user", address.host));
  acceptor_.emplace(io_);
  acceptor_->open(endpoint.protocol());
  ::fcntl(acceptor_->native_handle(), F_SETFD, FD_CLOEXEC);  // Asio does not; launched programs must not inherit it
  acceptor_->set_option(tcp::acceptor::reuse_address(true));
  acceptor_->bind(endpoint);
  acceptor_->listen(1);
  return std::nullopt;
}

void Server::accept_next() {
  acceptor_->async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) accept_next();
      return;
    }
    boost::system::error_code ignored;
    auto peer = socket.remote_endpoint(ignored);
    log_.loop("listening socket: connection accepted");
    log_.notice(fmt::format("Remote debugging from host {}, port {}", peer.address().to_string(), peer.port()));
    serve(make_tcp_transport(std::move(socket)));
  });
}

void Server::start_stdio() {
  log_.notice("Remote debugging using stdio");
  serve(make_stdio_transport(io_));
}

Session& Server::serve(std::unique_ptr<Transport> transport) {
  interrupt_pending_ = false;  // a ^C of the previous client is not this one's
  session_ = std::make_unique<Session>(*this, std::move(transport));
  session_->start();
  return *session_;
}

void Server::session_closed(Session* session) {
  if (session != session_.get()) return;
  log_.loop("client connection closed");
  // Destroy the session after its callbacks have unwound.
  auto closing = std::shared_ptr<Session>(session_.release());
  asio::post(io_, [closing] {});
  bool stdio = address_.stdio;
  bool have_process = process() && process()->alive();
  if (exit_requested_ || options_.once || stdio || (!options_.multi && !have_process)) {
    shut_down_inferior();
    finish(0);
    return;
  }
  for (auto* p : processes_.all()) {
    // Non-stop ends with its client: every thread stops (the next client may be all-stop).
    if (p->alive() && p->non_stop()) (void)p->set_non_stop(false);
    p->set_thread_events(false);
  }
  for (auto* p : processes())
    if (p->alive() && p->running()) p->interrupt();  // keep it stopped for the next client
  log_.notice("Remote side has terminated connection.  branchstub will reopen the connection.");
  log_.notice(fmt::format("Listening on port {}", acceptor_->local_endpoint().port()));
  accept_next();
}

void Server::finish(int code) {
  exit_code_ = code;
  boost::system::error_code ignored;
  if (acceptor_) acceptor_->close(ignored);
  poll_timer_.cancel();
  if (sigchld_stream_) sigchld_stream_->close(ignored);
  io_.stop();
}

void Server::watch_sigchld() {
  sigchld_stream_->async_wait(asio::posix::stream_descriptor::wait_read, [this](boost::system::error_code ec) {
    if (ec) return;
    signalfd_siginfo info[16];
    bool terminate = false;
    for (ssize_t n; (n = ::read(sigchld_fd_, info, sizeof info)) > 0;)
      for (size_t i = 0; i < static_cast<size_t>(n) / sizeof info[0]; ++i)
        if (info[i].ssi_signo != SIGCHLD) terminate = true;
    log_.loop("signalfd readable{}", terminate ? " (termination request)" : " (SIGCHLD)");
    for (auto it = orphans_.begin(); it != orphans_.end();)
      it = backend::reap_if_exited(*it) ? orphans_.erase(it) : std::next(it);
    poll_inferior();
    if (terminate) {
      if (coverage_mode_ && coverage_ && process() && process()->alive()) {
        // Keep what ran so far: stop everything where it is and write the files first.
        if (process()->running()) process()->pause();
        coverage_->stop();
        (void)write_coverage_files();
      }
      log_.notice("Terminated: killing the launched program or detaching from the attached one.");
      if (session_) session_->close();
      shut_down_inferior();
      finish(1);
      return;
    }
    watch_sigchld();
  });
}

void Server::request_exit() {
  exit_requested_ = true;
  // Let the OK reach the client first, then go (gdbserver's `monitor exit`).
  exit_timer_.expires_after(std::chrono::milliseconds(100));
  exit_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    if (session_) session_->close();
    shut_down_inferior();
    finish(0);
  });
}

}  // namespace server
