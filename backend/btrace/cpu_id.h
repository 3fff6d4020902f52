// CPU identification from CPUID, for the BTS erratum check, PT's cpu element and the probe.
#pragma once

#include <string>

namespace backend {

struct CpuId {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
  unsigned family = 0, model = 0, stepping = 0;  // display family/model (extended fields folded in)
  bool hypervisor = false;                       // CPUID.1:ECX bit 31
};

CpuId read_cpu_id();

// gdbserver refuses BTS on AMD and on Intel models with erratum AAJ122 (wrong `from` addresses).
bool bts_disabled_for_cpu(const CpuId& cpu);

}  // namespace backend
