#include "backend/btrace/blocks.h"

namespace backend {

std::vector<TraceBlock> build_blocks(std::span<const Branch> newest_first, uint64_t current_pc,
                                     bool keep_partial) {
  std::vector<TraceBlock> blocks;
  blocks.reserve(newest_first.size() + 1);
  uint64_t end = current_pc;
  for (const Branch& b : newest_first) {
    blocks.push_back(TraceBlock{b.to, end});
    end = b.from;
  }
  if (keep_partial) blocks.push_back(TraceBlock{0, end});
  return blocks;
}

}  // namespace backend
