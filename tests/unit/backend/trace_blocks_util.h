// Test helper: trace blocks as (begin, end) pairs, so a whole expected trace reads as one literal.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "backend/btrace/branch_ring.h"

using Blocks = std::vector<std::pair<uint64_t, uint64_t>>;

inline Blocks flat(const std::vector<backend::TraceBlock>& v) {
  Blocks out;
  for (const auto& b : v) out.push_back({b.begin, b.end});
  return out;
}
