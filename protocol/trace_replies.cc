#include "protocol/trace_replies.h"

#include <fmt/format.h>

#include "protocol/hex.h"

namespace protocol::reply {

namespace {

std::string hex_text(const std::string& s) {
  return to_hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

}  // namespace

std::string encode(const TraceStatus& s) {
  std::string reason;
  switch (s.reason) {
    case TraceStatus::Reason::NotRun: reason = "tnotrun"; break;
    case TraceStatus::Reason::Running: reason = "tunknown"; break;
    case TraceStatus::Reason::Stopped: reason = "tstop:" + hex_text(s.stop_text); break;
    case TraceStatus::Reason::PassCount: reason = "tpasscount"; break;
    case TraceStatus::Reason::BufferFull: reason = "tfull"; break;
    case TraceStatus::Reason::Disconnected: reason = "tdisconnected"; break;
    case TraceStatus::Reason::Error: reason = "terror:" + hex_text(s.stop_text); break;
  }
  return fmt::format(
      "T{};{}:{:x};tframes:{:x};tcreated:{:x};tfree:{:x};tsize:{:x};circular:{};disconn:{};"
      "starttime:{:x};stoptime:{:x};username:{};notes:{}:",
      s.running ? 1 : 0, reason, s.stop_tracepoint, s.frames, s.created, s.free, s.size, s.circular ? 1 : 0,
      s.disconnected ? 1 : 0, s.start_usec, s.stop_usec, hex_text(s.user), hex_text(s.notes));
}

std::string encode(const TracepointHits& h) { return fmt::format("V{:x}:{:x}", h.hits, h.bytes); }

std::string encode(const TraceVariableValue& v) {
  if (!v.value) return "U";
  return fmt::format("V{:x}", static_cast<uint64_t>(*v.value));
}

std::string encode(const TraceFrameFound& f) {
  if (!f.frame) return "F-1";
  return fmt::format("F{:x}T{:x}", *f.frame, f.tracepoint);
}

std::string encode(const TraceUpload& u) { return u.line ? *u.line : "l"; }

std::string encode(const TraceBufferData& d) {
  if (d.bytes.empty()) return "l";
  return to_hex(d.bytes);
}

}  // namespace protocol::reply

namespace protocol {

std::vector<std::string> tracepoint_upload_lines(const TracepointUpload& tp) {
  std::vector<std::string> out;
  std::string head = fmt::format("T{:x}:{:x}:{}:{:x}:{:x}", tp.number, tp.addr, tp.enabled ? 'E' : 'D',
                                 tp.step_count, tp.pass_count);
  if (tp.fast_size) head += fmt::format(":F{:x}", *tp.fast_size);
  if (tp.is_static) head += ":S";
  if (!tp.condition.empty()) head += fmt::format(":X{:x},{}", tp.condition.size(), to_hex(tp.condition));
  out.push_back(std::move(head));
  for (const auto& a : tp.actions) out.push_back(fmt::format("A{:x}:{:x}:{}", tp.number, tp.addr, a));
  for (const auto& a : tp.step_actions) out.push_back(fmt::format("S{:x}:{:x}:{}", tp.number, tp.addr, a));
  for (const auto& s : tp.sources) out.push_back(fmt::format("Z{:x}:{:x}:{}", tp.number, tp.addr, s));
  return out;
}

std::string variable_upload_line(uint32_t number, int64_t initial, bool builtin, const std::string& name) {
  return fmt::format("{:x}:{:x}:{}:{}", number, static_cast<uint64_t>(initial), builtin ? 1 : 0,
                     to_hex(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(name.data()), name.size())));
}

std::string traceframe_info_xml(const TraceframeInfo& info) {
  std::string out = "<traceframe-info>\n";
  for (const auto& [start, len] : info.memory)
    out += fmt::format("<memory start=\"0x{:x}\" length=\"0x{:x}\"/>\n", start, len);
  for (uint32_t v : info.variables) out += fmt::format("<tvar id=\"{}\"/>\n", v);
  return out + "</traceframe-info>\n";
}

}  // namespace protocol
