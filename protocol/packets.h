// Typed requests: what a client asked for, parsed from one packet payload.
// The protocol layer turns bytes into one of these; the server dispatches on the type.
// Adding a packet = one struct here, one parser case (packets.cc), one handler, one test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/capabilities.h"
#include "protocol/thread_id.h"

namespace protocol {

// ---- general ----
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
struct Monitor { std::string command; };                          // qRcmd,hex
// qGetTLSAddr:<thread>,<offset>,<lm>: address of a thread-local variable (lm: link_map, 0 = static)
struct GetTlsAddress { ThreadId thread; uint64_t offset = 0; uint64_t lm = 0; };

// ---- registers and memory ----
struct ReadRegisters { std::optional<int> thread_suffix; };       // g[;thread:tid;]
struct WriteRegisters { std::vector<uint8_t> data; std::optional<int> thread_suffix; };  // G
struct ReadRegister { int regno = 0; std::optional<int> thread_suffix; };                // p
struct WriteRegister { int regno = 0; std::vector<uint8_t> value; std::optional<int> thread_suffix; };  // P
struct ReadMemory { uint64_t addr = 0; uint64_t length = 0; bool binary = false; };     // m / x
struct WriteMemory { uint64_t addr = 0; std::vector<uint8_t> data; };                   // M / X

// ---- execution ----
enum class ResumeKind { Continue, Step, RangeStep, Stop };
struct ResumeAction {
  ResumeKind kind = ResumeKind::Continue;
  int gdb_signal = 0;            // C/S signal in GDB numbering, 0 = none
  uint64_t range_start = 0;      // r start (inclusive)
  uint64_t range_end = 0;        // r end (exclusive)
  std::optional<ThreadId> thread;  // nullopt = default action for every other thread
};
struct VContQuery {};                                             // vCont?
struct VCont { std::vector<ResumeAction> actions; };              // vCont;...
struct LegacyResume { ResumeAction action; std::optional<uint64_t> addr; };  // c/C/s/S
struct VCtrlC {};                                                 // vCtrlC
struct VStopped {};                                               // vStopped (non-stop: next queued stop)
struct StepBranch { uint32_t count = 1; };                        // stepbranch[:N]
// Qbranchstub:stepbranch-next:<thread-id>,<N>: the client's next single step of that thread
// runs it to its N-th next taken branch instead (so the client performs, and reports, the
// resume itself). An optional ;bp:<addr> names a breakpoint of the client's that it lifts for
// that step (the one at the pc it steps over): it is put back for the rest of the run, so the
// thread still stops there when it comes back (a loop). qbranchstub:stepbranch-last: what the
// stepbranch that the last stop ended did.
struct StepBranchNext { ThreadId thread; uint32_t count = 1; std::optional<uint64_t> lifted_breakpoint; };
struct StepBranchLast {};
struct Kill { std::optional<int> pid; };                          // k / vKill;pid
struct Detach { std::optional<int> pid; };                        // D / D;pid
struct VRun { std::vector<std::string> argv; };                   // vRun;hex;hex..
struct VAttach { int pid = 0; };                                  // vAttach;pid
struct Restart {};                                                // R<hex> (extended-remote)

// ---- breakpoints ----
enum class BreakpointType { Software = 0, Hardware = 1, WriteWatch = 2, ReadWatch = 3, AccessWatch = 4 };
// Z<type>,<addr>,<kind>[;X<len>,<hex>[X<len>,<hex>...]][;cmds:<persist>,X<len>,<hex>...]:
// GDB's target-side conditions (any true -> report) and agent-style dprintf commands, as
// agent-expression bytecode (GDB remote.c remote_add_target_side_condition/_commands).
struct InsertBreakpoint {
  struct Commands {
    bool persist = false;  // keep running them while GDB is disconnected
    std::vector<std::vector<uint8_t>> bytecodes;
  };
  BreakpointType type{};
  uint64_t addr = 0;
  uint64_t kind = 1;
  std::vector<std::vector<uint8_t>> conditions;
  std::optional<Commands> commands;

  // The plain {type, addr, kind} form stays valid (and free of missing-initializer warnings).
  InsertBreakpoint() = default;
  InsertBreakpoint(BreakpointType t, uint64_t a, uint64_t k) : type(t), addr(a), kind(k) {}
};
struct RemoveBreakpoint { BreakpointType type{}; uint64_t addr = 0; uint64_t kind = 1; };  // z

// ---- qXfer ----
struct XferRead { std::string object; std::string annex; uint64_t offset = 0; uint64_t length = 0; };
// qXfer:<object>:write:<annex>:<offset>:<binary data>
struct XferWrite { std::string object; std::string annex; uint64_t offset = 0; std::vector<uint8_t> data; };

// ---- host I/O ----
struct FileSetFs { int pid = 0; };
struct FileOpen { std::string path; int flags = 0; int mode = 0; };
struct FileClose { int fd = -1; };
struct FilePread { int fd = -1; uint64_t count = 0; uint64_t offset = 0; };
struct FilePwrite { int fd = -1; uint64_t offset = 0; std::vector<uint8_t> data; };
struct FileFstat { int fd = -1; };
struct FileUnlink { std::string path; };
struct FileReadlink { std::string path; };

// ---- branch trace (GDB) ----
struct BtraceEnable { std::string format; };          // Qbtrace:bts|pt|off (format "off" = disable)
struct BtraceConf { std::string format; std::string key; std::string value; };  // Qbtrace-conf:bts:size=0x..

// ---- LLDB ----
struct HostInfo {};                                   // qHostInfo
struct ProcessInfo {};                                // qProcessInfo
struct MemoryRegionInfo { uint64_t addr = 0; };       // qMemoryRegionInfo:addr
struct ThreadSuffixSupported {};                      // QThreadSuffixSupported
struct ListThreadsInStopReply {};                     // QListThreadsInStopReply
struct ThreadsInfo {};                                // jThreadsInfo
struct EnableErrorStrings {};                         // QEnableErrorStrings
struct WatchpointSupportInfo {};                      // qWatchpointSupportInfo[:]
struct ThreadStopInfo { int tid = 0; };               // qThreadStopInfo<tid>
struct RegisterInfo { int regno = 0; };               // qRegisterInfo<n>

// A packet we recognise by name but whose arguments were malformed.
struct Malformed { std::string what; };
// A packet we do not know: answered with an empty reply.
struct Unknown { std::string payload; };

using Request = std::variant<
    QuerySupported, MustReplyEmpty, StartNoAckMode, EnableExtendedMode, QueryHaltReason, SetThread,
    QueryCurrentThread, ThreadAlive, ThreadInfoFirst, ThreadInfoNext, QueryAttached, QueryOffsets,
    QuerySymbol, QueryTStatus, SetNonStop, SetPassSignals, SetProgramSignals, SetDisableRandomization,
    SetStartupWithShell, SetEnvironment, UnsetEnvironment, ResetEnvironment, SetWorkingDir,
    SetCatchSyscalls, SetThreadEvents, Monitor, GetTlsAddress, ReadRegisters, WriteRegisters, ReadRegister,
    WriteRegister, ReadMemory, WriteMemory, VContQuery, VCont, LegacyResume, VCtrlC, VStopped, StepBranch,
    StepBranchNext, StepBranchLast, Kill,
    Detach, VRun, VAttach, InsertBreakpoint, RemoveBreakpoint, XferRead, FileSetFs, FileOpen,
    Restart, XferWrite,
    FileClose, FilePread, FilePwrite, FileFstat, FileUnlink, FileReadlink, BtraceEnable, BtraceConf,
    HostInfo, ProcessInfo, MemoryRegionInfo, ThreadSuffixSupported, ListThreadsInStopReply,
    ThreadsInfo, EnableErrorStrings, WatchpointSupportInfo, ThreadStopInfo, RegisterInfo, Malformed,
    Unknown>;

// Parse one unescaped packet payload (the bytes between '$' and '#', with '}' escapes already
// removed by the framer). Never throws; bad arguments give Malformed, unknown names Unknown,
// and so does a packet (or qXfer object) whose capability the server does not have.
Request parse_request(std::string_view payload, const Capabilities& capabilities);
// Every capability: what the packet table can parse at all (parser tests, fuzzing).
Request parse_request(std::string_view payload);

// The qXfer objects the server knows, each with the capability it needs (the qSupported
// reply lists them from here).
struct XferObject {
  std::string_view name;
  bool writable = false;
  Capability needs = Capability::Base;
};
const std::vector<XferObject>& xfer_objects();

}  // namespace protocol
