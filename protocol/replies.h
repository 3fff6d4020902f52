// Typed replies and their formatting into payloads in the client's dialect.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/disabled_packets.h"

namespace protocol {

// What the client negotiated; the one place where GDB and LLDB differ on the wire.
struct Dialect {
  bool multiprocess = false;
  bool swbreak = false;        // client offered swbreak+ (GDB); LLDB never does
  bool hwbreak = false;
  bool fork_events = false;
  bool vfork_events = false;
  bool exec_events = false;
  bool no_resumed = false;
  bool lldb = false;           // LLDB (negotiate(): its qSupported offer), or an LLDB-only packet seen
  bool list_threads_in_stop = false;  // LLDB QListThreadsInStopReply accepted
  bool error_strings = false;  // LLDB QEnableErrorStrings
  // Not negotiated: what the server was started with (--disable-packet); kept across qSupported.
  DisabledPackets disabled;
};

enum class StopReason {
  Signal,       // plain signal stop (also initial stop, interrupt, single-step done)
  Breakpoint,   // software breakpoint (swbreak)
  HwBreakpoint, // hardware breakpoint (hwbreak)
  Watch, ReadWatch, AccessWatch,
  SingleStep,   // step / range step / stepbranch finished (LLDB reason:trace)
  Fork, VFork, VForkDone, Exec,
  SyscallEntry, SyscallReturn,
  ThreadCreated,  // QThreadEvents: a new thread, stopped at its first instruction ("create:;")
};

// One stop, in terms the wire understands (signal already in GDB numbering).
struct StopReply {
  StopReason reason = StopReason::Signal;
  int gdb_signal = 5;
  int pid = 0;
  int tid = 0;
  uint64_t watch_addr = 0;            // Watch*
  int child_pid = 0, child_tid = 0;   // Fork/VFork
  std::string exec_path;              // Exec
  int syscall_no = 0;                 // Syscall*
  // Expedited registers: (regno, little-endian bytes).
  std::vector<std::pair<int, std::vector<uint8_t>>> registers;
  std::optional<int> core;
  std::string thread_name;            // LLDB "name:"
  std::vector<int> all_tids;          // LLDB "threads:" when list_threads_in_stop
  std::vector<uint64_t> all_pcs;      // LLDB "thread-pcs:"
  // Extra "key:value;" pairs appended verbatim (e.g. branch-from/branch-to for stepbranch).
  std::vector<std::pair<std::string, std::string>> extra;
};

struct ExitReply { int pid = 0; int status = 0; bool signalled = false; int gdb_signal = 0; };
// QThreadEvents: one thread (not the process) exited: "w<status>;<thread-id>".
struct ThreadExitReply { int pid = 0; int tid = 0; int status = 0; };

std::string format_stop_reply(const StopReply& stop, const Dialect& dialect);
// LLDB's stop reason word for a stop ("breakpoint", "watchpoint", "trace", "signal").
const char* lldb_reason(StopReason reason);
// LLDB's jThreadsInfo: a JSON array, one object per thread {tid, name, reason, signal,
// registers {"<decimal regno>": "<hex bytes>"}}; threads with gdb_signal 0 carry no reason.
// (Send it binary-escaped.)
std::string threads_info_json(const std::vector<StopReply>& threads);
std::string format_exit_reply(const ExitReply& exit, const Dialect& dialect);
std::string format_thread_exit_reply(const ThreadExitReply& exit, const Dialect& dialect);
// Non-stop: 'N' (every resumed thread is gone) as a stop reply or in a %Stop notification.
inline std::string no_resumed_reply() { return "N"; }

// Helpers for common replies.
inline std::string ok() { return "OK"; }
inline std::string empty() { return {}; }

// The one error reply, carrying the errno and the reason as far as the client takes them:
// GDB shows the text after "E."; LLDB takes "Exx" with the errno, plus ";hex(text)" once it
// asked for error strings (QEnableErrorStrings). A few GDB replies are read as a numeric code
// only (a failed memory read): ErrorForm::Code gives "Exx" there.
enum class ErrorForm { Text, Code };
std::string error_reply(const Dialect& dialect, int err, std::string_view text, ErrorForm form = ErrorForm::Text);
// "Exx" with no dialect at hand (framing: an oversized packet).
std::string error_code(int err);

// qXfer reply for [offset, offset+length) of a complete document: "m..." or "l..." (escaped).
std::string xfer_chunk(std::string_view document, uint64_t offset, uint64_t length);
// qRcmd output packet: "O" + hex(text).
std::string console_output(std::string_view text);

}  // namespace protocol
