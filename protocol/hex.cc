#include "protocol/hex.h"

namespace protocol {
namespace {

constexpr char kDigits[] = "0123456789abcdef";

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool needs_escape(uint8_t b) { return b == '$' || b == '#' || b == '}' || b == '*'; }

template <typename Bytes>
std::string escape_impl(const Bytes& bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (auto raw : bytes) {
    auto b = static_cast<uint8_t>(raw);
    if (needs_escape(b)) {
      out.push_back('}');
      out.push_back(static_cast<char>(b ^ 0x20));
    } else {
      out.push_back(static_cast<char>(b));
    }
  }
  return out;
}

template <typename Bytes>
std::string to_hex_impl(const Bytes& bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto raw : bytes) {
    auto b = static_cast<uint8_t>(raw);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

}  // namespace

std::string to_hex(std::span<const uint8_t> bytes) { return to_hex_impl(bytes); }
std::string to_hex(std::string_view bytes) { return to_hex_impl(bytes); }

std::optional<std::vector<uint8_t>> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_value(hex[i]), lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<uint8_t>(hi << 4 | lo));
  }
  return out;
}

std::optional<std::string> from_hex_string(std::string_view hex) {
  auto bytes = from_hex(hex);
  if (!bytes) return std::nullopt;
  return std::string(bytes->begin(), bytes->end());
}

std::optional<uint64_t> parse_hex_u64(std::string_view hex) {
  if (hex.empty() || hex.size() > 16) return std::nullopt;
  uint64_t value = 0;
  for (char c : hex) {
    int v = hex_value(c);
    if (v < 0) return std::nullopt;
    value = value << 4 | static_cast<uint64_t>(v);
  }
  return value;
}

std::string hex_u64(uint64_t value) {
  if (value == 0) return "0";
  char buf[16];
  int n = 0;
  while (value != 0) {
    buf[n++] = kDigits[value & 0xf];
    value >>= 4;
  }
  std::string out;
  out.reserve(n);
  while (n > 0) out.push_back(buf[--n]);
  return out;
}

std::string escape_binary(std::span<const uint8_t> bytes) { return escape_impl(bytes); }
std::string escape_binary(std::string_view bytes) { return escape_impl(bytes); }

std::string unescape_binary(std::string_view escaped) {
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '}') {
      if (i + 1 >= escaped.size()) break;
      out.push_back(static_cast<char>(escaped[++i] ^ 0x20));
    } else {
      out.push_back(escaped[i]);
    }
  }
  return out;
}

std::string rle_compress(std::string_view payload) {
  // Count characters are n + 29; n is the number of extra copies.
  constexpr size_t kMinExtra = 3;   // runs of 4 or more
  constexpr size_t kMaxExtra = 96;  // count character '}' (as gdbserver)
  std::string out;
  out.reserve(payload.size());
  size_t i = 0;
  while (i < payload.size()) {
    char c = payload[i];
    if (c == '}') {
      // Keep an escape pair intact: the escaped byte never starts a run.
      out.push_back(c);
      if (i + 1 < payload.size()) out.push_back(payload[i + 1]);
      i += 2;
      continue;
    }
    size_t run = 1;
    while (i + run < payload.size() && payload[i + run] == c && run <= kMaxExtra) ++run;
    size_t extra = run - 1;
    // '$', '#' and '*' must never be repeated by RLE (they would be framing or RLE itself).
    bool compressible = c != '$' && c != '#' && c != '*';
    while (extra + 29 == '#' || extra + 29 == '$') --extra;  // 6 and 7 extra are forbidden
    if (compressible && extra >= kMinExtra) {
      out.push_back(c);
      out.push_back('*');
      out.push_back(static_cast<char>(extra + 29));
      i += extra + 1;
    } else {
      out.push_back(c);
      i += 1;
    }
  }
  return out;
}

std::optional<std::string> rle_expand(std::string_view payload) {
  std::string out;
  out.reserve(payload.size());
  for (size_t i = 0; i < payload.size(); ++i) {
    char c = payload[i];
    if (c != '*') {
      out.push_back(c);
      continue;
    }
    if (out.empty() || i + 1 >= payload.size()) return std::nullopt;
    int count = static_cast<uint8_t>(payload[++i]) - 29;
    if (count < 0) return std::nullopt;
    out.append(static_cast<size_t>(count), out.back());
  }
  return out;
}

}  // namespace protocol
