#include "backend/coverage/lcov.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "backend/coverage/dwarf_line.h"
#include "backend/host/elf_file.h"

namespace backend {

namespace {

constexpr std::string_view kDeleted = " (deleted)";

// Executions of the instruction at `addr`: the sum over the covered blocks holding it.
class BlockIndex {
 public:
  void add(const CoveredBlock& b) {
    blocks_.push_back(&b);
    max_size_ = std::max<uint64_t>(max_size_, b.size);
  }
  void sort() {
    std::sort(blocks_.begin(), blocks_.end(), [](auto* a, auto* b) { return a->start < b->start; });
  }
  uint64_t at(uint64_t addr) const { return over(addr, addr + 1, true); }
  // The most executions of any block overlapping [lo, hi) (sum_at: sum of those holding lo).
  uint64_t over(uint64_t lo, uint64_t hi, bool sum_at = false) const {
    auto it = std::upper_bound(blocks_.begin(), blocks_.end(), hi - 1, [](uint64_t v, auto* b) { return v < b->start; });
    uint64_t best = 0, sum = 0;
    while (it != blocks_.begin()) {
      --it;
      const CoveredBlock* b = *it;
      if (b->start + max_size_ <= lo) break;
      if (b->start + b->size <= lo) continue;
      best = std::max(best, b->count);
      if (b->start <= lo) sum += b->count;
    }
    return sum_at ? sum : std::max(best, sum);
  }

 private:
  std::vector<const CoveredBlock*> blocks_;
  uint64_t max_size_ = 0;
};

struct FileRecord {
  std::map<uint32_t, uint64_t> lines;  // line -> executions
  std::map<std::string, std::pair<uint32_t, uint64_t>> functions;  // name -> (line, executions)
};

}  // namespace

std::string format_lcov(const CoverageSnapshot& snap, std::vector<std::string>* without_lines) {
  std::map<std::string, FileRecord> files;
  for (size_t m = 0; m < snap.modules.size(); ++m) {
    const CoverageModule& mod = snap.modules[m];
    BlockIndex blocks;
    for (const auto& b : snap.blocks)
      if (b.module == static_cast<int>(m)) blocks.add(b);
    blocks.sort();
    if (mod.path.empty() || mod.path[0] != '/') continue;  // [vdso]: no file
    std::string path = mod.path.ends_with(kDeleted) ? mod.path.substr(0, mod.path.size() - kDeleted.size()) : mod.path;
    std::string debug = debug_file_for(path, mod.build_id);
    auto elf = debug.empty() ? std::nullopt : ElfFile::open(debug);
    LineTable table;
    if (elf) table = read_line_table(*elf);
    if (table.rows.empty()) {
      bool covered = std::any_of(snap.blocks.begin(), snap.blocks.end(), [&](const auto& b) { return b.module == static_cast<int>(m); });
      if (covered && without_lines) without_lines->push_back(mod.path);
      continue;
    }
    // Each row covers the addresses up to the next row of its sequence.
    for (size_t i = 0; i + 1 < table.rows.size(); ++i) {
      const LineRow& r = table.rows[i];
      if (r.end_sequence || r.line == 0) continue;
      uint64_t lo = r.address + mod.bias, hi = table.rows[i + 1].address + mod.bias;
      if (hi <= lo) hi = lo + 1;
      uint64_t count = blocks.over(lo, hi);
      auto& line = files[table.files[r.file]].lines[r.line];
      line = std::max(line, count);
    }
    // Functions: the symbols of the debug file (its .symtab) or of the module itself.
    auto symbols = elf ? elf->functions() : std::vector<ElfFunction>{};
    if (symbols.empty())
      if (auto own = ElfFile::open(path)) symbols = own->functions();
    std::vector<const LineRow*> sorted;
    for (const auto& r : table.rows)
      if (!r.end_sequence && r.line != 0) sorted.push_back(&r);
    std::stable_sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->address < b->address; });
    for (const auto& f : symbols) {
      auto it = std::lower_bound(sorted.begin(), sorted.end(), f.value, [](auto* r, uint64_t v) { return r->address < v; });
      if (it == sorted.end() || (*it)->address >= f.value + f.size) continue;  // no line inside it
      auto& fn = files[table.files[(*it)->file]].functions[f.name];
      fn.first = (*it)->line;
      fn.second += blocks.at(f.value + mod.bias);
    }
  }

  std::string out;
  for (const auto& [path, rec] : files) {
    if (rec.lines.empty()) continue;
    out += "TN:\nSF:" + path + "\n";
    std::vector<std::pair<uint32_t, std::string>> by_line;
    for (const auto& [name, fn] : rec.functions) by_line.emplace_back(fn.first, name);
    std::sort(by_line.begin(), by_line.end());
    size_t hit = 0;
    for (const auto& [line, name] : by_line) out += fmt::format("FN:{},{}\n", line, name);
    for (const auto& [line, name] : by_line) {
      uint64_t count = rec.functions.at(name).second;
      out += fmt::format("FNDA:{},{}\n", count, name);
      hit += count > 0;
    }
    out += fmt::format("FNF:{}\nFNH:{}\n", by_line.size(), hit);
    size_t lines_hit = 0;
    for (const auto& [line, count] : rec.lines) {
      out += fmt::format("DA:{},{}\n", line, count);
      lines_hit += count > 0;
    }
    out += fmt::format("LF:{}\nLH:{}\nend_of_record\n", rec.lines.size(), lines_hit);
  }
  return out;
}

}  // namespace backend
