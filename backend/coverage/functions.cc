#include "backend/coverage/functions.h"

#include <algorithm>

namespace backend {

FunctionIndex::FunctionIndex(CoverageRecorder::MapReader memory_map) : memory_map_(std::move(memory_map)) {
  refresh();
}

bool FunctionIndex::refresh() {
  if (!memory_map_) return false;
  auto map = memory_map_();
  if (!map) return false;
  bool fresh = false;
  mapped_.clear();
  for (const auto& r : *map) {
    if (r.exec) mapped_.emplace_back(r.start, r.end);
    if (r.exec && !r.name.empty() && r.name[0] == '/' && seen_.emplace(r.name, r.start).second) fresh = true;
  }
  if (fresh) {
    symbols_ = Symbolizer::from_memory_map(*map);
    cache_.clear();
  }
  return fresh;
}

uint64_t FunctionIndex::function_of(uint64_t addr) {
  if (auto it = cache_.find(addr); it != cache_.end()) return it->second;
  auto hit = symbols_.lookup(addr);
  // Code in a mapping not seen before (a library loaded since): read the map again. Code in a
  // known mapping without a symbol (a stripped library) stays unnamed without re-reading it.
  bool known = std::any_of(mapped_.begin(), mapped_.end(), [addr](auto r) { return addr >= r.first && addr < r.second; });
  if (!hit && !known && refresh()) hit = symbols_.lookup(addr);
  uint64_t start = hit ? addr - hit->offset : addr;
  cache_[addr] = start;
  return start;
}

std::optional<std::pair<uint64_t, uint64_t>> FunctionIndex::range_of(const std::string& name) {
  auto r = symbols_.range_of(name);
  if (!r && refresh()) r = symbols_.range_of(name);
  return r;
}

}  // namespace backend
