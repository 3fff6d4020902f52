// Server: block coverage of the main process (monitor coverage), and --coverage FILE PROG, where
// no client comes: the program runs to its exit, then the files are written.
#include "server/server.h"

namespace server {

namespace asio = boost::asio;

CoverageRun& Server::new_coverage(backend::Process& p) {
  if (coverage_) coverage_->process_gone();
  coverage_ = std::make_unique<CoverageRun>(p);
  return *coverage_;
}

void Server::coverage_process_gone(pid_t pid) {
  if (coverage_ && coverage_->attached() && coverage_->pid() == pid) coverage_->process_gone();
}

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
