#include "server/server.h"

#include "backend/launch.h"
#include "backend/btrace/cpu_id.h"
#include "backend/btrace/perf_pt.h"

#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace server {

namespace asio = boost::asio;
using boost::asio::ip::tcp;

Server::Server(ServerOptions options) : options_(std::move(options)), poll_timer_(io_), exit_timer_(io_) {
  log_.debug = options_.debug;
  log_.remote_debug = options_.remote_debug;
  log_.event_loop = options_.event_loop_debug;
  log_.timestamps = options_.debug_timestamps;
  if (options_.debug_file) log_.set_file(*options_.debug_file);
  launch_settings_.startup_with_shell = options_.startup_with_shell;
  launch_settings_.disable_randomization = options_.disable_randomization;
  launch_settings_.wrapper = options_.wrapper;
  launch_settings_.stdio_is_protocol = parse_comm(options_.comm).value_or(ListenAddress{}).stdio;
}

Server::~Server() {
  session_.reset();
  if (process_ && process_->alive()) shut_down_inferior();
  if (sigchld_fd_ >= 0 && !sigchld_stream_) ::close(sigchld_fd_);
}

const backend::ProbeReport& Server::probe() {
  if (!probe_) {
    if (!debug_register_probe_) debug_register_probe_ = backend::probe_debug_registers();
    probe_ = backend::run_probe(&*debug_register_probe_, &block_step());
    probe_->watchpoints = watch_emulation() ? "emulated" : "hardware";  // what this server does
  }
  return *probe_;
}

const backend::BlockStepProbe& Server::block_step() {
  if (!block_step_probe_) block_step_probe_ = backend::probe_block_step();
  return *block_step_probe_;
}

bool Server::watch_emulation() {
  if (options_.watchpoints == "software") return true;
  if (options_.watchpoints == "hardware") return false;
  if (!debug_register_probe_) {
    debug_register_probe_ = backend::probe_debug_registers();
    if (!debug_register_probe_->works)
      log_.event("debug registers: {}; watchpoints are emulated", debug_register_probe_->detail);
  }
  return !debug_register_probe_->works;
}

const backend::TraceSetup& Server::trace_setup() {
  if (trace_setup_) return *trace_setup_;
  backend::TraceSetup setup;
  backend::CpuId cpu = backend::read_cpu_id();
  if (!options_.test_lbr_snapshots.empty()) {
    auto feed = backend::ReplayLbrFeed::load(options_.test_lbr_snapshots);
    if (feed) setup.lbr = *feed;
    else setup.lbr_unavailable = feed.error().message;
  } else if (auto device = backend::LbrDevice::open()) {
    setup.lbr = std::make_shared<backend::DeviceLbrFeed>(std::move(*device));
  } else {
    setup.lbr_unavailable = backend::lbr_unavailable_reason(backend::LbrDevice::kDefaultPath, device.error(), cpu);
  }
  if (!options_.test_pt_aux.empty()) {
    setup.pt = true;
    setup.test_pt_aux = options_.test_pt_aux;
  } else {
    auto pt = backend::probe_pt();
    setup.pt = pt.works;
    if (!pt.works) {
      setup.pt_unavailable = pt.why;
      std::string cpu_reason = backend::pt_cpu_reason(cpu);
      if (!cpu_reason.empty()) setup.pt_unavailable += " (" + cpu_reason + ")";
    }
  }
  setup.test_bts_ring = options_.test_bts_ring;
  if (!options_.test_bts_ring.empty() || !options_.test_pt_aux.empty() || !options_.test_lbr_snapshots.empty())
    log_.notice("TEST ONLY: branch data is replayed from files (--test-*), not recorded by the hardware.");
  trace_setup_ = std::move(setup);
  return *trace_setup_;
}

void Server::configure_tracer(backend::Process& p) {
  backend::TraceSetup setup = trace_setup();
  setup.code = [&p](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = p.read_memory(addr, out);  // our breakpoints hidden
    return n ? *n : 0;
  };
  p.tracer().configure(setup);
}

backend::LbrFeed* Server::lbr_feed(std::string* why) {
  const auto& setup = trace_setup();
  if (!setup.lbr && why) *why = setup.lbr_unavailable;
  return setup.lbr.get();
}

backend::TraceSource Server::btrace_source() const {
  if (options_.btrace_source == "bts") return backend::TraceSource::PerfBts;
  if (options_.btrace_source == "lbr") return backend::TraceSource::Lbr;
  if (options_.btrace_source == "soft") return backend::TraceSource::Software;
  return backend::TraceSource::Auto;
}

backend::Result<pid_t> Server::launch(std::vector<std::string> argv) {
  backend::LaunchOptions launch = launch_settings_;
  last_run_ = argv;
  launch.argv = std::move(argv);
  if (!launch.argv.empty()) launch.argv.front() = backend::program_path(launch.argv.front());
  auto process = backend::Process::launch(launch);
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
  p->set_trace_source(btrace_source());
  configure_tracer(*p);
  p->set_watch_emulation(watch_emulation());
  last_event_ = p->last_stop();
  // A second inferior of an extended-remote session goes beside the first one.
  if (process_ && process_->alive()) followers_[p->pid()] = std::move(p);
  else process_ = std::move(p);
}

std::vector<backend::Process*> Server::processes() {
  std::vector<backend::Process*> out;
  if (process_) out.push_back(process_.get());
  for (auto& [pid, p] : followers_) out.push_back(p.get());
  return out;
}

backend::Process* Server::process_for(pid_t pid) {
  if (process_ && process_->pid() == pid) return process_.get();
  auto it = followers_.find(pid);
  return it == followers_.end() ? nullptr : it->second.get();
}

backend::Result<backend::Process*> Server::adopt_fork_child(pid_t child) {
  for (auto* p : processes()) {
    auto held = p->held_children();
    if (std::find(held.begin(), held.end(), child) == held.end()) continue;
    auto adopted = p->adopt_child(child);
    if (!adopted) return adopted.error();
    auto* raw = adopted->get();
    configure_tracer(*raw);  // its tracer is new: hand it the server's setup
    followers_[child] = std::move(*adopted);
    return raw;
  }
  return backend::Error{ESRCH, fmt::format("No fork child {} is held.", child)};
}

void Server::remove_process(pid_t pid) {
  if (followers_.erase(pid)) return;
  if (!process_ || process_->pid() != pid) return;
  if (followers_.empty()) {
    forget_process();
    return;
  }
  process_ = std::move(followers_.begin()->second);
  followers_.erase(followers_.begin());
  last_event_ = process_->last_stop();
}

void Server::forget_process() {
  process_.reset();
  last_event_.reset();
  poll_timer_.cancel();
  polling_ = false;
}

void Server::shut_down_inferior() {
  for (auto& [pid, p] : followers_) {
    if (!p->alive()) continue;
    if (p->was_attached()) (void)p->detach();
    else (void)p->kill();
  }
  followers_.clear();
  if (!process_) return;
  if (process_->alive()) {
    if (process_->was_attached()) {
      log_.notice(fmt::format("Detaching from process {}", process_->pid()));
      (void)process_->detach();
    } else {
      log_.event("killing process {}", process_->pid());
      (void)process_->kill();
    }
  }
  forget_process();
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
  if (!parse_comm(options_.comm).value_or(ListenAddress{}).stdio) sigaddset(&mask, SIGINT);
  else ::signal(SIGINT, SIG_IGN);  // stdio: GDB's Ctrl-C reaches our process group too
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  sigchld_fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (sigchld_fd_ < 0) {
    log_.notice(fmt::format("signalfd: {}", std::strerror(errno)));
    return 1;
  }
  sigchld_stream_.emplace(io_, sigchld_fd_);
  watch_sigchld();

  // Bind before starting the program (as gdbserver does): a busy port must not leave a
  // launched program behind.
  auto address = parse_comm(options_.comm);
  if (!address->stdio) {
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
    if (!process_->alive()) {
      auto stop = process_->last_stop();
      log_.notice(fmt::format("During startup program exited with code {}.", stop.exit_status));
      log_.notice("Exiting");
      return 1;
    }
  }

  if (address->stdio) {
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
  auto spin = std::chrono::microseconds(options_.busy_poll_us);
  cpu_set_t cpus;
  if (spin.count() > 0 && ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2)
    spin = std::chrono::microseconds(0);
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
  auto address = *parse_comm(options_.comm);
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
    interrupt_pending_ = false;  // a ^C of the previous client is not this one's
    session_ = std::make_unique<Session>(*this, make_tcp_transport(std::move(socket)));
    session_->start();
  });
}

void Server::start_stdio() {
  log_.notice("Remote debugging using stdio");
  session_ = std::make_unique<Session>(*this, make_stdio_transport(io_));
  session_->start();
}

void Server::session_closed(Session* session) {
  if (session != session_.get()) return;
  log_.loop("client connection closed");
  // Destroy the session after its callbacks have unwound.
  auto closing = std::shared_ptr<Session>(session_.release());
  asio::post(io_, [closing] {});
  bool stdio = parse_comm(options_.comm)->stdio;
  bool have_process = process_ && process_->alive();
  if (exit_requested_ || options_.once || stdio || (!options_.multi && !have_process)) {
    shut_down_inferior();
    finish(0);
    return;
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
      log_.notice("Terminated: killing the launched program or detaching from the attached one.");
      if (session_) session_->close();
      shut_down_inferior();
      finish(1);
      return;
    }
    watch_sigchld();
  });
}

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
  auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(150);
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

void Server::interrupt() {
  if (!process_ || !process_->alive()) return;
  // A ^C stands until a SIGINT stop is reported. GDB sends it when it believes the program
  // runs, but the program may stop for something else first (a shared-library event GDB
  // resumes at once): gdbserver's real SIGINT would then wait in the program and stop the
  // next resume; ours waits here and does the same. One running process is enough to stop:
  // the others are paused when its stop comes.
  interrupt_pending_ = true;
  if (auto* p = running_process()) p->interrupt();
}

void Server::poll_inferior() {
  for (auto* p : processes()) {
    if (auto event = p->poll_events()) {
      on_process_event(p, *event);
      break;  // the process list may have changed
    }
  }
  bool wants = false;
  for (auto* p : processes()) wants = wants || (p->alive() && p->running() && p->wants_poll());
  if (wants) asio::post(io_, [this] { poll_inferior(); });
  if (running_process()) arm_poll_timer();
}

void Server::on_process_event(backend::Process* p, const backend::StopEvent& event) {
  if (event.kind == backend::StopKind::NoResumed) {
    // This process has nothing resumed left; that is news only when no other process runs.
    if (running_process()) return;
    if (session_ && session_->waiting() != Waiting::Nothing) session_->on_stop(event);
    return;
  }
  last_event_ = event;
  bool gone = event.kind == backend::StopKind::Exited || event.kind == backend::StopKind::Killed;
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
  // A follower that ended is forgotten; the primary stays (dead) unless a follower can take
  // its place, so a single-process session goes on exactly as before.
  if (gone && !followers_.empty()) remove_process(event.pid);
}

}  // namespace server
