// Parsers and table rows of the tracepoint packets (GDB remote.c's download_tracepoint and
// friends; gdbserver tracepoint.cc reads them).
#include "protocol/packets/tracepoints.h"

#include <cctype>
#include <string>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

// The hex digits at s[pos], as a number; advances pos. nullopt: none, or too long.
std::optional<uint64_t> hex_at(string_view s, size_t& pos) {
  size_t start = pos;
  while (pos < s.size() && is_hex(s[pos])) ++pos;
  return parse_hex_u64(s.substr(start, pos - start));
}

// "<n>:<addr>" at the start of s, n a 32-bit tracepoint number.
bool number_addr(string_view s, size_t& pos, uint32_t& number, uint64_t& addr) {
  auto n = hex_at(s, pos);
  if (!n || *n > 0xffffffffu || pos >= s.size() || s[pos] != ':') return false;
  ++pos;
  auto a = hex_at(s, pos);
  if (!a) return false;
  number = static_cast<uint32_t>(*n);
  addr = *a;
  return true;
}

// QTDP:-<n>:<addr>:<actions>[-]
Request p_actions(string_view s) {
  TraceDefineActions d;
  size_t pos = 0;
  if (!number_addr(s, pos, d.number, d.addr) || pos >= s.size() || s[pos] != ':')
    return malformed("QTDP: bad tracepoint number or address");
  ++pos;
  if (!s.empty() && s.back() == '-') {
    d.more = true;
    s.remove_suffix(1);
  }
  bool stepping = false;
  while (pos < s.size()) {
    TraceActionSpec a;
    char c = s[pos];
    if (c == 'S') {
      stepping = true;
      ++pos;
      continue;
    }
    a.stepping = stepping;
    size_t start = pos;
    if (c == 'R') {
      ++pos;
      size_t from = pos;
      while (pos < s.size() && is_hex(s[pos])) ++pos;
      string_view digits = s.substr(from, pos - from);
      if (digits.empty()) return malformed("QTDP: R without a mask");
      std::string even = digits.size() % 2 ? "0" + std::string(digits) : std::string(digits);
      auto mask = from_hex(even);
      if (!mask) return malformed("QTDP: bad register mask");
      a.kind = TraceActionSpec::Kind::Registers;
      a.mask = std::move(*mask);
    } else if (c == 'M') {
      ++pos;
      bool negative = pos < s.size() && s[pos] == '-';
      if (negative) ++pos;
      auto reg = hex_at(s, pos);
      if (!reg || *reg > 0xffff || pos >= s.size() || s[pos] != ',') return malformed("QTDP: bad M base register");
      ++pos;
      auto offset = hex_at(s, pos);
      if (!offset || pos >= s.size() || s[pos] != ',') return malformed("QTDP: bad M offset");
      ++pos;
      auto len = hex_at(s, pos);
      if (!len) return malformed("QTDP: bad M length");
      a.kind = TraceActionSpec::Kind::Memory;
      a.basereg = negative ? -static_cast<int>(*reg) : static_cast<int>(*reg);
      a.offset = *offset;
      a.len = *len;
    } else if (c == 'X') {
      auto bytes = agent_expr_at(s, pos);
      if (!bytes) return malformed("QTDP: bad X expression");
      a.kind = TraceActionSpec::Kind::Expression;
      a.bytecode = std::move(*bytes);
    } else {
      return malformed(std::string("QTDP: unknown action '") + c + "'");
    }
    a.text = std::string(s.substr(start, pos - start));
    d.actions.push_back(std::move(a));
  }
  return d;
}

// QTDP:<n>:<addr>:<E|D>:<step>:<pass>[:F<size>][:S][:X<len>,<cond>][-], or an actions packet.
Request p_define(string_view s) {
  if (!s.empty() && s[0] == '-') return p_actions(s.substr(1));
  TraceDefine d;
  size_t pos = 0;
  if (!number_addr(s, pos, d.number, d.addr)) return malformed("QTDP: bad tracepoint number or address");
  if (!s.empty() && s.back() == '-') {
    d.more = true;
    s.remove_suffix(1);
  }
  if (pos + 2 > s.size() || s[pos] != ':' || (s[pos + 1] != 'E' && s[pos + 1] != 'D'))
    return malformed("QTDP: expected :E or :D");
  d.enabled = s[pos + 1] == 'E';
  pos += 2;
  if (pos >= s.size() || s[pos] != ':') return malformed("QTDP: no step count");
  ++pos;
  auto step = hex_at(s, pos);
  if (!step || pos >= s.size() || s[pos] != ':') return malformed("QTDP: bad step count");
  ++pos;
  auto pass = hex_at(s, pos);
  if (!pass) return malformed("QTDP: bad pass count");
  d.step_count = *step;
  d.pass_count = *pass;
  while (pos < s.size()) {
    if (s[pos] != ':') return malformed("QTDP: junk after the pass count");
    ++pos;
    if (pos >= s.size()) return malformed("QTDP: empty option");
    if (s[pos] == 'F') {
      ++pos;
      auto size = hex_at(s, pos);
      if (!size) return malformed("QTDP: bad fast tracepoint size");
      d.fast_size = *size;
    } else if (s[pos] == 'S') {
      ++pos;
      d.is_static = true;
    } else if (s[pos] == 'X') {
      auto cond = agent_expr_at(s, pos);
      if (!cond) return malformed("QTDP: bad condition");
      d.condition = std::move(*cond);
    } else {
      return malformed("QTDP: unknown option");
    }
  }
  return d;
}

// QTDPsrc:<n>:<addr>:<type>:<start>:<len>:<hex>
Request p_source(string_view s) {
  TraceDefineSource d;
  size_t pos = 0;
  if (!number_addr(s, pos, d.number, d.addr) || pos >= s.size() || s[pos] != ':')
    return malformed("QTDPsrc: bad tracepoint number or address");
  auto parts = split(s.substr(pos + 1), ':');
  if (parts.size() != 4 || parts[0].empty() || !parse_hex_u64(parts[1]) || !parse_hex_u64(parts[2]) ||
      !from_hex(parts[3]))
    return malformed("QTDPsrc: expected type:start:len:hex");
  d.raw = std::string(s.substr(pos + 1));
  return d;
}

// QTDV:<n>:<value>:<builtin>:<hex name>
Request p_variable(string_view s) {
  auto parts = split(s, ':');
  if (parts.size() != 4) return malformed("QTDV: expected n:value:builtin:name");
  auto n = parse_hex_u64(parts[0]);
  auto v = parse_hex_u64(parts[1]);
  auto b = parse_hex_u64(parts[2]);
  auto name = from_hex_string(parts[3]);
  if (!n || *n > 0xffffffffu || !v || !b || !name) return malformed("QTDV: bad field");
  return TraceDefineVariable{static_cast<uint32_t>(*n), static_cast<int64_t>(*v), *b != 0, *name};
}

// QTro:<start>,<end>[:<start>,<end>...]
Request p_read_only(string_view s) {
  TraceReadOnlyRegions r;
  if (s.empty()) return r;
  for (string_view part : split(s, ':')) {
    auto range = addr_len(part);
    if (!range) return malformed("QTro: expected start,end");
    r.ranges.push_back(*range);
  }
  return r;
}

Request p_tp_status(string_view s) {
  TracepointStatusQuery q;
  size_t pos = 0;
  if (!number_addr(s, pos, q.number, q.addr) || pos != s.size()) return malformed("qTP: expected n:addr");
  return q;
}

Request p_variable_query(string_view s) {
  auto n = parse_hex_u64(s);
  if (!n || *n > 0xffffffffu) return malformed("qTV: bad variable number");
  return TraceVariableQuery{static_cast<uint32_t>(*n)};
}

// QTFrame:<n> | pc:<addr> | tdp:<n> | range:<a>:<b> | outside:<a>:<b>
Request p_frame(string_view s) {
  TraceFrameSelect f;
  auto two = [&](string_view rest, TraceFrameSelect::Kind kind) -> Request {
    auto parts = split(rest, ':');
    auto a = parts.size() == 2 ? parse_hex_u64(parts[0]) : std::nullopt;
    auto b = parts.size() == 2 ? parse_hex_u64(parts[1]) : std::nullopt;
    if (!a || !b) return malformed("QTFrame: expected start:end");
    f.kind = kind;
    f.a = *a;
    f.b = *b;
    return f;
  };
  if (starts_with(s, "pc:") || starts_with(s, "tdp:")) {
    bool pc = s[0] == 'p';
    auto v = parse_hex_u64(s.substr(pc ? 3 : 4));
    if (!v) return malformed("QTFrame: bad value");
    f.kind = pc ? TraceFrameSelect::Kind::Pc : TraceFrameSelect::Kind::Tracepoint;
    f.a = *v;
    return f;
  }
  if (starts_with(s, "range:")) return two(s.substr(6), TraceFrameSelect::Kind::Range);
  if (starts_with(s, "outside:")) return two(s.substr(8), TraceFrameSelect::Kind::Outside);
  bool negative = starts_with(s, "-");
  auto n = parse_hex_u64(negative ? s.substr(1) : s);
  if (!n) return malformed("QTFrame: bad frame number");
  // GDB sends -1 as "ffffffff" (a 32-bit int in hex).
  if (negative || *n == 0xffffffffu || *n > 0x7fffffffu) f.number = -1;
  else f.number = static_cast<int64_t>(*n);
  return f;
}

// QTBuffer:circular:<0|1> | QTBuffer:size:<n|-1>
Request p_buffer(string_view s) {
  if (starts_with(s, "circular:")) {
    auto on = hex_bool(s.substr(9));
    if (!on) return malformed("QTBuffer:circular: bad value");
    return TraceBufferCircular{*on};
  }
  if (starts_with(s, "size:")) {
    string_view v = s.substr(5);
    if (v == "-1") return TraceBufferSize{};
    auto n = parse_hex_u64(v);
    if (!n) return malformed("QTBuffer:size: bad value");
    return TraceBufferSize{*n};
  }
  return malformed("QTBuffer: expected circular: or size:");
}

// QTNotes:user:<hex>;notes:<hex>;tstop:<hex>;
Request p_notes(string_view s) {
  TraceNotes n;
  for (string_view part : split(s, ';')) {
    if (part.empty()) continue;
    size_t colon = part.find(':');
    if (colon == string_view::npos) return malformed("QTNotes: expected name:hex");
    string_view name = part.substr(0, colon);
    auto text = from_hex_string(part.substr(colon + 1));
    if (!text) return malformed("QTNotes: bad hex");
    if (name == "user") n.user = *text;
    else if (name == "notes") n.notes = *text;
    else if (name == "tstop") n.tstop = *text;
  }
  return n;
}

Request p_buffer_read(string_view s) {
  auto r = addr_len(s);
  if (!r) return malformed("qTBuffer: expected offset,len");
  return TraceBufferRead{r->first, r->second};
}

Request p_enable(string_view s, bool enable) {
  TraceEnable e;
  e.enable = enable;
  size_t pos = 0;
  if (!number_addr(s, pos, e.number, e.addr) || pos != s.size()) return malformed("QTEnable/QTDisable: expected n:addr");
  return e;
}

constexpr PacketRow kRows[] = {
    {"QTinit", true, make<TraceInit>, Capability::Tracepoints},
    {"QTDPsrc:", false, p_source, Capability::Tracepoints},
    {"QTDP:", false, p_define, Capability::Tracepoints},
    {"QTDV:", false, p_variable, Capability::Tracepoints},
    {"QTro", false, [](string_view a) { return a.empty() ? p_read_only(a) : a[0] == ':' ? p_read_only(a.substr(1)) : malformed("QTro: expected ':'"); }, Capability::Tracepoints},
    {"QTStart", true, make<TraceStart>, Capability::Tracepoints},
    {"QTStop", true, make<TraceStop>, Capability::Tracepoints},
    {"qTStatus", true, make<TraceStatusQuery>, Capability::Tracepoints},
    {"qTP:", false, p_tp_status, Capability::Tracepoints},
    {"qTV:", false, p_variable_query, Capability::Tracepoints},
    {"QTFrame:", false, p_frame, Capability::Tracepoints},
    {"QTBuffer:", false, p_buffer, Capability::Tracepoints},
    {"QTDisconnected:", false, [](string_view a) -> Request {
       auto on = hex_bool(a);
       if (!on) return malformed("QTDisconnected: bad value");
       return TraceDisconnected{*on};
     }, Capability::Tracepoints},
    {"QTNotes:", false, p_notes, Capability::Tracepoints},
    {"qTfP", true, [](string_view) -> Request { return TraceUploadPoints{true}; }, Capability::Tracepoints},
    {"qTsP", true, [](string_view) -> Request { return TraceUploadPoints{false}; }, Capability::Tracepoints},
    {"qTfV", true, [](string_view) -> Request { return TraceUploadVariables{true}; }, Capability::Tracepoints},
    {"qTsV", true, [](string_view) -> Request { return TraceUploadVariables{false}; }, Capability::Tracepoints},
    {"qTBuffer:", false, p_buffer_read, Capability::Tracepoints},
    {"QTEnable:", false, [](string_view a) { return p_enable(a, true); }, Capability::Tracepoints},
    {"QTDisable:", false, [](string_view a) { return p_enable(a, false); }, Capability::Tracepoints},
    {"qTMinFTPILen", true, make<TraceMinFastInsnLen>, Capability::Tracepoints},
};

}  // namespace

std::span<const PacketRow> tracepoints_rows() { return kRows; }

}  // namespace protocol
