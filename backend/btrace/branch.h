// One taken branch, the unit of every history: plain values, no ring.
#pragma once

#include <cstdint>

namespace backend {

struct Branch { uint64_t from = 0, to = 0; };
// A gap in a history (LBR windows that do not overlap: branches were lost): `from` is where the
// older history ends (the pc the thread was resumed from), `to` is 0, which no branch has.
inline Branch gap_after(uint64_t pc) { return Branch{pc, 0}; }
inline bool is_gap(const Branch& b) { return b.to == 0; }

}  // namespace backend
