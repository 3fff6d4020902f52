// Linux x86-64 signal numbers <-> GDB's wire signal numbers (include/gdb/signals.def).
#pragma once

#include <set>
#include <vector>

namespace protocol {

inline constexpr int kGdbSignalUnknown = 143;  // GDB_SIGNAL_UNKNOWN

// 0 stays 0 (no signal); a Linux signal GDB has no name for gives kGdbSignalUnknown.
int host_to_gdb_signal(int linux_signo);
// 0 stays 0; a GDB signal Linux does not have gives 0.
int gdb_to_host_signal(int gdb_signo);

// QPassSignals / QProgramSignals list GDB numbers: the Linux signals (1..64) whose GDB number is
// listed. Not the list mapped one by one to Linux: GDB_SIGNAL_POLL would then name SIGIO, which
// GDB numbers GDB_SIGNAL_IO and may want stopped (gdbserver tests membership the same way).
std::set<int> host_signals_listed(const std::vector<int>& gdb_signals);

}  // namespace protocol
