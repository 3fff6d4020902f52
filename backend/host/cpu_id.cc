#include "backend/host/cpu_id.h"

#include <cpuid.h>

#include <cstring>

#include <fmt/format.h>

namespace backend {

CpuId read_cpu_id() {
  CpuId id;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return id;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  id.vendor = vendor;
  if (eax < 1 || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return id;
  unsigned base_family = (eax >> 8) & 0xf;
  id.family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  id.model = (eax >> 4) & 0xf;
  if (base_family == 0x6 || base_family == 0xf) id.model |= ((eax >> 16) & 0xf) << 4;
  id.stepping = eax & 0xf;
  id.hypervisor = (ecx >> 31) & 1;
  id.pdcm = (ecx >> 15) & 1;
  unsigned max_leaf = 0;
  __get_cpuid(0, &max_leaf, &ebx, &ecx, &edx);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    id.intel_pt = (ebx >> 25) & 1;
    id.arch_lbr = (edx >> 19) & 1;
  }
  return id;
}

CpuFeatures read_cpu_features() {
  CpuFeatures f;
  CpuId id = read_cpu_id();
  f.cpu = fmt::format("{} {} {} {}", id.vendor.empty() ? "unknown" : id.vendor, id.family, id.model, id.stepping);
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned max_leaf = static_cast<unsigned>(__get_cpuid_max(0, nullptr));
  unsigned max_ext = static_cast<unsigned>(__get_cpuid_max(0x80000000, nullptr));
  f.words.assign(7, 0);
  if (max_leaf >= 1) {
    __cpuid(1, a, b, c, d);
    f.words[0] = c;
    f.words[1] = d;
    if ((c >> 27) & 1) {  // OSXSAVE: xgetbv works
      uint32_t lo = 0, hi = 0;
      asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      f.xcr0 = (uint64_t{hi} << 32) | lo;
    }
  }
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.words[2] = b;
    f.words[3] = c;
    f.words[4] = d;
  }
  if (max_ext >= 0x80000001) {
    __cpuid(0x80000001, a, b, c, d);
    f.words[5] = c;
    f.words[6] = d;
  }
  return f;
}

std::string missing_features(const CpuFeatures& recorded, const CpuFeatures& here) {
  static const char* const names[] = {"CPUID.1:ECX", "CPUID.1:EDX", "CPUID.7:EBX", "CPUID.7:ECX", "CPUID.7:EDX",
                                       "CPUID.80000001h:ECX", "CPUID.80000001h:EDX"};
  std::string out;
  for (size_t i = 0; i < recorded.words.size() && i < 7; ++i) {
    uint32_t have = i < here.words.size() ? here.words[i] : 0;
    // CPUID.1:ECX[31] (hypervisor) says where the recording ran, not what it can execute.
    uint32_t lacking = recorded.words[i] & ~have & (i == 0 ? 0x7fffffffu : 0xffffffffu);
    if (lacking) out += fmt::format("{}{} bits {:#x}", out.empty() ? "" : ", ", names[i], lacking);
  }
  return out;
}

bool amd_like(const CpuId& cpu) { return cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine"; }

std::string pt_cpu_reason(const CpuId& cpu) {
  if (cpu.vendor != "GenuineIntel")
    return "Intel PT exists only on Intel CPUs (this is " + (cpu.vendor.empty() ? std::string("unknown") : cpu.vendor) + ")";
  if (!cpu.intel_pt)
    return std::string("this CPU reports no Intel PT (CPUID.(EAX=7):EBX[25] clear") +
           (cpu.hypervisor ? "; the hypervisor does not pass PT through)" : "; PT needs Broadwell or later)");
  return "";
}

std::string lbr_cpu_reason(const CpuId& cpu) {
  if (cpu.vendor == "AuthenticAMD" || cpu.vendor == "HygonGenuine")
    return "msr_helper drives Intel's model-specific LBR only; " + cpu.vendor +
           " CPUs have none it can use (AMD's LBRv2 is not supported), so the module refuses to load";
  if (cpu.vendor != "GenuineIntel") return "msr_helper drives Intel CPUs only, so the module refuses to load";
  if (cpu.arch_lbr)
    return "this CPU has architectural LBR (Alder Lake, Sapphire Rapids and later), which msr_helper "
           "ABI v1 does not drive, so the module refuses to load";
  return "";
}

bool bts_disabled_for_cpu(const CpuId& cpu) {
  if (cpu.vendor == "AuthenticAMD") return true;
  if (cpu.vendor == "GenuineIntel" && cpu.family == 6) {
    switch (cpu.model) {
      case 0x1a: case 0x1e: case 0x1f: case 0x2e:  // Nehalem
      case 0x25: case 0x2c: case 0x2f:             // Westmere
      case 0x2a: case 0x2d:                        // Sandy Bridge
      case 0x3a:                                   // Ivy Bridge
        return true;
    }
  }
  return false;
}

}  // namespace backend
