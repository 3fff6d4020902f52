// Single steps for the tests that compare the decoders with the CPU, on hosts whose hypervisor
// drops the trap after cpuid (a step then runs the next instruction too; backend's
// probe_cpuid_step): there a step over cpuid is done as the server does it (cpuid run here for
// the child's leaf and subleaf). Everywhere else it is a plain PTRACE_SINGLESTEP.
#pragma once

#include <sys/types.h>

#include <span>
#include <string>

namespace cpuid_step {

// Whether this host's single step over cpuid stops right after it (probed once per test run);
// `why` gets the probe's words.
bool traps(std::string* why = nullptr);

// One step of the stopped child `pid` whose next instruction is `code`; the waitpid status.
int single_step(pid_t pid, std::span<const uint8_t> code);

}  // namespace cpuid_step
