#include "protocol/packets/packet_args.h"

#include <climits>

#include "protocol/hex.h"

namespace protocol::packet_args {

using std::string_view;

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

std::optional<int> hex_int(string_view s) {
  auto v = parse_hex_u64(s);
  if (!v || *v > static_cast<uint64_t>(INT_MAX)) return std::nullopt;
  return static_cast<int>(*v);
}

std::optional<bool> hex_bool(string_view s) {
  auto v = parse_hex_u64(s);
  if (!v) return std::nullopt;
  return *v != 0;
}

std::optional<std::pair<uint64_t, uint64_t>> addr_len(string_view s) {
  auto comma = s.find(',');
  if (comma == string_view::npos) return std::nullopt;
  auto a = parse_hex_u64(s.substr(0, comma));
  auto l = parse_hex_u64(s.substr(comma + 1));
  if (!a || !l) return std::nullopt;
  return std::make_pair(*a, *l);
}

Request malformed(string_view what) { return Malformed{std::string(what)}; }

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

}  // namespace protocol::packet_args
