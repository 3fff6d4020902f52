// Packet parsing: a declarative table of (name, exact or prefix, parser). Adding a packet is
// one struct in packets.h, one row here and one small parse function.
#include "protocol/packets.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <climits>
#include <string_view>

#include "protocol/hex.h"

namespace protocol {
namespace {

using std::string_view;

// ---- small helpers (all bounded by the input size) ----

bool starts_with(string_view s, string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

std::vector<string_view> split(string_view s, char sep) {
  std::vector<string_view> parts;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == string_view::npos ? string_view::npos : pos - start));
    if (pos == string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

// Non-negative hex number that fits an int.
std::optional<int> hex_int(string_view s) {
  auto v = parse_hex_u64(s);
  if (!v || *v > static_cast<uint64_t>(INT_MAX)) return std::nullopt;
  return static_cast<int>(*v);
}

// "0"/"1" style boolean switches (any non-zero hex is on).
std::optional<bool> hex_bool(string_view s) {
  auto v = parse_hex_u64(s);
  if (!v) return std::nullopt;
  return *v != 0;
}

// "addr,len" with both hex.
std::optional<std::pair<uint64_t, uint64_t>> addr_len(string_view s) {
  auto comma = s.find(',');
  if (comma == string_view::npos) return std::nullopt;
  auto a = parse_hex_u64(s.substr(0, comma));
  auto l = parse_hex_u64(s.substr(comma + 1));
  if (!a || !l) return std::nullopt;
  return std::make_pair(*a, *l);
}

Request malformed(string_view what) { return Malformed{std::string(what)}; }

// Strips LLDB's ";thread:<tid>;" suffix (QThreadSuffixSupported). Returns false when a
// suffix is present but unreadable.
bool strip_thread_suffix(string_view& args, std::optional<int>& thread) {
  auto pos = args.find(";thread:");
  if (pos == string_view::npos) return true;
  string_view id = args.substr(pos + 8);
  if (!id.empty() && id.back() == ';') id.remove_suffix(1);
  args = args.substr(0, pos);
  auto tid = parse_thread_id(id);
  if (!tid || tid->tid <= 0) return false;
  thread = tid->tid;
  return true;
}

// List of hex numbers separated by ';' (a trailing ';' and an empty list are allowed).
std::optional<std::vector<int>> hex_list(string_view s) {
  std::vector<int> out;
  if (s.empty()) return out;
  for (string_view item : split(s, ';')) {
    if (item.empty()) continue;
    auto v = hex_int(item);
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

// ---- parsers: each gets the text after the matched name ----

Request p_qsupported(string_view args) {
  QuerySupported q;
  if (args.empty()) return q;
  if (args[0] != ':') return Unknown{"qSupported" + std::string(args)};
  for (string_view f : split(args.substr(1), ';'))
    if (!f.empty()) q.features.emplace_back(f);
  return q;
}

Request p_set_thread(string_view args) {
  if (args.empty() || (args[0] != 'g' && args[0] != 'c')) return malformed("H: bad operation");
  auto id = parse_thread_id(args.substr(1));
  if (!id) return malformed("H: bad thread id");
  return SetThread{args[0], *id};
}

Request p_thread_alive(string_view args) {
  auto id = parse_thread_id(args);
  if (!id) return malformed("T: bad thread id");
  return ThreadAlive{*id};
}

Request p_attached(string_view args) {
  if (args.empty()) return QueryAttached{};
  if (args[0] != ':') return malformed("qAttached: bad argument");
  auto pid = hex_int(args.substr(1));
  if (!pid) return malformed("qAttached: bad pid");
  return QueryAttached{*pid};
}

Request p_signals(string_view args, bool pass) {
  auto list = hex_list(args);
  if (!list) return malformed(pass ? "QPassSignals: bad list" : "QProgramSignals: bad list");
  if (pass) return SetPassSignals{std::move(*list)};
  return SetProgramSignals{std::move(*list)};
}

template <typename T>
Request p_switch(string_view args, const char* what) {
  auto on = hex_bool(args);
  if (!on) return malformed(what);
  T t;
  t.on = *on;
  return t;
}

Request p_env_set(string_view args) {
  auto text = from_hex_string(args);
  if (!text) return malformed("QEnvironmentHexEncoded: bad hex");
  return SetEnvironment{std::move(*text)};
}

Request p_env_unset(string_view args) {
  auto text = from_hex_string(args);
  if (!text) return malformed("QEnvironmentUnset: bad hex");
  return UnsetEnvironment{std::move(*text)};
}

Request p_workdir(string_view args) {
  auto text = from_hex_string(args);
  if (!text) return malformed("QSetWorkingDir: bad hex");
  return SetWorkingDir{std::move(*text)};
}

Request p_catch_syscalls(string_view args) {
  auto parts = split(args, ';');
  auto on = hex_bool(parts[0]);
  if (!on) return malformed("QCatchSyscalls: bad switch");
  SetCatchSyscalls c;
  c.on = *on;
  if (parts.size() > 1) {
    auto list = hex_list(args.substr(parts[0].size() + 1));
    if (!list) return malformed("QCatchSyscalls: bad list");
    c.syscalls = std::move(*list);
  }
  if (!c.on && !c.syscalls.empty()) return malformed("QCatchSyscalls: list with 0");
  return c;
}

Request p_rcmd(string_view args) {
  auto text = from_hex_string(args);
  if (!text) return malformed("qRcmd: bad hex");
  return Monitor{std::move(*text)};
}

// <thread>,<offset>,<lm>: exactly three fields, as gdbserver's parser wants them.
Request p_tls_address(string_view args) {
  auto parts = split(args, ',');
  if (parts.size() != 3) return malformed("qGetTLSAddr: expected thread,offset,lm");
  auto id = parse_thread_id(parts[0]);
  auto offset = parse_hex_u64(parts[1]);
  auto lm = parse_hex_u64(parts[2]);
  if (!id || !offset || !lm) return malformed("qGetTLSAddr: bad thread, offset or lm");
  return GetTlsAddress{*id, *offset, *lm};
}

Request p_read_registers(string_view args) {
  ReadRegisters r;
  if (!strip_thread_suffix(args, r.thread_suffix)) return malformed("g: bad thread suffix");
  if (!args.empty()) return malformed("g: unexpected argument");
  return r;
}

Request p_write_registers(string_view args) {
  WriteRegisters w;
  if (!strip_thread_suffix(args, w.thread_suffix)) return malformed("G: bad thread suffix");
  auto data = from_hex(args);
  if (!data) return malformed("G: bad hex");
  w.data = std::move(*data);
  return w;
}

Request p_read_register(string_view args) {
  ReadRegister r;
  if (!strip_thread_suffix(args, r.thread_suffix)) return malformed("p: bad thread suffix");
  auto n = hex_int(args);
  if (!n) return malformed("p: bad register number");
  r.regno = *n;
  return r;
}

Request p_write_register(string_view args) {
  WriteRegister w;
  if (!strip_thread_suffix(args, w.thread_suffix)) return malformed("P: bad thread suffix");
  auto eq = args.find('=');
  if (eq == string_view::npos) return malformed("P: missing '='");
  auto n = hex_int(args.substr(0, eq));
  auto value = from_hex(args.substr(eq + 1));
  if (!n || !value) return malformed("P: bad register or value");
  w.regno = *n;
  w.value = std::move(*value);
  return w;
}

Request p_read_memory(string_view args, bool binary) {
  auto al = addr_len(args);
  if (!al) return malformed(binary ? "x: bad addr,len" : "m: bad addr,len");
  return ReadMemory{al->first, al->second, binary};
}

Request p_write_memory(string_view args, bool binary) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return malformed("M/X: missing ':'");
  auto al = addr_len(args.substr(0, colon));
  if (!al) return malformed("M/X: bad addr,len");
  string_view data = args.substr(colon + 1);
  WriteMemory w{al->first, {}};
  if (binary) {
    w.data.assign(data.begin(), data.end());
  } else {
    auto bytes = from_hex(data);
    if (!bytes) return malformed("M: bad hex");
    w.data = std::move(*bytes);
  }
  // The length must describe the data exactly (it is never used to allocate).
  if (w.data.size() != al->second) return malformed("M/X: length does not match data");
  return w;
}

// One vCont action: c, Csig, s, Ssig, t, rSTART,END, each with an optional ":thread".
std::optional<ResumeAction> parse_action(string_view text) {
  ResumeAction a;
  auto colon = text.find(':');
  string_view verb = text.substr(0, colon);
  if (colon != string_view::npos) {
    auto id = parse_thread_id(text.substr(colon + 1));
    if (!id) return std::nullopt;
    a.thread = *id;
  }
  if (verb.empty()) return std::nullopt;
  char op = verb[0];
  string_view rest = verb.substr(1);
  switch (op) {
    case 'c':
    case 's':
    case 't':
      if (!rest.empty()) return std::nullopt;
      a.kind = op == 'c' ? ResumeKind::Continue : op == 's' ? ResumeKind::Step : ResumeKind::Stop;
      return a;
    case 'C':
    case 'S': {
      auto sig = hex_int(rest);
      if (!sig || *sig > 0xff) return std::nullopt;
      a.kind = op == 'C' ? ResumeKind::Continue : ResumeKind::Step;
      a.gdb_signal = *sig;
      return a;
    }
    case 'r': {
      auto range = addr_len(rest);
      if (!range) return std::nullopt;
      a.kind = ResumeKind::RangeStep;
      a.range_start = range->first;
      a.range_end = range->second;
      return a;
    }
    default:
      return std::nullopt;
  }
}

Request p_vcont(string_view args) {
  if (args == "?") return VContQuery{};
  if (args.empty() || args[0] != ';') return malformed("vCont: expected ';'");
  VCont v;
  for (string_view item : split(args.substr(1), ';')) {
    auto action = parse_action(item);
    if (!action) return malformed("vCont: bad action");
    v.actions.push_back(*action);
  }
  return v;
}

// c[addr], s[addr], Csig[;addr], Ssig[;addr].
Request p_legacy(char op, string_view args) {
  LegacyResume r;
  r.action.kind = (op == 'c' || op == 'C') ? ResumeKind::Continue : ResumeKind::Step;
  string_view addr = args;
  if (op == 'C' || op == 'S') {
    auto semi = args.find(';');
    auto sig = hex_int(args.substr(0, semi));
    if (!sig || *sig > 0xff) return malformed("C/S: bad signal");
    r.action.gdb_signal = *sig;
    addr = semi == string_view::npos ? string_view{} : args.substr(semi + 1);
  }
  if (!addr.empty()) {
    auto a = parse_hex_u64(addr);
    if (!a) return malformed("c/s: bad address");
    r.addr = *a;
  }
  return r;
}

Request p_stepbranch(string_view args) {
  if (args.empty()) return StepBranch{};
  if (args[0] != ':') return Unknown{"stepbranch" + std::string(args)};
  string_view n = args.substr(1);
  uint32_t count = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count, 10);
  if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || count == 0)
    return malformed("stepbranch: bad count");
  return StepBranch{count};
}

// <thread-id>,<N>[;bp:<addr>] (N decimal, like stepbranch:N; addr hex).
Request p_stepbranch_next(string_view args) {
  auto comma = args.find(',');
  if (comma == string_view::npos) return malformed("stepbranch-next: expected <thread-id>,<N>");
  auto id = parse_thread_id(args.substr(0, comma));
  if (!id || id->tid <= 0) return malformed("stepbranch-next: bad thread id");
  string_view n = args.substr(comma + 1);
  std::optional<uint64_t> lifted;
  if (auto semi = n.find(';'); semi != string_view::npos) {
    string_view field = n.substr(semi + 1);
    n = n.substr(0, semi);
    constexpr string_view kBp = "bp:";
    if (field.substr(0, kBp.size()) != kBp) return malformed("stepbranch-next: unknown field");
    string_view hex = field.substr(kBp.size());
    uint64_t addr = 0;
    auto [aend, aec] = std::from_chars(hex.data(), hex.data() + hex.size(), addr, 16);
    if (hex.empty() || aec != std::errc{} || aend != hex.data() + hex.size())
      return malformed("stepbranch-next: bad breakpoint address");
    lifted = addr;
  }
  uint32_t count = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count, 10);
  if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || count == 0)
    return malformed("stepbranch-next: bad count");
  return StepBranchNext{*id, count, lifted};
}

Request p_kill(string_view args) {
  auto pid = hex_int(args);
  if (!pid) return malformed("vKill: bad pid");
  return Kill{*pid};
}

Request p_detach(string_view args) {
  if (args.empty()) return Detach{};
  if (args[0] != ';') return malformed("D: bad argument");
  auto pid = hex_int(args.substr(1));
  if (!pid) return malformed("D: bad pid");
  return Detach{*pid};
}

Request p_vrun(string_view args) {
  VRun r;
  for (string_view item : split(args, ';')) {
    auto text = from_hex_string(item);
    if (!text) return malformed("vRun: bad hex");
    r.argv.push_back(std::move(*text));
  }
  return r;
}

Request p_vattach(string_view args) {
  auto pid = hex_int(args);
  if (!pid || *pid == 0) return malformed("vAttach: bad pid");
  return VAttach{*pid};
}

// One agent expression "X<len>,<hex bytes>" at s[pos]; advances pos past it. The length is
// checked against what is left of the packet before anything is allocated.
std::optional<std::vector<uint8_t>> agent_expr_at(string_view s, size_t& pos) {
  if (pos >= s.size() || s[pos] != 'X') return std::nullopt;
  size_t comma = s.find(',', pos + 1);
  if (comma == string_view::npos) return std::nullopt;
  auto len = parse_hex_u64(s.substr(pos + 1, comma - pos - 1));
  if (!len || *len > (s.size() - comma - 1) / 2) return std::nullopt;
  auto bytes = from_hex(s.substr(comma + 1, static_cast<size_t>(*len) * 2));
  if (!bytes) return std::nullopt;
  pos = comma + 1 + static_cast<size_t>(*len) * 2;
  return bytes;
}

// The options after "Z<type>,<addr>,<kind>;". GDB sends the conditions back to back
// ("X..X..") and the commands as one "cmds:<persist>,X..X.." token (remote.c); gdbserver
// (server.cc process_point_options) reads tokens separated by ';' and ignores unknown ones,
// as here. A malformed X or cmds token is an error.
std::optional<std::string> point_options(string_view s, InsertBreakpoint& z) {
  size_t pos = 0;
  auto at_token_end = [&] { return pos == s.size() || s[pos] == ';' || s[pos] == 'X'; };
  while (pos < s.size()) {
    if (s[pos] == ';') {
      ++pos;
    } else if (s[pos] == 'X') {
      auto bytes = agent_expr_at(s, pos);
      if (!bytes) return "Z: bad condition (X<len>,<hex>)";
      z.conditions.push_back(std::move(*bytes));
      if (!at_token_end()) return "Z: junk after a condition";
    } else if (starts_with(s.substr(pos), "cmds:")) {
      if (z.commands) return "Z: cmds given twice";
      pos += 5;
      if (s.size() - pos < 2 || (s[pos] != '0' && s[pos] != '1') || s[pos + 1] != ',')
        return "Z: bad cmds persistence (cmds:0, or cmds:1,)";
      InsertBreakpoint::Commands cmds;
      cmds.persist = s[pos] == '1';
      pos += 2;
      do {
        auto bytes = agent_expr_at(s, pos);
        if (!bytes) return "Z: bad command (X<len>,<hex>)";
        cmds.bytecodes.push_back(std::move(*bytes));
      } while (pos < s.size() && s[pos] == 'X');
      if (pos != s.size() && s[pos] != ';') return "Z: junk after the commands";
      z.commands = std::move(cmds);
    } else {
      size_t next = s.find(';', pos);
      pos = next == string_view::npos ? s.size() : next;
    }
  }
  return std::nullopt;
}

// Z/z type,addr,kind[;options]: z ignores anything after the ';' (GDB sends none).
Request p_breakpoint(string_view args, bool insert) {
  size_t semi = args.find(';');
  string_view head = args.substr(0, semi);
  auto parts = split(head, ',');
  if (parts.size() != 3) return malformed("Z/z: expected type,addr,kind");
  auto type = hex_int(parts[0]);
  if (!type) return malformed("Z/z: bad type");
  if (*type > 4) return Unknown{std::string(insert ? "Z" : "z") + std::string(head)};
  auto addr = parse_hex_u64(parts[1]);
  auto kind = parse_hex_u64(parts[2]);
  if (!addr || !kind) return malformed("Z/z: bad addr or kind");
  auto t = static_cast<BreakpointType>(*type);
  if (!insert) return RemoveBreakpoint{t, *addr, *kind};
  InsertBreakpoint z{t, *addr, *kind};
  if (semi != string_view::npos) {
    if (auto err = point_options(args.substr(semi + 1), z)) return malformed(*err);
  }
  return z;
}

// qXfer:<object>:read:<annex>:<offset>,<length>
// qXfer:<object>:write:<annex>:<offset>:<data>  (data is binary: it may hold ':' itself, so
// the annex of a write cannot, as in gdbserver's decode_xfer)
Request p_xfer(string_view args) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return malformed("qXfer: missing object");
  string_view object = args.substr(0, colon);
  string_view rest = args.substr(colon + 1);
  if (starts_with(rest, "write:")) {
    rest.remove_prefix(6);
    auto annex_end = rest.find(':');
    if (annex_end == string_view::npos) return malformed("qXfer: missing offset");
    string_view after_annex = rest.substr(annex_end + 1);
    auto offset_end = after_annex.find(':');
    if (offset_end == string_view::npos) return malformed("qXfer: missing data");
    auto offset = parse_hex_u64(after_annex.substr(0, offset_end));
    if (!offset) return malformed("qXfer: bad offset");
    string_view data = after_annex.substr(offset_end + 1);
    return XferWrite{std::string(object), std::string(rest.substr(0, annex_end)), *offset,
                     std::vector<uint8_t>(data.begin(), data.end())};
  }
  if (!starts_with(rest, "read:")) return Unknown{"qXfer:" + std::string(args)};
  rest.remove_prefix(5);
  auto last = rest.rfind(':');
  if (last == string_view::npos) return malformed("qXfer: missing offset");
  auto al = addr_len(rest.substr(last + 1));
  if (!al) return malformed("qXfer: bad offset,length");
  return XferRead{std::string(object), std::string(rest.substr(0, last)), al->first, al->second};
}

Request p_vfile(string_view args) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return Unknown{"vFile:" + std::string(args)};
  string_view op = args.substr(0, colon);
  string_view rest = args.substr(colon + 1);
  if (op == "pwrite") {
    // Data is binary and may contain ',': only the first two commas separate fields.
    auto c1 = rest.find(',');
    auto c2 = c1 == string_view::npos ? c1 : rest.find(',', c1 + 1);
    if (c2 == string_view::npos) return malformed("vFile:pwrite: bad arguments");
    auto fd = hex_int(rest.substr(0, c1));
    auto off = parse_hex_u64(rest.substr(c1 + 1, c2 - c1 - 1));
    if (!fd || !off) return malformed("vFile:pwrite: bad fd or offset");
    string_view data = rest.substr(c2 + 1);
    return FilePwrite{*fd, *off, std::vector<uint8_t>(data.begin(), data.end())};
  }
  auto parts = split(rest, ',');
  auto bad = [&] { return malformed("vFile:" + std::string(op) + ": bad arguments"); };
  if (op == "setfs") {
    auto pid = parts.size() == 1 ? hex_int(parts[0]) : std::nullopt;
    if (!pid) return bad();
    return FileSetFs{*pid};
  }
  if (op == "open") {
    if (parts.size() != 3) return bad();
    auto path = from_hex_string(parts[0]);
    auto flags = hex_int(parts[1]);
    auto mode = hex_int(parts[2]);
    if (!path || !flags || !mode) return bad();
    return FileOpen{std::move(*path), *flags, *mode};
  }
  if (op == "close" || op == "fstat") {
    auto fd = parts.size() == 1 ? hex_int(parts[0]) : std::nullopt;
    if (!fd) return bad();
    if (op == "close") return FileClose{*fd};
    return FileFstat{*fd};
  }
  if (op == "pread") {
    if (parts.size() != 3) return bad();
    auto fd = hex_int(parts[0]);
    auto count = parse_hex_u64(parts[1]);
    auto off = parse_hex_u64(parts[2]);
    if (!fd || !count || !off) return bad();
    return FilePread{*fd, *count, *off};
  }
  if (op == "unlink" || op == "readlink") {
    auto path = parts.size() == 1 ? from_hex_string(parts[0]) : std::nullopt;
    if (!path) return bad();
    if (op == "unlink") return FileUnlink{std::move(*path)};
    return FileReadlink{std::move(*path)};
  }
  return Unknown{"vFile:" + std::string(args)};
}

Request p_btrace(string_view args) { return BtraceEnable{std::string(args)}; }

// Qbtrace-conf:<format>:<key>=<value>; the server validates the names and the value.
Request p_btrace_conf(string_view args) {
  BtraceConf c;
  auto colon = args.find(':');
  c.format = std::string(args.substr(0, colon));
  if (colon != string_view::npos) {
    string_view kv = args.substr(colon + 1);
    auto eq = kv.find('=');
    c.key = std::string(kv.substr(0, eq));
    if (eq != string_view::npos) c.value = std::string(kv.substr(eq + 1));
  }
  return c;
}

Request p_memory_region(string_view args) {
  auto addr = parse_hex_u64(args);
  if (!addr) return malformed("qMemoryRegionInfo: bad address");
  return MemoryRegionInfo{*addr};
}

Request p_watch_info(string_view args) {
  if (args.empty() || args == ":") return WatchpointSupportInfo{};
  return Unknown{"qWatchpointSupportInfo" + std::string(args)};
}

Request p_thread_stop_info(string_view args) {
  auto id = parse_thread_id(args);
  if (!id || id->tid <= 0) return malformed("qThreadStopInfo: bad thread id");
  return ThreadStopInfo{id->tid};
}

Request p_register_info(string_view args) {
  auto n = hex_int(args);
  if (!n) return malformed("qRegisterInfo: bad register number");
  return RegisterInfo{*n};
}

// ---- the table ----

struct Entry {
  string_view name;
  bool exact;  // exact: the whole payload; else a prefix whose remainder is the arguments
  Request (*parse)(string_view args);
  Capability needs = Capability::Base;  // without it the packet is unknown (empty reply)
};

template <typename T>
Request make(string_view) { return T{}; }

// Multi-character names come before the one-letter commands that share their first letter.
constexpr Entry kTable[] = {
    {"qSupported", false, p_qsupported},
    {"vMustReplyEmpty", true, make<MustReplyEmpty>},
    {"QStartNoAckMode", true, make<StartNoAckMode>},
    {"!", true, make<EnableExtendedMode>},
    {"?", true, make<QueryHaltReason>},
    {"qC", true, make<QueryCurrentThread>},
    {"qfThreadInfo", true, make<ThreadInfoFirst>},
    {"qsThreadInfo", true, make<ThreadInfoNext>},
    {"qAttached", false, p_attached},
    {"qOffsets", true, make<QueryOffsets>},
    {"qSymbol:", false, [](string_view a) -> Request { return QuerySymbol{std::string(a)}; }},
    {"qTStatus", true, make<QueryTStatus>},
    {"QNonStop:", false, [](string_view a) { return p_switch<SetNonStop>(a, "QNonStop: bad value"); }},
    {"QPassSignals:", false, [](string_view a) { return p_signals(a, true); }},
    {"QProgramSignals:", false, [](string_view a) { return p_signals(a, false); }},
    {"QDisableRandomization:", false,
     [](string_view a) { return p_switch<SetDisableRandomization>(a, "QDisableRandomization: bad value"); }},
    {"QStartupWithShell:", false,
     [](string_view a) { return p_switch<SetStartupWithShell>(a, "QStartupWithShell: bad value"); }},
    {"QEnvironmentHexEncoded:", false, p_env_set},
    {"QEnvironmentUnset:", false, p_env_unset},
    {"QEnvironmentReset", true, make<ResetEnvironment>},
    {"QSetWorkingDir:", false, p_workdir},
    {"QCatchSyscalls:", false, p_catch_syscalls, Capability::CatchSyscalls},
    {"QThreadEvents:", false,
     [](string_view a) { return p_switch<SetThreadEvents>(a, "QThreadEvents: bad value"); }, Capability::ThreadEvents},
    {"qRcmd,", false, p_rcmd},
    {"qGetTLSAddr:", false, p_tls_address},
    {"vCont", false, p_vcont},
    {"vCtrlC", true, make<VCtrlC>},
    {"vStopped", true, make<VStopped>, Capability::NonStop},
    {"stepbranch", false, p_stepbranch, Capability::StepBranch},
    {"Qbranchstub:stepbranch-next:", false, p_stepbranch_next, Capability::StepBranch},
    {"qbranchstub:stepbranch-last", true, make<StepBranchLast>, Capability::StepBranch},
    {"vKill;", false, p_kill},
    {"vRun;", false, p_vrun},
    {"vAttach;", false, p_vattach},
    {"qXfer:", false, p_xfer},
    {"vFile:", false, p_vfile},
    {"Qbtrace-conf:", false, p_btrace_conf, Capability::BtraceBts},
    {"Qbtrace:", false, p_btrace, Capability::BtraceBts},
    {"qHostInfo", true, make<HostInfo>},
    {"qProcessInfo", true, make<ProcessInfo>},
    {"qMemoryRegionInfo:", false, p_memory_region},
    {"QThreadSuffixSupported", true, make<ThreadSuffixSupported>},
    {"QListThreadsInStopReply", true, make<ListThreadsInStopReply>},
    {"jThreadsInfo", true, make<ThreadsInfo>},
    {"QEnableErrorStrings", true, make<EnableErrorStrings>},
    {"qWatchpointSupportInfo", false, p_watch_info},
    {"qThreadStopInfo", false, p_thread_stop_info},
    {"qRegisterInfo", false, p_register_info},
    // One-letter commands.
    {"H", false, p_set_thread},
    {"T", false, p_thread_alive},
    {"g", false, p_read_registers},
    {"G", false, p_write_registers},
    {"p", false, p_read_register},
    {"P", false, p_write_register},
    {"m", false, [](string_view a) { return p_read_memory(a, false); }},
    {"x", false, [](string_view a) { return p_read_memory(a, true); }},
    {"M", false, [](string_view a) { return p_write_memory(a, false); }},
    {"X", false, [](string_view a) { return p_write_memory(a, true); }},
    {"c", false, [](string_view a) { return p_legacy('c', a); }},
    {"C", false, [](string_view a) { return p_legacy('C', a); }},
    {"s", false, [](string_view a) { return p_legacy('s', a); }},
    {"S", false, [](string_view a) { return p_legacy('S', a); }},
    {"k", true, [](string_view) -> Request { return Kill{}; }},
    {"D", false, p_detach},
    {"R", false, make<Restart>},  // GDB sends "R00"; the argument means nothing
    {"Z", false, [](string_view a) { return p_breakpoint(a, true); }},
    {"z", false, [](string_view a) { return p_breakpoint(a, false); }},
};

}  // namespace

const std::vector<XferObject>& xfer_objects() {
  static const std::vector<XferObject> objects = {
      {"features", false, Capability::Base},       {"auxv", false, Capability::Base},
      {"libraries-svr4", false, Capability::Base}, {"siginfo", true, Capability::Base},
      {"threads", false, Capability::Base},        {"exec-file", false, Capability::Base},
      {"osdata", false, Capability::Base},         {"btrace", false, Capability::BtraceBts},
      {"btrace-conf", false, Capability::BtraceBts},
  };
  return objects;
}

Request parse_request(std::string_view payload, const Capabilities& capabilities) {
  for (const Entry& e : kTable) {
    if (!(e.exact ? payload == e.name : starts_with(payload, e.name))) continue;
    if (!capabilities.has(e.needs)) return Unknown{std::string(payload)};
    Request r = e.parse(payload.substr(e.name.size()));
    // A qXfer object is served only with its capability, and written only where writable.
    const std::string* object = nullptr;
    bool write = false;
    if (auto* x = std::get_if<XferRead>(&r)) object = &x->object;
    if (auto* x = std::get_if<XferWrite>(&r)) object = &x->object, write = true;
    if (object) {
      const auto& objects = xfer_objects();
      auto it = std::find_if(objects.begin(), objects.end(), [&](const XferObject& o) { return o.name == *object; });
      if (it == objects.end() || !capabilities.has(it->needs) || (write && !it->writable))
        return Unknown{std::string(payload)};
    }
    return r;
  }
  return Unknown{std::string(payload)};
}

Request parse_request(std::string_view payload) { return parse_request(payload, Capabilities::all()); }

}  // namespace protocol
