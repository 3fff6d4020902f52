// Turns taken branches into GDB's BTS blocks (GDB's btrace XML: a block runs from a branch target to the next branch, `end` inclusive). Shared by every branch source
// (the in-memory BranchRing and the perf BTS ring) so they cannot disagree.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/btrace/branch_ring.h"

namespace backend {

// `newest_first[0]` is the most recent branch. The newest block ends at current_pc; each branch
// closes a block that begins at its `to`, and the next older block ends at its `from`. The
// unfinished oldest block {0, from of the oldest branch} (or {0, current_pc} with no branches)
// is appended only when keep_partial (delta reads).
// A gap entry (is_gap) ends the history before it: the newer block's unknown start becomes the
// one instruction known to have run there (the branch at the newer block's end) after a block
// whose end lies below its begin, which GDB turns into a gap ("Recorded trace may be corrupted
// at instruction N (pc = ...)", `info record` counts it in "(N gaps)"); the older history ends
// at the gap's `from`.
std::vector<TraceBlock> build_blocks(std::span<const Branch> newest_first, uint64_t current_pc,
                                     bool keep_partial);

}  // namespace backend
