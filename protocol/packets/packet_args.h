// Readers of packet arguments that several families share. All are bounded by the input
// size; none allocates from a number read in the packet.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "protocol/packets/request.h"

namespace protocol::packet_args {

bool starts_with(std::string_view s, std::string_view prefix);

// The parts of s between the separators (one empty part for an empty s).
std::vector<std::string_view> split(std::string_view s, char sep);

// Non-negative hex number that fits an int.
std::optional<int> hex_int(std::string_view s);

// "0"/"1" style boolean switches (any non-zero hex is on).
std::optional<bool> hex_bool(std::string_view s);

// "addr,len" with both hex.
std::optional<std::pair<uint64_t, uint64_t>> addr_len(std::string_view s);

Request malformed(std::string_view what);

// One agent expression "X<len>,<hex bytes>" at s[pos] (Z0/Z1 conditions and commands, QTDP
// conditions and actions); advances pos past it. The length is checked against what is left
// of the packet before anything is allocated.
std::optional<std::vector<uint8_t>> agent_expr_at(std::string_view s, size_t& pos);

// The parser of a packet without arguments.
template <typename T>
Request make(std::string_view) { return T{}; }

}  // namespace protocol::packet_args
