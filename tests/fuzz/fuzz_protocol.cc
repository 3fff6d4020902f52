// libFuzzer entry: hostile bytes through the framer (in random chunks), every packet through
// the parser, and the parsed fields back out through the reply formatters. Also checks the
// codec round-trip invariants; a violation aborts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>

#include "protocol/btrace_xml.h"
#include "protocol/framing.h"
#include "protocol/hex.h"
#include "protocol/packets.h"
#include "protocol/qsupported.h"
#include "protocol/replies.h"
#include "protocol/signals.h"
#include "protocol/xml.h"

using namespace protocol;

namespace {

void require(bool ok) {
  if (!ok) abort();
}

// Codec invariants on an arbitrary byte string.
void check_codecs(std::string_view s) {
  require(from_hex_string(to_hex(s)) == std::string(s));
  std::string escaped = escape_binary(s);
  require(unescape_binary(escaped) == s);
  std::string rle = rle_compress(escaped);
  require(rle.find('#') == std::string::npos && rle.find('$') == std::string::npos);
  require(rle_expand(rle) == escaped);
  (void)rle_expand(s);  // arbitrary input must not crash

  // A packet made of escaped bytes comes back out of a framer unchanged.
  Framer f(2 * s.size() + 16);
  f.set_no_ack(false);
  auto ev = f.feed(Framer::encode(escaped, false));
  require(ev.size() == 1 && ev[0].kind == Framer::Event::Kind::Packet && ev[0].payload == s);
}

// Formats something from every parsed request, so formatters see hostile field values.
struct Formatter {
  Dialect dialect;
  std::string sink;

  void operator()(const QuerySupported& q) {
    dialect = negotiate(q);
    sink += format_qsupported(Capabilities::all(), dialect);
  }
  void operator()(const SetThread& h) {
    sink += format_thread_id(h.thread.pid.value_or(1), h.thread.tid, dialect.multiprocess);
    auto back = parse_thread_id(format_thread_id(h.thread.pid.value_or(1), h.thread.tid, true));
    require(back && back->tid == h.thread.tid);
  }
  void operator()(const ReadMemory& m) {
    sink += xfer_chunk(sink, m.addr, m.length);
    sink = sink.substr(0, 4096);
  }
  void operator()(const XferRead& x) {
    std::vector<ThreadEntry> threads{{1, 2, 3, x.annex}};
    std::string doc = threads_xml(threads, true) + libraries_svr4_xml({{x.object, x.offset, x.length, 0}}, x.offset);
    doc += btrace_xml({{x.offset, x.length}}) + btrace_conf_xml(x.offset, x.length);
    sink = xfer_chunk(doc, x.offset, x.length);
  }
  void operator()(const XferWrite& w) {
    std::string data(w.data.begin(), w.data.end());
    sink = osdata_xml(w.annex, {{{w.object, data}, {data, w.annex}}});
  }
  void operator()(const SetPassSignals& q) { sink = std::to_string(host_signals_listed(q.gdb_signals).size()); }
  void operator()(const VCont& v) {
    for (const auto& a : v.actions) {
      int host = gdb_to_host_signal(a.gdb_signal);
      StopReply s;
      s.gdb_signal = host_to_gdb_signal(host);
      s.reason = static_cast<StopReason>(a.gdb_signal % 13);
      s.pid = a.thread ? a.thread->pid.value_or(0) : 0;
      s.tid = a.thread ? a.thread->tid : 0;
      s.watch_addr = a.range_start;
      s.all_tids = {s.tid};
      s.all_pcs = {a.range_end};
      dialect.lldb = a.gdb_signal & 1;
      dialect.list_threads_in_stop = true;
      sink = format_stop_reply(s, dialect);
      sink += format_exit_reply({s.pid, a.gdb_signal, (a.gdb_signal & 2) != 0, a.gdb_signal}, dialect);
    }
  }
  void operator()(const WriteMemory& w) {
    StopReply s;
    s.registers.push_back({static_cast<int>(w.addr & 0xff), w.data});
    s.exec_path.assign(w.data.begin(), w.data.end());
    s.reason = StopReason::Exec;
    s.thread_name = s.exec_path;
    dialect.lldb = true;
    sink = format_stop_reply(s, dialect);
  }
  void operator()(const Monitor& m) {
    sink = console_output(m.command) + error_reply(dialect, static_cast<int>(m.command.size()), m.command);
  }
  // Conditions and commands survive a round trip through GDB's encoding.
  void operator()(const InsertBreakpoint& z) {
    auto exprs = [](const std::vector<std::vector<uint8_t>>& list) {
      std::string s;
      for (const auto& b : list) s += "X" + hex_u64(b.size()) + "," + to_hex(b);
      return s;
    };
    std::string again = "Z" + std::to_string(static_cast<int>(z.type)) + "," + hex_u64(z.addr) + "," + hex_u64(z.kind);
    if (!z.conditions.empty()) again += ";" + exprs(z.conditions);
    if (z.commands) again += std::string(";cmds:") + (z.commands->persist ? "1," : "0,") + exprs(z.commands->bytecodes);
    Request r = parse_request(again);
    require(std::holds_alternative<InsertBreakpoint>(r));
    const auto& back = std::get<InsertBreakpoint>(r);
    require(back.type == z.type && back.addr == z.addr && back.kind == z.kind);
    require(back.conditions == z.conditions);
    require(back.commands.has_value() == z.commands.has_value());
    if (z.commands) require(back.commands->persist == z.commands->persist && back.commands->bytecodes == z.commands->bytecodes);
    sink = again.substr(0, 4096);
  }
  void operator()(const Malformed& m) { sink = error_reply(dialect, EINVAL, m.what); }
  template <typename T>
  void operator()(const T&) {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte: chunking seed and no-ack choice; the rest is the stream.
  uint8_t seed = data[0];
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  check_codecs(stream.substr(0, 512));

  Framer framer(seed & 0x80 ? 64 : Framer::kDefaultMaxPacket);
  framer.set_no_ack(seed & 1);
  Formatter fmt;
  size_t pos = 0;
  unsigned chunk = (seed >> 1) % 17 + 1;
  while (pos < stream.size()) {
    size_t n = std::min<size_t>(chunk, stream.size() - pos);
    for (auto& ev : framer.feed(stream.substr(pos, n))) {
      if (ev.kind == Framer::Event::Kind::Packet) {
        Request r = parse_request(ev.payload);
        std::visit(fmt, r);
        (void)Framer::encode(fmt.sink);
        if (ev.payload.starts_with("QStartNoAckMode")) framer.set_no_ack(true);
      }
    }
    pos += n;
    chunk = chunk * 7 % 23 + 1;  // vary the chunk size deterministically
  }
  // Also parse the raw stream as one payload.
  Request whole = parse_request(stream);
  std::visit(fmt, whole);
  return 0;
}
