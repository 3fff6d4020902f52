// Parsers and table rows of the general packets.
#include "protocol/packets/general.h"

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

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

// After "QThreadOptions;": entries "OPTIONS[:TID]" separated by ';'. As gdbserver, empty
// options are 0 (so "QThreadOptions;" clears every thread).
Request p_thread_options(string_view args) {
  SetThreadOptions q;
  for (string_view entry : split(args, ';')) {
    ThreadOptionsEntry e;
    size_t colon = entry.find(':');
    string_view mask = entry.substr(0, colon);
    if (!mask.empty()) {
      auto v = parse_hex_u64(mask);
      if (!v) return malformed("QThreadOptions: bad options");
      e.options = *v;
    }
    if (colon != string_view::npos) {
      e.thread = parse_thread_id(entry.substr(colon + 1));
      if (!e.thread) return malformed("QThreadOptions: bad thread id");
    }
    q.entries.push_back(e);
  }
  return q;
}

constexpr PacketRow kRows[] = {
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
    {"qExecAndArgs", true, make<QueryExecAndArgs>},
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
    {"QThreadOptions;", false, p_thread_options, Capability::ThreadOptions},
    {"H", false, p_set_thread},
    {"T", false, p_thread_alive},
};

}  // namespace

std::span<const PacketRow> general_rows() { return kRows; }

}  // namespace protocol
