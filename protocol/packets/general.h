// General packets: the connection's setup, the threads and their queries, and the Q settings
// that GDB sends before a run (server/handlers/general.cc answers them).
#pragma once

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
struct QueryTStatus {};                                           // qTStatus (empty reply)
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

// QuerySupported comes first: it is what a default-constructed Request holds.
using GeneralPackets = PacketList<
    QuerySupported, MustReplyEmpty, StartNoAckMode, EnableExtendedMode, QueryHaltReason, SetThread,
    QueryCurrentThread, ThreadAlive, ThreadInfoFirst, ThreadInfoNext, QueryAttached, QueryOffsets,
    QuerySymbol, QueryTStatus, SetNonStop, SetPassSignals, SetProgramSignals, SetDisableRandomization,
    SetStartupWithShell, SetEnvironment, UnsetEnvironment, ResetEnvironment, SetWorkingDir,
    SetCatchSyscalls, SetThreadEvents, QueryExecAndArgs>;

}  // namespace protocol
