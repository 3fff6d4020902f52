// The reasons users see when a hardware source is missing: the CPU's, not just "not loaded".
#include <catch2/catch.hpp>

#include <cerrno>

#include "backend/host/cpu_id.h"
#include "backend/btrace/lbr/lbr_feed.h"

using namespace backend;

namespace {
CpuId cpu(std::string vendor, bool arch_lbr = false, bool pt = false, bool hypervisor = false) {
  CpuId c;
  c.vendor = std::move(vendor);
  c.family = 6;
  c.model = 0x9e;
  c.arch_lbr = arch_lbr;
  c.intel_pt = pt;
  c.hypervisor = hypervisor;
  return c;
}
const Error kMissing{ENOENT, "/dev/msr_helper: No such file or directory"};
}  // namespace

TEST_CASE("lbr reason: AMD and architectural LBR say why the module is not there", "[hw-reasons]") {
  CHECK(lbr_unavailable_reason("/dev/msr_helper", kMissing, cpu("AuthenticAMD")) ==
        "msr_helper: not available: msr_helper drives Intel's model-specific LBR only; AuthenticAMD "
        "CPUs have none it can use (AMD's LBRv2 is not supported), so the module refuses to load "
        "(/dev/msr_helper: No such file or directory)");
  CHECK(lbr_unavailable_reason("/dev/msr_helper", kMissing, cpu("GenuineIntel", true)) ==
        "msr_helper: not available: this CPU has architectural LBR (Alder Lake, Sapphire Rapids and "
        "later), which msr_helper ABI v1 does not drive, so the module refuses to load "
        "(/dev/msr_helper: No such file or directory)");
  CHECK(lbr_unavailable_reason("/dev/msr_helper", kMissing, cpu("GenuineIntel")) ==
        "msr_helper: not loaded (/dev/msr_helper: No such file or directory); see kmod-helper/README.md");
  CHECK(lbr_unavailable_reason("/dev/msr_helper", kMissing, cpu("GenuineIntel", false, false, true)).find(
            "in a VM it loads only where the hypervisor really gives the guest LBR") != std::string::npos);
}

TEST_CASE("lbr reason: an open error other than a missing device is not called 'not loaded'", "[hw-reasons]") {
  Error denied{EACCES, "/dev/msr_helper: Permission denied (needs root / CAP_SYS_RAWIO)"};
  std::string r = lbr_unavailable_reason("/dev/msr_helper", denied, cpu("GenuineIntel"));
  CHECK(r == "msr_helper: not usable (/dev/msr_helper: Permission denied (needs root / CAP_SYS_RAWIO))");
  CHECK(r.find("not loaded") == std::string::npos);
  Error abi{EPROTO, "/dev/msr_helper: msr_helper ABI version 2, this program speaks 1"};
  CHECK(lbr_unavailable_reason("/dev/msr_helper", abi, cpu("AuthenticAMD")).find("ABI version 2") != std::string::npos);
}

TEST_CASE("pt reason from the CPU", "[hw-reasons]") {
  CHECK(pt_cpu_reason(cpu("GenuineIntel", false, true)).empty());
  CHECK(pt_cpu_reason(cpu("AuthenticAMD")) == "Intel PT exists only on Intel CPUs (this is AuthenticAMD)");
  CHECK(pt_cpu_reason(cpu("GenuineIntel", false, false, true)) ==
        "this CPU reports no Intel PT (CPUID.(EAX=7):EBX[25] clear; the hypervisor does not pass PT through)");
  CHECK(pt_cpu_reason(cpu("GenuineIntel")).find("PT needs Broadwell or later") != std::string::npos);
}

TEST_CASE("cpu id: the host's CPUID bits are read", "[hw-reasons]") {
  CpuId c = read_cpu_id();
  CHECK_FALSE(c.vendor.empty());
  CHECK(c.family != 0);
}
