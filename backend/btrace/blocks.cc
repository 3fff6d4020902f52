#include "backend/btrace/blocks.h"

namespace backend {

std::vector<TraceBlock> build_blocks(std::span<const Branch> newest_first, uint64_t current_pc,
                                     bool keep_partial) {
  std::vector<TraceBlock> blocks;
  blocks.reserve(newest_first.size() + 1);
  uint64_t end = current_pc;
  for (const Branch& b : newest_first) {
    if (is_gap(b)) {
      if (end > 1) {
        blocks.push_back(TraceBlock{end, end});      // the branch that began the newer window
        blocks.push_back(TraceBlock{end, end - 1});  // end < begin: GDB's gap
      }
      end = b.from;
      continue;
    }
    blocks.push_back(TraceBlock{b.to, end});
    end = b.from;
  }
  if (keep_partial) blocks.push_back(TraceBlock{0, end});
  return blocks;
}

}  // namespace backend
