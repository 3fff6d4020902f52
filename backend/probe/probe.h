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

// Whether x86 debug registers really trap here. Some VMs (confidential guests, some cloud
// hypervisors) accept DR0-3/DR7 but never deliver the #DB: a watchpoint then silently never fires.
struct DebugRegisterProbe {
  bool works = false;
  std::string detail;
};
// A few milliseconds: a forked child with a write watchpoint and an execute breakpoint set.
DebugRegisterProbe probe_debug_registers();

// Whether PTRACE_SINGLEBLOCK really stops only after taken branches here (hardware.md A1.5):
// one block step over a known jmp, then a count over a 1000-iteration loop. A few ms, a forked
// child. The server runs it once and hands the answer to every process (issue 10: the engine
// re-ran the whole probe per process).
struct BlockStepProbe {
  bool works = false;
  std::string detail;
};
BlockStepProbe probe_block_step();

// Whether a single step over cpuid stops right after it. Some hypervisors emulate cpuid and
// drop the trap flag's trap (seen on 2-vCPU AMD EPYC guests): the step then runs the next
// instruction too, so a client's stepi, a watchpoint checked per instruction or a traced step
// would miss one. Where it fails, the server does such a step itself (docs/compatibility.md).
struct CpuidStepProbe {
  bool works = false;
  std::string detail;
};
// A forked child single-stepped over one cpuid; a few ms.
CpuidStepProbe probe_cpuid_step();

struct ProbeReport {
  std::vector<ProbeItem> items;
  bool debug_registers_work = false;  // DR0-3/DR7 watchpoints and breakpoints trap
  bool btf_works = false;       // PTRACE_SINGLEBLOCK stops only on taken branches
  bool perf_bts_works = false;  // gdbserver's BTS perf event opens for our own thread
  bool lbr_module = false;      // /dev/msr_helper can be opened
  bool pt_works = false;        // intel_pt PMU present and an event opens
  bool cpuid_step_traps = false;  // a single step over cpuid stops right after it
  std::string best_source;           // "perf-bts", "lbr" or "software"
  std::string stepbranch_mechanism;  // "singleblock" or "software"
  std::string watchpoints;           // what --watchpoints=auto chooses: "hardware" or "emulated"
};

// Takes well under a second; forks short-lived traced children for the BTF and debug-register
// checks (taken from `debug_registers` / `block_step` when the caller has them already).
ProbeReport run_probe(const DebugRegisterProbe* debug_registers = nullptr,
                      const BlockStepProbe* block_step = nullptr, const CpuidStepProbe* cpuid_step = nullptr);
// What the server uses, from the mechanisms that work: the branch source (perf BTS, else the LBR
// module, else block patching), stepbranch (single-block where BTF works) and watchpoints.
void decide_mechanisms(ProbeReport& report);
// An aligned human-readable table plus the decisions.
std::string format_probe(const ProbeReport& report);

}  // namespace backend
