// General packets: the connection's setup, the threads and their queries, and the Q settings
// that GDB sends before a run (server/handlers/general.cc answers them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/packets/packet_list.h"
#include "protocol/thread_id.h"

namespace protocol {

struct QuerySupported { std::vector<std::string> features; };   // qSupported:a+;b-;c=d
struct MustReplyEmpty {};                                         // vMustReplyEmpty
struct StartNoAckMode {};                                         // QStartNoAckMode
struct EnableExtendedMode {};                                     // !
struct QueryHaltReason {};                                        // ?
struct SetThread { char op = 'g'; ThreadId thread; };             // Hg.../Hc...
struct QueryCurrentThread {};                                     // qC
struct ThreadAlive { ThreadId thread; };                          // T<tid>
struct ThreadInfoFirst {};                                        // qfThreadInfo
struct ThreadInfoNext {};                                         // qsThreadInfo
struct QueryAttached { std::optional<int> pid; };                 // qAttached[:pid]
struct QueryOffsets {};                                           // qOffsets
struct QuerySymbol { std::string raw; };                          // qSymbol:...
struct SetNonStop { bool on = false; };                           // QNonStop:0/1
struct SetPassSignals { std::vector<int> gdb_signals; };          // QPassSignals:..
struct SetProgramSignals { std::vector<int> gdb_signals; };       // QProgramSignals:..
struct SetDisableRandomization { bool on = true; };               // QDisableRandomization:N
struct SetStartupWithShell { bool on = true; };                   // QStartupWithShell:N
struct SetEnvironment { std::string var_eq_value; };              // QEnvironmentHexEncoded:hex
struct UnsetEnvironment { std::string var; };                     // QEnvironmentUnset:hex
struct ResetEnvironment {};                                       // QEnvironmentReset
struct SetWorkingDir { std::string dir; };                        // QSetWorkingDir:[hex]
struct SetCatchSyscalls { bool on = false; std::vector<int> syscalls; };  // QCatchSyscalls:..
struct SetThreadEvents { bool on = false; };                      // QThreadEvents:N
struct QueryExecAndArgs {};                                       // qExecAndArgs (GDB 18)
// QThreadOptions;OPTIONS[:TID]... (GDB 15): per-thread event options, a hex mask of GDB's
// GDB_THREAD_OPTION_* bits. An entry without a thread is for every thread; where several
// entries match a thread, the rightmost wins (GDB sends ";0" first to clear the rest).
inline constexpr uint64_t kThreadOptionClone = 0x1;  // report the thread's clones (T05clone:)
inline constexpr uint64_t kThreadOptionExit = 0x2;   // report the thread's exit (w)
inline constexpr uint64_t kSupportedThreadOptions = kThreadOptionClone | kThreadOptionExit;
struct ThreadOptionsEntry {
  uint64_t options = 0;
  std::optional<ThreadId> thread;  // nullopt: every thread
  bool operator==(const ThreadOptionsEntry&) const = default;
};
struct SetThreadOptions { std::vector<ThreadOptionsEntry> entries; };

// QuerySupported comes first: it is what a default-constructed Request holds.
using GeneralPackets = PacketList<
    QuerySupported, MustReplyEmpty, StartNoAckMode, EnableExtendedMode, QueryHaltReason, SetThread,
    QueryCurrentThread, ThreadAlive, ThreadInfoFirst, ThreadInfoNext, QueryAttached, QueryOffsets,
    QuerySymbol, SetNonStop, SetPassSignals, SetProgramSignals, SetDisableRandomization,
    SetStartupWithShell, SetEnvironment, UnsetEnvironment, ResetEnvironment, SetWorkingDir,
    SetCatchSyscalls, SetThreadEvents, QueryExecAndArgs, SetThreadOptions>;

}  // namespace protocol
