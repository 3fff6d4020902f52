// What the packet tests of every family check a payload against.
#pragma once

#include <catch2/catch.hpp>

#include <string_view>
#include <variant>

#include "protocol/packets.h"

namespace packets_test {

// The request a payload parses to (every capability), which must be a T.
template <typename T>
T as(std::string_view payload) {
  protocol::Request r = protocol::parse_request(payload);
  INFO("payload: " << payload << " index " << r.index());
  REQUIRE(std::holds_alternative<T>(r));
  return std::get<T>(r);
}

inline bool malformed(std::string_view payload) {
  return std::holds_alternative<protocol::Malformed>(protocol::parse_request(payload));
}

inline bool unknown(std::string_view payload) {
  return std::holds_alternative<protocol::Unknown>(protocol::parse_request(payload));
}

}  // namespace packets_test
