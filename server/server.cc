#include "server/server.h"

#include "backend/features.h"
#include "backend/ptrace/launch.h"
#include "server/capabilities.h"
#include "backend/host/cpu_id.h"
#include "backend/btrace/perf/perf_pt.h"

#include <fcntl.h>
#include <netdb.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
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

const backend::ProbeReport& Server::probe() {
  if (!probe_) {
    if (!debug_register_probe_) debug_register_probe_ = backend::probe_debug_registers();
    probe_ = backend::run_probe(&*debug_register_probe_, &block_step());
    probe_->watchpoints = watch_emulation() ? "emulated" : "hardware";  // what this server does
  }
  return *probe_;
}

void Server::set_probe(backend::ProbeReport report) {
  debug_register_probe_ = backend::DebugRegisterProbe{report.debug_registers_work, "given, not probed"};
  block_step_probe_ = backend::BlockStepProbe{report.btf_works, "given, not probed"};
  probe_ = std::move(report);
  probe_->watchpoints = watch_emulation() ? "emulated" : "hardware";
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
  setup.test_patch_ring = options_.test_patch_ring;
  if (!options_.test_bts_ring.empty() || !options_.test_pt_aux.empty() || !options_.test_lbr_snapshots.empty())
    log_.notice("TEST ONLY: branch data is replayed from files (--test-*), not recorded by the hardware.");
  trace_setup_ = std::move(setup);
  return *trace_setup_;
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
  if (options_.btrace_source == "patch") return backend::TraceSource::Patch;
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

const protocol::Capabilities& Server::capabilities() {
  if (!capabilities_) {
    auto features = backend::supported_features(probe());
    features.intel_pt = trace_setup().pt;  // the same check, or a TEST ONLY PT feed
    capabilities_ = derive_capabilities(features);
  }
  return *capabilities_;
}

backend::ProcessSettings Server::process_settings() {
  backend::ProcessSettings settings;
  settings.trace_source = btrace_source();
  settings.watch_emulation = watch_emulation();
  settings.trace_setup = trace_setup();
  // PTRACE_SINGLEBLOCK only where the block-step probe (run once per server) saw BTF work.
  settings.singleblock = block_step().works || options_.test_singleblock;
  settings.busy_poll = busy_poll();
  if (log_.debug) settings.log = [this](std::string_view line) { log_.event("{}", line); };
  return settings;
}

std::chrono::microseconds Server::busy_poll() const {
  // Polling on one CPU would only take it from the inferior and GDB.
  cpu_set_t cpus;
  if (::sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2) return std::chrono::microseconds(0);
  return std::chrono::microseconds(options_.busy_poll_us);
}

void Server::add_process(std::unique_ptr<backend::Process> p) {
  p->configure(process_settings());
  if (session_ && session_->non_stop()) (void)p->set_non_stop(true);  // stopped: cannot fail
  if (session_ && session_->thread_events()) p->set_thread_events(true);
  last_event_ = p->last_stop();
  processes_.add(std::move(p));
}

CoverageRun& Server::new_coverage(backend::Process& p) {
  if (coverage_) coverage_->process_gone();
  coverage_ = std::make_unique<CoverageRun>(p);
  return *coverage_;
}

void Server::coverage_process_gone(pid_t pid) {
  if (coverage_ && coverage_->attached() && coverage_->pid() == pid) coverage_->process_gone();
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

// ---------------------------------------------------------------- --coverage FILE PROG

int Server::start_coverage_run() {
  auto format = coverage_format(*options_.coverage_file, options_.coverage_format);
  if (!format) {
    log_.notice(fmt::format("Unknown coverage format {}.", options_.coverage_format));
    return 1;
  }
  if (auto r = launch(options_.program); !r) {
    log_.notice(r.error().message);
    return 1;
  }
  if (!process()->alive()) {
    log_.notice(fmt::format("During startup program exited with code {}.", process()->last_stop().exit_status));
    return 1;
  }
  auto& run = new_coverage(*process());
  if (options_.svg_file) run.keep_call_tree();
  if (auto r = run.start(); !r) {
    log_.notice("Cannot record coverage: " + r.error().message);
    return 1;
  }
  backend::ResumePlan plan;
  plan.others = backend::ResumeAction{};
  if (auto r = process()->resume(plan); !r) {
    log_.notice("Cannot run the program: " + r.error().message);
    return 1;
  }
  resumed();
  run_loop();
  return exit_code_;
}

bool Server::write_coverage_files() {
  if (!coverage_) return false;
  bool ok = true;
  auto format = coverage_format(*options_.coverage_file, options_.coverage_format);
  auto said = coverage_->save(*options_.coverage_file, format.value_or(CoverageFormat::Drcov2));
  if (said) {
    log_.notice(fmt::format("branchstub: {}", *said));
  } else {
    log_.notice(fmt::format("branchstub: {}", said.error().message));
    ok = false;
  }
  if (options_.svg_file) {
    std::string title = "branchstub --coverage:";
    for (const auto& a : options_.program) title += " " + a;
    auto svg = coverage_->save_flame_graph(*options_.svg_file, title);
    log_.notice(fmt::format("branchstub: {}", svg ? *svg : svg.error().message));
    ok = ok && svg.ok();
  }
  return ok;
}

void Server::on_coverage_event(backend::Process* p, const backend::StopEvent& event) {
  if (event.kind == backend::StopKind::Exited || event.kind == backend::StopKind::Killed) {
    bool written = write_coverage_files();
    int code = event.kind == backend::StopKind::Exited ? event.exit_status : 128 + event.signo;
    finish(written ? code : (code ? code : 1));
    return;
  }
  // A signal goes to the program as if no debugger were there; anything else just goes on.
  backend::ResumePlan plan;
  plan.others = backend::ResumeAction{};
  if (event.kind == backend::StopKind::Signal && event.tid)
    plan.threads[event.tid] = backend::ResumeAction{backend::ResumeKind::Continue, event.signo};
  asio::post(io_, [this, p, plan] {
    if (!p->alive()) return;
    if (auto r = p->resume(plan); !r) {
      log_.notice("Cannot resume the program: " + r.error().message);
      (void)write_coverage_files();
      shut_down_inferior();
      finish(1);
      return;
    }
    resumed();
  });
}

}  // namespace server
