// Hex and binary codecs of the remote serial protocol: hex text, '}' escaping, run-length
// encoding. Pure functions; bad input gives nullopt, never an exception.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace protocol {

// Lowercase hex, two digits per byte.
std::string to_hex(std::span<const uint8_t> bytes);
std::string to_hex(std::string_view bytes);
// Even-length hex (either case) to bytes; nullopt on odd length or a non-hex digit.
std::optional<std::vector<uint8_t>> from_hex(std::string_view hex);
std::optional<std::string> from_hex_string(std::string_view hex);
// Strict: 1..16 hex digits and nothing else.
std::optional<uint64_t> parse_hex_u64(std::string_view hex);
// Lowercase, no leading zeros ("0" for zero).
std::string hex_u64(uint64_t value);

// Binary escaping: '$', '#', '}' and '*' become '}' followed by (byte ^ 0x20).
std::string escape_binary(std::span<const uint8_t> bytes);
std::string escape_binary(std::string_view bytes);
// Reverses escape_binary; a dangling '}' at the end is dropped.
std::string unescape_binary(std::string_view escaped);

// gdbserver-style RLE of an (already escaped) payload: "x*<n+29>" for n >= 3 extra copies,
// n <= 96, never a count character of '#' or '$'. An escape pair "}x" is never split.
std::string rle_compress(std::string_view payload);
// Expands "c*<count>" (count char - 29 extra copies). nullopt if '*' has no preceding
// character, no count character, or a count below zero.
std::optional<std::string> rle_expand(std::string_view payload);

}  // namespace protocol
