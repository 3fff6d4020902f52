// g/G/p/P and m/M/x/X.
#include <algorithm>

#include <fmt/format.h>

#include "server/handlers/handlers.h"

namespace server {

namespace {

constexpr uint64_t kMaxMemoryRead = 0x40000;  // more than any client asks at once; bounds allocation

// One register's bytes, or its size alone when the thread has no value for it.
reply::RegisterValue register_value(const backend::RegisterFile& regs, const backend::RegisterInfo& info) {
  size_t size = static_cast<size_t>(info.bitsize / 8);
  if (info.regnum < static_cast<int>(regs.valid.size()) && !regs.valid[info.regnum])
    return {std::vector<uint8_t>(size), false};
  auto begin = regs.bytes.begin() + static_cast<long>(info.offset);
  return {std::vector<uint8_t>(begin, begin + static_cast<long>(size)), true};
}

}  // namespace

Reply handle(Session& s, const ReadRegisters& r) {
  auto* p = s.process();
  if (!p) return no_process();
  if (selected_trace_frame(s)) return trace_frame_registers(s, std::nullopt);
  auto regs = p->read_registers(s.thread_for(r.thread_suffix));
  if (!regs) return error_reply(regs.error());
  reply::Registers out;
  for (const auto& info : p->register_layout().regs) out.values.push_back(register_value(*regs, info));
  return out;
}

Reply handle(Session& s, const WriteRegisters& w) {
  auto* p = s.process();
  if (!p) return no_process();
  if (selected_trace_frame(s)) return error_reply(EROFS, "Cannot change a trace frame.");
  pid_t tid = s.thread_for(w.thread_suffix);
  auto regs = p->read_registers(tid);
  if (!regs) return error_reply(regs.error());
  size_t n = std::min(w.data.size(), regs->bytes.size());
  std::copy_n(w.data.begin(), n, regs->bytes.begin());
  if (auto r = p->write_registers(tid, *regs); !r) return error_reply(r.error());
  return reply::Ok{};
}

Reply handle(Session& s, const ReadRegister& r) {
  auto* p = s.process();
  if (!p) return no_process();
  const auto& layout = p->register_layout();
  if (r.regno < 0 || r.regno >= static_cast<int>(layout.regs.size())) return error_reply(EINVAL, "No such register.");
  if (selected_trace_frame(s)) return trace_frame_registers(s, r.regno);
  // LLDB reads registers one `p` at a time: fetch only the set the register is in.
  auto set = backend::is_general_register(r.regno) ? backend::RegisterSet::General : backend::RegisterSet::All;
  auto regs = p->read_registers(s.thread_for(r.thread_suffix), set);
  if (!regs) return error_reply(regs.error());
  return reply::Registers{{register_value(*regs, layout.regs[r.regno])}};
}

Reply handle(Session& s, const WriteRegister& w) {
  auto* p = s.process();
  if (!p) return no_process();
  if (selected_trace_frame(s)) return error_reply(EROFS, "Cannot change a trace frame.");
  const auto& layout = p->register_layout();
  if (w.regno < 0 || w.regno >= static_cast<int>(layout.regs.size())) return error_reply(EINVAL, "No such register.");
  const auto& info = layout.regs[w.regno];
  if (w.value.size() != static_cast<size_t>(info.bitsize / 8)) return error_reply(EINVAL, "Wrong register size.");
  pid_t tid = s.thread_for(w.thread_suffix);
  auto regs = p->read_registers(tid);
  if (!regs) return error_reply(regs.error());
  std::copy(w.value.begin(), w.value.end(), regs->bytes.begin() + static_cast<long>(info.offset));
  if (info.regnum < static_cast<int>(regs->valid.size())) regs->valid[info.regnum] = true;
  if (auto r = p->write_registers(tid, *regs); !r) return error_reply(r.error());
  return reply::Ok{};
}

Reply handle(Session& s, const ReadMemory& m) {
  auto* p = s.process();
  // Nothing to read: GDB gets "b", LLDB's probe "x0,0" (sent before any process) "OK".
  if (m.binary && m.length == 0) return reply::BinaryMemory{};
  if (!p) return error_reply(ESRCH, "No process.", ErrorForm::Code);
  if (selected_trace_frame(s)) return trace_frame_memory(s, m);
  std::vector<uint8_t> buffer(std::min(m.length, kMaxMemoryRead));
  auto n = p->read_memory(m.addr, buffer);
  // Older GDBs read a failed m reply as a numeric code only (E.text once error-message+).
  if (!n) return error_reply(n.error(), ErrorForm::Code);
  if (*n == 0 && !buffer.empty()) return error_reply(EIO, "Cannot access memory.", ErrorForm::Code);
  buffer.resize(*n);
  if (m.binary) return reply::BinaryMemory{std::move(buffer)};
  return reply::Hex{std::move(buffer)};
}

Reply handle(Session& s, const WriteMemory& w) {
  auto* p = s.process();
  if (!p) return no_process();
  if (selected_trace_frame(s)) return error_reply(EROFS, "Cannot change a trace frame.");
  if (w.data.empty()) return reply::Ok{};  // GDB's "X addr,0:" probe
  auto n = p->write_memory(w.addr, w.data);
  if (!n) return error_reply(n.error());
  if (*n != w.data.size()) return error_reply(EIO, fmt::format("Cannot write memory at {:#x}.", w.addr + *n));
  return reply::Ok{};
}

}  // namespace server
