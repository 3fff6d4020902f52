// Linux x86-64 signal numbers <-> GDB's wire signal numbers (include/gdb/signals.def).
#pragma once

namespace protocol {

inline constexpr int kGdbSignalUnknown = 143;  // GDB_SIGNAL_UNKNOWN

// 0 stays 0 (no signal); a Linux signal GDB has no name for gives kGdbSignalUnknown.
int host_to_gdb_signal(int linux_signo);
// 0 stays 0; a GDB signal Linux does not have gives 0.
int gdb_to_host_signal(int gdb_signo);

}  // namespace protocol
