// Run-time probe of the branch-tracing mechanisms this machine really offers (`--probe`), each
// with a reason for every "no". The server picks its branch source and its stepbranch
// mechanism from the report.
#pragma once

#include <string>
#include <vector>

namespace backend {

struct ProbeItem {
  std::string name;    // "perf BTS", "BTF (PTRACE_SINGLEBLOCK)", ...
  bool works = false;
  std::string detail;  // what was tried and what happened, e.g. "perf_event_open ...: ENOENT, no PMU"
};

struct ProbeReport {
  std::vector<ProbeItem> items;
  bool btf_works = false;       // PTRACE_SINGLEBLOCK stops only on taken branches
  bool perf_bts_works = false;  // gdbserver's BTS perf event opens for our own thread
  bool lbr_module = false;      // /dev/msr_helper can be opened
  bool pt_works = false;        // intel_pt PMU present and an event opens
  std::string best_source;           // "perf-bts", "lbr" or "software"
  std::string stepbranch_mechanism;  // "singleblock" or "software"
};

// Takes well under a second; forks one short-lived traced child for the BTF check.
ProbeReport run_probe();
// An aligned human-readable table plus the two decisions.
std::string format_probe(const ProbeReport& report);

}  // namespace backend
