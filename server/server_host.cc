// Server: what this machine offers, found out once per server life (the probe, block stepping,
// debug registers, the trace setup), and the choices made from it (capabilities, how every
// process is run).
#include "server/server.h"

#include <sched.h>

#include <chrono>

#include "backend/btrace/patch/plan_cache.h"
#include "backend/btrace/perf/perf_pt.h"
#include "backend/features.h"
#include "backend/host/cpu_id.h"
#include "server/capabilities.h"

namespace server {

const backend::ProbeReport& Server::probe() {
  if (!probe_) {
    if (!debug_register_probe_) debug_register_probe_ = backend::probe_debug_registers();
    probe_ = backend::run_probe(&*debug_register_probe_, &block_step(), &cpuid_step());
    probe_->watchpoints = watch_emulation() ? "emulated" : "hardware";  // what this server does
  }
  return *probe_;
}

void Server::set_probe(backend::ProbeReport report) {
  debug_register_probe_ = backend::DebugRegisterProbe{report.debug_registers_work, "given, not probed"};
  block_step_probe_ = backend::BlockStepProbe{report.btf_works, "given, not probed"};
  cpuid_step_probe_ = backend::CpuidStepProbe{report.cpuid_step_traps, "given, not probed"};
  probe_ = std::move(report);
  probe_->watchpoints = watch_emulation() ? "emulated" : "hardware";
}

const backend::BlockStepProbe& Server::block_step() {
  if (!block_step_probe_) block_step_probe_ = backend::probe_block_step();
  return *block_step_probe_;
}

const backend::CpuidStepProbe& Server::cpuid_step() {
  if (!cpuid_step_probe_) {
    cpuid_step_probe_ = backend::probe_cpuid_step();
    if (!cpuid_step_probe_->works) log_.event("single step over cpuid: {}", cpuid_step_probe_->detail);
  }
  return *cpuid_step_probe_;
}

bool Server::watch_emulation() {
  if (options_.watchpoints == "software" || options_.watchpoints == "steps") return true;
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
  if (hooks_.lbr || !hooks_.lbr_unavailable.empty()) {
    setup.lbr = hooks_.lbr;
    setup.lbr_unavailable = hooks_.lbr_unavailable;
  } else if (auto device = backend::LbrDevice::open()) {
    setup.lbr = std::make_shared<backend::DeviceLbrFeed>(std::move(*device));
  } else {
    setup.lbr_unavailable = backend::lbr_unavailable_reason(backend::LbrDevice::kDefaultPath, device.error(), cpu);
  }
  setup.feeds = hooks_.trace_feeds;
  setup.synthesize_pt = options_.synthesize_pt && !setup.pt;  // the hardware's own where it has PT
  // A replay's code must stay as it was recorded: it never plans ahead.
  if (!options_.replay_dir)
    setup.plan_cache_dir = !options_.plan_cache ? backend::patch::default_plan_dir()
                           : *options_.plan_cache == "off" ? std::string()
                                                           : *options_.plan_cache;
  if (setup.feeds && setup.feeds->serves_pt()) {
    setup.pt = true;
  } else {
    auto pt = backend::probe_pt();
    setup.pt = pt.works;
    if (!pt.works) {
      setup.pt_unavailable = pt.why;
      std::string cpu_reason = backend::pt_cpu_reason(cpu);
      if (!cpu_reason.empty()) setup.pt_unavailable += " (" + cpu_reason + ")";
    }
  }
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

const protocol::Capabilities& Server::capabilities() {
  if (!capabilities_) {
    auto features = backend::supported_features(probe());
    // The same check, or the test build's PT feed, or PT written from the software history.
    features.intel_pt = trace_setup().pt || trace_setup().synthesize_pt;
    features.reverse = options_.replay_dir.has_value();  // a replay runs backwards; a live program cannot
    features.tracepoints = features.tracepoints && !options_.replay_dir;  // collected by int3s in a live program
    capabilities_ = derive_capabilities(features);
  }
  return *capabilities_;
}

backend::ProcessSettings Server::process_settings() {
  backend::ProcessSettings settings;
  settings.trace_source = btrace_source();
  settings.watch_emulation = watch_emulation();
  settings.page_watch = options_.watchpoints != "steps";
  settings.trace_setup = trace_setup();
  // PTRACE_SINGLEBLOCK only where the block-step probe (run once per server) saw BTF work, or
  // where the test build forces it (hooks).
  settings.singleblock = block_step().works || hooks_.singleblock;
  settings.cpuid_step_traps = cpuid_step().works;
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

}  // namespace server
