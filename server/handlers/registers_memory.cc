// g/G/p/P and m/M/x/X.
#include <algorithm>

#include <fmt/format.h>

#include "protocol/hex.h"
#include "server/handlers/handlers.h"

namespace server {

namespace {

constexpr uint64_t kMaxMemoryRead = 0x40000;  // more than any client asks at once; bounds allocation

std::string register_hex(const backend::RegisterFile& regs, const backend::RegisterInfo& info) {
  size_t size = static_cast<size_t>(info.bitsize / 8);
  if (info.regnum < static_cast<int>(regs.valid.size()) && !regs.valid[info.regnum]) return std::string(size * 2, 'x');
  return to_hex(std::span<const uint8_t>(regs.bytes.data() + info.offset, size));
}

}  // namespace

Reply handle(Session& s, const ReadRegisters& r) {
  auto* p = s.process();
  if (!p) return no_process(s);
  auto regs = p->read_registers(s.thread_for(r.thread_suffix));
  if (!regs) return error_reply(s, regs.error());
  std::string out;
  out.reserve(regs->bytes.size() * 2);
  for (const auto& info : p->register_layout().regs) out += register_hex(*regs, info);
  return out;
}

Reply handle(Session& s, const WriteRegisters& w) {
  auto* p = s.process();
  if (!p) return no_process(s);
  pid_t tid = s.thread_for(w.thread_suffix);
  auto regs = p->read_registers(tid);
  if (!regs) return error_reply(s, regs.error());
  size_t n = std::min(w.data.size(), regs->bytes.size());
  std::copy_n(w.data.begin(), n, regs->bytes.begin());
  if (auto r = p->write_registers(tid, *regs); !r) return error_reply(s, r.error());
  return ok();
}

Reply handle(Session& s, const ReadRegister& r) {
  auto* p = s.process();
  if (!p) return no_process(s);
  const auto& layout = p->register_layout();
  if (r.regno < 0 || r.regno >= static_cast<int>(layout.regs.size())) return error_reply(s, EINVAL, "No such register.");
  // LLDB reads registers one `p` at a time: fetch only the set the register is in.
  auto set = backend::is_general_register(r.regno) ? backend::RegisterSet::General : backend::RegisterSet::All;
  auto regs = p->read_registers(s.thread_for(r.thread_suffix), set);
  if (!regs) return error_reply(s, regs.error());
  return register_hex(*regs, layout.regs[r.regno]);
}

Reply handle(Session& s, const WriteRegister& w) {
  auto* p = s.process();
  if (!p) return no_process(s);
  const auto& layout = p->register_layout();
  if (w.regno < 0 || w.regno >= static_cast<int>(layout.regs.size())) return error_reply(s, EINVAL, "No such register.");
  const auto& info = layout.regs[w.regno];
  if (w.value.size() != static_cast<size_t>(info.bitsize / 8)) return error_reply(s, EINVAL, "Wrong register size.");
  pid_t tid = s.thread_for(w.thread_suffix);
  auto regs = p->read_registers(tid);
  if (!regs) return error_reply(s, regs.error());
  std::copy(w.value.begin(), w.value.end(), regs->bytes.begin() + static_cast<long>(info.offset));
  if (info.regnum < static_cast<int>(regs->valid.size())) regs->valid[info.regnum] = true;
  if (auto r = p->write_registers(tid, *regs); !r) return error_reply(s, r.error());
  return ok();
}

Reply handle(Session& s, const ReadMemory& m) {
  auto* p = s.process();
  if (m.binary && m.length == 0) return ok();  // LLDB's "x0,0" probe: binary reads work
  if (!p) return no_process(s);
  std::vector<uint8_t> buffer(std::min(m.length, kMaxMemoryRead));
  auto n = p->read_memory(m.addr, buffer);
  // GDB reads a failed m/x reply as a numeric code only.
  if (!n) return error_reply(s, n.error(), ErrorForm::Code);
  if (*n == 0 && !buffer.empty()) return error_reply(s, EIO, "Cannot access memory.", ErrorForm::Code);
  std::span<const uint8_t> data(buffer.data(), *n);
  return m.binary ? escape_binary(data) : to_hex(data);
}

Reply handle(Session& s, const WriteMemory& w) {
  auto* p = s.process();
  if (!p) return no_process(s);
  if (w.data.empty()) return ok();  // GDB's "X addr,0:" probe
  auto n = p->write_memory(w.addr, w.data);
  if (!n) return error_reply(s, n.error());
  if (*n != w.data.size()) return error_reply(s, EIO, fmt::format("Cannot write memory at {:#x}.", w.addr + *n));
  return ok();
}

}  // namespace server
