#include "protocol/stop_reply.h"

#include <fmt/format.h>

#include "protocol/hex.h"
#include "protocol/thread_id.h"

namespace protocol {
namespace {

std::string json_escape(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The value field a stop reply gives for its reason (empty: no reason field). The signal is
// always there; this is only the named key that follows it.
void append_reason(std::string& out, const StopReply& stop, const Dialect& d) {
  switch (stop.reason) {
    case StopReason::Breakpoint:
      if (d.swbreak) out += "swbreak:;";
      break;
    case StopReason::HwBreakpoint:
      if (d.hwbreak) out += "hwbreak:;";
      break;
    case StopReason::Watch:
      out += "watch:" + hex_u64(stop.watch_addr) + ";";
      break;
    case StopReason::ReadWatch:
      out += "rwatch:" + hex_u64(stop.watch_addr) + ";";
      break;
    case StopReason::AccessWatch:
      out += "awatch:" + hex_u64(stop.watch_addr) + ";";
      break;
    case StopReason::Fork:
      out += "fork:" + format_thread_id(stop.child_pid, stop.child_tid, d.multiprocess) + ";";
      break;
    case StopReason::VFork:
      out += "vfork:" + format_thread_id(stop.child_pid, stop.child_tid, d.multiprocess) + ";";
      break;
    case StopReason::Clone:
      out += "clone:" + format_thread_id(stop.child_pid, stop.child_tid, d.multiprocess) + ";";
      break;
    case StopReason::VForkDone:
      out += "vforkdone:;";
      break;
    case StopReason::Exec:
      out += "exec:" + to_hex(std::string_view(stop.exec_path)) + ";";
      break;
    case StopReason::SyscallEntry:
      out += "syscall_entry:" + hex_u64(static_cast<uint32_t>(stop.syscall_no)) + ";";
      break;
    case StopReason::SyscallReturn:
      out += "syscall_return:" + hex_u64(static_cast<uint32_t>(stop.syscall_no)) + ";";
      break;
    case StopReason::ThreadCreated:
      out += "create:;";
      break;
    case StopReason::HistoryBegin:
      out += "replaylog:begin;";
      break;
    case StopReason::HistoryEnd:
      out += "replaylog:end;";
      break;
    case StopReason::Signal:
    case StopReason::SingleStep:
      break;
  }
}

}  // namespace

const char* lldb_reason(StopReason r) {
  switch (r) {
    case StopReason::Breakpoint:
    case StopReason::HwBreakpoint:
      return "breakpoint";
    case StopReason::Watch:
    case StopReason::ReadWatch:
    case StopReason::AccessWatch:
      return "watchpoint";
    case StopReason::SingleStep:
      return "trace";
    case StopReason::Exec:
      return "exec";
    case StopReason::Fork:
      return "fork";      // LLDB reads the child from the "fork:" key itself
    case StopReason::VFork:
      return "vfork";
    case StopReason::VForkDone:
      return "vforkdone";
    default:
      return "signal";
  }
}

namespace {

// A thread name goes out as plain text unless it could confuse the "key:value;" syntax;
// then LLDB's "hexname:" key is used instead.
void append_name(std::string& out, const std::string& name) {
  bool plain = true;
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == ';' || c == ':' || c == '$' || c == '#' || c == '}' || c == '*' || u < 0x20 || u >= 0x7f)
      plain = false;
  }
  if (plain)
    out += "name:" + name + ";";
  else
    out += "hexname:" + to_hex(std::string_view(name)) + ";";
}

uint8_t sig_byte(int sig) { return static_cast<uint8_t>(sig & 0xff); }

}  // namespace

std::string format_stop_reply(const StopReply& stop, const Dialect& d) {
  // --disable-packet=T: the old 'S' reply, the signal alone, whatever the stop was.
  if (d.disabled.t_stop) return fmt::format("S{:02x}", sig_byte(stop.gdb_signal));
  std::string out = fmt::format("T{:02x}", sig_byte(stop.gdb_signal));
  append_reason(out, stop, d);
  for (const auto& [regno, bytes] : stop.registers)
    out += fmt::format("{:02x}:", static_cast<unsigned>(regno)) + to_hex(bytes) + ";";
  if (!d.disabled.t_thread) {  // --disable-packet=Tthread drops the core with the thread, as gdbserver
    out += "thread:" + format_thread_id(stop.pid, stop.tid, d.multiprocess) + ";";
    if (stop.core && *stop.core >= 0) out += "core:" + hex_u64(static_cast<uint64_t>(*stop.core)) + ";";
  }
  if (d.lldb) {
    if (!stop.thread_name.empty()) append_name(out, stop.thread_name);
    if (d.list_threads_in_stop && !stop.all_tids.empty()) {
      out += "threads:";
      for (size_t i = 0; i < stop.all_tids.size(); ++i)
        out += (i ? "," : "") + hex_u64(static_cast<uint32_t>(stop.all_tids[i]));
      out += ";";
      if (!stop.all_pcs.empty()) {
        out += "thread-pcs:";
        for (size_t i = 0; i < stop.all_pcs.size(); ++i) out += (i ? "," : "") + hex_u64(stop.all_pcs[i]);
        out += ";";
      }
    }
    out += std::string("reason:") + lldb_reason(stop.reason) + ";";
    // LLDB finds the watchpoint from "description": hex of "<decimal addr> <index>".
    if (stop.reason == StopReason::Watch || stop.reason == StopReason::ReadWatch ||
        stop.reason == StopReason::AccessWatch)
      out += "description:" + to_hex(fmt::format("{} 0", stop.watch_addr)) + ";";
  }
  if (stop.branch_from || stop.branch_to)
    out += "branch-from:" + hex_u64(stop.branch_from) + ";branch-to:" + hex_u64(stop.branch_to) + ";";
  if (stop.stepbranch_mechanism) out += "stepbranch-mechanism:" + *stop.stepbranch_mechanism + ";";
  for (const auto& [key, value] : stop.extra) out += key + ":" + value + ";";
  return out;
}

std::string threads_info_json(const std::vector<StopReply>& threads) {
  std::string out = "[";
  for (size_t i = 0; i < threads.size(); ++i) {
    const StopReply& t = threads[i];
    if (i) out += ",";
    out += fmt::format("{{\"tid\":{}", t.tid);
    if (!t.thread_name.empty()) out += ",\"name\":\"" + json_escape(t.thread_name) + "\"";
    if (t.gdb_signal != 0) {
      out += fmt::format(",\"reason\":\"{}\",\"signal\":{}", lldb_reason(t.reason), t.gdb_signal);
      if (t.reason == StopReason::Watch || t.reason == StopReason::ReadWatch || t.reason == StopReason::AccessWatch)
        out += fmt::format(",\"description\":\"{} 0\"", t.watch_addr);
    }
    out += ",\"registers\":{";
    for (size_t r = 0; r < t.registers.size(); ++r) {
      if (r) out += ",";
      out += fmt::format("\"{}\":\"{}\"", t.registers[r].first, to_hex(t.registers[r].second));
    }
    out += "}}";
  }
  return out + "]";
}

std::string format_exit_reply(const ExitReply& exit, const Dialect& d) {
  std::string out = exit.signalled ? fmt::format("X{:02x}", sig_byte(exit.gdb_signal))
                                   : fmt::format("W{:02x}", static_cast<uint8_t>(exit.status & 0xff));
  if (d.multiprocess && exit.pid) out += ";process:" + hex_u64(static_cast<uint32_t>(exit.pid));
  return out;
}

std::string format_thread_exit_reply(const ThreadExitReply& exit, const Dialect& d) {
  // gdbserver writes the status without padding ("w0;p9c4.9fb").
  return fmt::format("w{:x};", static_cast<uint8_t>(exit.status & 0xff)) +
         format_thread_id(exit.pid, exit.tid, d.multiprocess);
}

}  // namespace protocol
