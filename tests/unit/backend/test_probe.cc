// The probe on the machine the tests run on. On the development VMs (KVM guest, no PMU) BTF is
// dropped by the hypervisor and perf has no hardware events, so the software paths win.
#include <catch2/catch.hpp>

#include <unistd.h>

#include "backend/host/cpu_id.h"
#include "backend/btrace/perf/perf_pt.h"
#include "backend/probe/probe.h"

using namespace backend;

namespace {
const ProbeItem* find(const ProbeReport& r, const std::string& name) {
  for (const auto& i : r.items)
    if (i.name == name) return &i;
  return nullptr;
}
}  // namespace

TEST_CASE("probe: report is complete and consistent", "[probe]") {
  ProbeReport r = run_probe();
  std::string table = format_probe(r);
  INFO(table);
  for (const char* name : {"cpu", "hypervisor", "perf_event_paranoid", "perf branch counter", "perf BTS",
                           "LBR branch stack", "Intel PT", "debug registers", "BTF (PTRACE_SINGLEBLOCK)",
                           "msr_helper (LBR module)", "rdtsc trap (PR_SET_TSC)", "CPUID faulting"})
    CHECK(find(r, name) != nullptr);
  for (const auto& i : r.items) {
    CHECK_FALSE(i.detail.empty());
    CHECK(table.find(i.name) != std::string::npos);
  }
  CHECK(r.btf_works == find(r, "BTF (PTRACE_SINGLEBLOCK)")->works);
  CHECK(r.perf_bts_works == find(r, "perf BTS")->works);
  CHECK(r.debug_registers_work == find(r, "debug registers")->works);
  CHECK(table.find("branch source") != std::string::npos);
  CHECK(table.find("watchpoints") != std::string::npos);
}

TEST_CASE("probe: the decisions from what works", "[probe]") {
  // Every combination, against a table written out by hand.
  struct Case { bool bts, lbr, btf, dr; const char *source, *step, *watch; };
  const Case cases[] = {
      {false, false, false, false, "patch", "software", "emulated"},
      {true, false, false, false, "perf-bts", "software", "emulated"},
      {false, true, false, false, "lbr", "software", "emulated"},
      {true, true, false, false, "perf-bts", "software", "emulated"},
      {false, false, true, false, "patch", "singleblock", "emulated"},
      {false, false, false, true, "patch", "software", "hardware"},
      {true, true, true, true, "perf-bts", "singleblock", "hardware"},
  };
  for (const Case& c : cases) {
    ProbeReport r;
    r.perf_bts_works = c.bts;
    r.lbr_module = c.lbr;
    r.btf_works = c.btf;
    r.debug_registers_work = c.dr;
    decide_mechanisms(r);
    INFO(c.bts << c.lbr << c.btf << c.dr);
    CHECK(r.best_source == c.source);
    CHECK(r.stepbranch_mechanism == c.step);
    CHECK(r.watchpoints == c.watch);
  }
}

TEST_CASE("probe: debug registers answer the same twice, with a reason", "[probe]") {
  auto a = probe_debug_registers();
  auto b = probe_debug_registers();
  INFO(a.detail);
  CHECK(a.works == b.works);
  CHECK_FALSE(a.detail.empty());
  // The precomputed answer is used as given (the server probes once per life).
  DebugRegisterProbe forced{!a.works, "forced for the test"};
  ProbeReport r = run_probe(&forced);
  CHECK(r.debug_registers_work == forced.works);
  CHECK(find(r, "debug registers")->detail == "forced for the test");
}

TEST_CASE("probe: on a virtual machine BTF is reported ignored", "[probe]") {
  if (!read_cpu_id().hypervisor) {
    WARN("bare metal: BTF/BTS may really work here; VM expectations skipped");
    return;
  }
  ProbeReport r = run_probe();
  INFO(format_probe(r));
  // KVM drops DEBUGCTL.BTF on Intel and (since 6.14) AMD.
  CHECK_FALSE(r.btf_works);
  CHECK(find(r, "BTF (PTRACE_SINGLEBLOCK)")->detail.find("ignored") == 0);
  CHECK(r.stepbranch_mechanism == "software");
  const ProbeItem* counter = find(r, "perf branch counter");
  if (!counter->works && counter->detail.find("ENOENT") != std::string::npos) {
    // No PMU at all (the development VM): BTS fails the same way, and software is the source.
    CHECK_FALSE(r.perf_bts_works);
    if (bts_disabled_for_cpu(read_cpu_id())) {
      // AMD (or an Intel model with the BTS erratum): gdbserver's CPU check refuses first.
      CHECK(find(r, "perf BTS")->detail.find("BTS support has been disabled for the target cpu.") == 0);
    } else {
      // the exact text GDB would get, and the errno behind it
      CHECK(find(r, "perf BTS")->detail.find("Failed to start recording: No such file or directory (no hardware PMU") == 0);
      CHECK(find(r, "perf BTS")->detail.find("ENOENT") != std::string::npos);
    }
    CHECK_FALSE(find(r, "LBR branch stack")->works);
    CHECK(r.best_source == (r.lbr_module ? "lbr" : "patch"));
  }
}

TEST_CASE("probe: Intel PT and the LBR module say exactly why they are missing", "[probe]") {
  ProbeReport r = run_probe();
  INFO(format_probe(r));
  const ProbeItem* pt = find(r, "Intel PT");
  const ProbeItem* lbr = find(r, "msr_helper (LBR module)");
  REQUIRE(pt);
  REQUIRE(lbr);
  CHECK(r.pt_works == pt->works);
  if (!pt->works && ::access(kPtTypePath, F_OK) != 0)
    CHECK(pt->detail.find("Failed to open /sys/bus/event_source/devices/intel_pt/type (No such file or "
                          "directory).  Your system does not support Intel PT.") == 0);
  if (!lbr->works) CHECK(lbr->detail.rfind("msr_helper: not ", 0) == 0);
}

TEST_CASE("probe: the block-step answer is probed alone and used as given", "[probe]") {
  BlockStepProbe b = probe_block_step();
  INFO(b.detail);
  CHECK_FALSE(b.detail.empty());
  BlockStepProbe forced{!b.works, "forced for the test"};
  ProbeReport r = run_probe(nullptr, &forced);
  CHECK(r.btf_works == forced.works);
  CHECK(find(r, "BTF (PTRACE_SINGLEBLOCK)")->detail == "forced for the test");
  CHECK(r.stepbranch_mechanism == (forced.works ? "singleblock" : "software"));
}

TEST_CASE("probe: a step over cpuid is probed alone, answers the same twice, and is used as given", "[probe]") {
  CpuidStepProbe a = probe_cpuid_step();
  CpuidStepProbe b = probe_cpuid_step();
  INFO(a.detail);
  CHECK(a.works == b.works);
  CHECK(a.detail == b.detail);
  // Either it stops right after the instruction, or the words say how far it ran.
  CHECK(a.detail.find(a.works ? "stops right after it" : "the server steps cpuid itself") != std::string::npos);
  CpuidStepProbe forced{!a.works, "forced for the test"};
  ProbeReport r = run_probe(nullptr, nullptr, &forced);
  CHECK(r.cpuid_step_traps == forced.works);
  REQUIRE(find(r, "single step over cpuid"));
  CHECK(find(r, "single step over cpuid")->detail == "forced for the test");
}
