#include "backend/btrace/patch_writes.h"

#include <algorithm>
#include <cstring>
#include <iterator>

namespace backend::patch {

namespace {
// Two pending ranges closer than this are written as one (the bytes between come from the
// copy, which is exact): one write of a few more bytes costs less than two.
constexpr uint64_t kMergeGap = 256;
}  // namespace

void AreaWrites::add_area(uint64_t begin, uint64_t end) {
  if (begin < end) areas_.push_back(Area{begin, end, {}});
}

void AreaWrites::remove_area(uint64_t begin) {
  auto it = std::find_if(areas_.begin(), areas_.end(), [&](const Area& a) { return a.begin == begin; });
  if (it == areas_.end()) return;
  for (auto d = dirty_.lower_bound(it->begin); d != dirty_.end() && d->first < it->end;) d = dirty_.erase(d);
  areas_.erase(it);
}

AreaWrites::Area* AreaWrites::area_of(uint64_t addr, uint64_t len) {
  for (auto& a : areas_)
    if (addr >= a.begin && addr < a.end && len <= a.end - addr) return &a;
  return nullptr;
}

bool AreaWrites::write(const ProcMemory& mem, uint64_t addr, std::span<const uint8_t> bytes, bool direct) {
  if (bytes.empty()) return true;
  Area* a = area_of(addr, bytes.size());
  if (!a) return false;
  uint64_t off = addr - a->begin;
  if (a->copy.size() < off + bytes.size()) a->copy.resize(off + bytes.size(), 0);
  std::memcpy(a->copy.data() + off, bytes.data(), bytes.size());
  if (direct) {
    (void)mem.write(addr, bytes);
    return true;
  }
  // Merge [lo, hi) with every pending range within kMergeGap (ranges never span two areas:
  // the areas are far apart, and a merge stops at the area's end).
  uint64_t lo = addr, hi = addr + bytes.size();
  auto it = dirty_.upper_bound(lo);
  if (it != dirty_.begin()) {
    auto prev = std::prev(it);
    if (prev->second + kMergeGap >= lo && prev->first >= a->begin) it = prev;
  }
  while (it != dirty_.end() && it->first <= hi + kMergeGap && it->first < a->end) {
    lo = std::min(lo, it->first);
    hi = std::max(hi, it->second);
    it = dirty_.erase(it);
  }
  dirty_[lo] = hi;
  return true;
}

bool AreaWrites::flush(const ProcMemory& mem) {
  bool ok = true;
  for (const auto& [lo, hi] : dirty_) {
    Area* a = area_of(lo, hi - lo);
    if (!a) continue;
    uint64_t off = lo - a->begin;
    auto n = mem.write(lo, std::span<const uint8_t>(a->copy.data() + off, hi - lo));
    ok = ok && n && *n == hi - lo;
  }
  dirty_.clear();
  return ok;
}

}  // namespace backend::patch
