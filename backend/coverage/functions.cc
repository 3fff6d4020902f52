#include "backend/coverage/functions.h"

namespace backend {

FunctionIndex::FunctionIndex(CoverageRecorder::MapReader memory_map) : memory_map_(std::move(memory_map)) {
  refresh();
}

bool FunctionIndex::refresh() {
  if (!memory_map_) return false;
  auto map = memory_map_();
  if (!map) return false;
  bool fresh = false;
  for (const auto& r : *map)
    if (r.exec && !r.name.empty() && r.name[0] == '/' && seen_.emplace(r.name, r.start).second) fresh = true;
  if (fresh) symbols_ = Symbolizer::from_memory_map(*map);
  return fresh;
}

uint64_t FunctionIndex::function_of(uint64_t addr) {
  auto hit = symbols_.lookup(addr);
  if (!hit && refresh()) hit = symbols_.lookup(addr);
  return hit ? addr - hit->offset : addr;
}

std::optional<std::pair<uint64_t, uint64_t>> FunctionIndex::range_of(const std::string& name) {
  auto r = symbols_.range_of(name);
  if (!r && refresh()) r = symbols_.range_of(name);
  return r;
}

}  // namespace backend
