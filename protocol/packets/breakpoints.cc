// Parsers and table rows of the breakpoint packets.
#include "protocol/packets/breakpoints.h"

#include <string>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

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

constexpr PacketRow kRows[] = {
    {"Z", false, [](string_view a) { return p_breakpoint(a, true); }},
    {"z", false, [](string_view a) { return p_breakpoint(a, false); }},
};

}  // namespace

std::span<const PacketRow> breakpoints_rows() { return kRows; }

}  // namespace protocol
