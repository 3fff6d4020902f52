// ptrace requests glibc's <sys/ptrace.h> does not name on every version.
#pragma once

namespace backend {

// x86: single-step to the next taken branch (DEBUGCTL.BTF). Only where the probe saw it work:
// hypervisors commonly drop BTF, and then this is an ordinary single step.
inline constexpr long kPtraceSingleblock = 33;

}  // namespace backend
