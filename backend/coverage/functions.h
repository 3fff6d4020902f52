// Function names for coverage pictures and reports: the symbols of every module mapped in the
// process, re-read when code shows up in a module not seen before (a library loaded later),
// and kept after the process is gone.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/coverage/coverage.h"
#include "backend/host/symbolizer.h"

namespace backend {

class FunctionIndex {
 public:
  explicit FunctionIndex(CoverageRecorder::MapReader memory_map);
  // The start of the function holding addr; addr itself when no symbol covers it.
  uint64_t function_of(uint64_t addr);
  // "name", "name+0x12", "module+0x1234" or "0x..." (Symbolizer::describe).
  std::string describe(uint64_t addr) const { return symbols_.describe(addr); }
  std::optional<std::pair<uint64_t, uint64_t>> range_of(const std::string& name);
  void detach() { memory_map_ = nullptr; }

 private:
  bool refresh();  // true when new modules were found

  CoverageRecorder::MapReader memory_map_;
  Symbolizer symbols_;
  std::set<std::pair<std::string, uint64_t>> seen_;  // executable file mappings read so far
  std::vector<std::pair<uint64_t, uint64_t>> mapped_;  // every executable range of the last map
  std::unordered_map<uint64_t, uint64_t> cache_;       // addr -> function start
};

}  // namespace backend
