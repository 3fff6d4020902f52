// CPU identification from CPUID, for the BTS erratum check, PT's cpu element and the probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace backend {

struct CpuId {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  unsigned family = 0, model = 0, stepping = 0;  // display family/model (extended fields folded in)
  bool hypervisor = false;                       // CPUID.1:ECX bit 31
  bool pdcm = false;                             // CPUID.1:ECX bit 15 (PERF_CAPABILITIES)
  bool intel_pt = false;                         // CPUID.(EAX=7,ECX=0):EBX bit 25
  bool arch_lbr = false;                         // CPUID.(EAX=7,ECX=0):EDX bit 19
};

// Why Intel PT cannot be used on this CPU at all ("" when the CPU has it).
std::string pt_cpu_reason(const CpuId& cpu);
// Why the msr_helper module cannot drive this CPU's LBR ("" when it might): the module refuses
// to load on these, so users would otherwise only ever see "not loaded".
std::string lbr_cpu_reason(const CpuId& cpu);

CpuId read_cpu_id();

// What a program may find out about the CPU and use: the feature words (CPUID.1:ECX, EDX;
// CPUID.(7,0):EBX, ECX, EDX; CPUID.80000001h:ECX, EDX) and XCR0 (the register states the
// kernel enabled, which size every xsave area). A recording keeps them: its replay gives the
// program the recorded cpuid answers, so it runs what the recording's CPU had.
struct CpuFeatures {
  std::string cpu;               // "vendor family model stepping"
  std::vector<uint32_t> words;   // in the order above
  uint64_t xcr0 = 0;             // 0: no xgetbv (OSXSAVE clear)
};
CpuFeatures read_cpu_features();
// Why `here` may not run what `recorded` told the program ("" when nothing is missing): the
// feature bits `here` lacks, by CPUID leaf and register.
std::string missing_features(const CpuFeatures& recorded, const CpuFeatures& here);

// AMD's (and Hygon's) x86: where instruction behaviour follows AMD's APM rather than Intel's SDM.
bool amd_like(const CpuId& cpu);

// gdbserver refuses BTS on AMD and on Intel models with erratum AAJ122 (wrong `from` addresses).
bool bts_disabled_for_cpu(const CpuId& cpu);

}  // namespace backend
