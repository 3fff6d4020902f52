// Stop, exit and thread-exit replies: what a stop is in the wire's terms, and its text in the
// client's dialect (T/S, W/X, w; LLDB's extra keys and its jThreadsInfo JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/dialect.h"

namespace protocol {

enum class StopReason {
  Signal,       // plain signal stop (also initial stop, interrupt, single-step done)
  Breakpoint,   // software breakpoint (swbreak)
  HwBreakpoint, // hardware breakpoint (hwbreak)
  Watch, ReadWatch, AccessWatch,
  SingleStep,   // step / range step / stepbranch finished (LLDB reason:trace)
  Fork, VFork, VForkDone, Exec,
  SyscallEntry, SyscallReturn,
  ThreadCreated,  // QThreadEvents: a new thread, stopped at its first instruction ("create:;")
  Clone,          // QThreadOptions clone option: the thread made a new one, left stopped ("clone:<id>;")
  // A replay has no more history that way ("replaylog:begin;" / "replaylog:end;"): GDB says
  // "No more reverse-execution history.", LLDB 21 stops at a history boundary.
  HistoryBegin, HistoryEnd,
};

// One stop, in terms the wire understands (signal already in GDB numbering).
struct StopReply {
  StopReason reason = StopReason::Signal;
  int gdb_signal = 5;
  int pid = 0;
  int tid = 0;
  uint64_t watch_addr = 0;            // Watch*
  int child_pid = 0, child_tid = 0;   // Fork/VFork; Clone: the new thread (child_pid = pid)
  std::string exec_path;              // Exec
  int syscall_no = 0;                 // Syscall*
  // Expedited registers: (regno, little-endian bytes).
  std::vector<std::pair<int, std::vector<uint8_t>>> registers;
  std::optional<int> core;
  std::string thread_name;            // LLDB "name:"
  std::vector<int> all_tids;          // LLDB "threads:" when list_threads_in_stop
  std::vector<uint64_t> all_pcs;      // LLDB "thread-pcs:"
  // branchstub's stepbranch: the branch it took ("branch-from:..;branch-to:..;", left out
  // when both are 0), and the mechanism that ran it (set for every stepbranch stop).
  uint64_t branch_from = 0, branch_to = 0;
  std::optional<std::string> stepbranch_mechanism;
  // Extra "key:value;" pairs appended verbatim, after everything else.
  std::vector<std::pair<std::string, std::string>> extra;
};

// The process exited (W) or was killed by a signal (X). pid 0: no process to name (the
// "W00" of a '?' with nothing ever run), so no ";process:" even with multiprocess.
struct ExitReply { int pid = 0; int status = 0; bool signalled = false; int gdb_signal = 0; };
// One thread (not the process) exited, for QThreadEvents or the QThreadOptions exit option:
// "w<status>;<thread-id>".
struct ThreadExitReply { int pid = 0; int tid = 0; int status = 0; };

std::string format_stop_reply(const StopReply& stop, const Dialect& dialect);
// LLDB's stop reason word for a stop ("breakpoint", "watchpoint", "trace", "signal").
const char* lldb_reason(StopReason reason);
// LLDB's jThreadsInfo: a JSON array, one object per thread {tid, name, reason, signal,
// registers {"<decimal regno>": "<hex bytes>"}}; threads with gdb_signal 0 carry no reason.
// (Sent binary-escaped: reply::ThreadsInfo.)
std::string threads_info_json(const std::vector<StopReply>& threads);
std::string format_exit_reply(const ExitReply& exit, const Dialect& dialect);
std::string format_thread_exit_reply(const ThreadExitReply& exit, const Dialect& dialect);

}  // namespace protocol
