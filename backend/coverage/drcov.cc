#include "backend/coverage/drcov.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace backend {

namespace {

void put_record(std::string& out, uint64_t offset, uint64_t size, uint16_t mod_id) {
  // bb_entry_t of drcovlib.h: uint start; ushort size; ushort mod_id (little-endian host).
  while (size > 0) {
    uint32_t start = static_cast<uint32_t>(offset);
    uint16_t len = static_cast<uint16_t>(std::min<uint64_t>(size, 0xffff));
    char rec[8];
    std::memcpy(rec, &start, 4);
    std::memcpy(rec + 4, &len, 2);
    std::memcpy(rec + 6, &mod_id, 2);
    out.append(rec, 8);
    offset += len;
    size -= len;
  }
}

}  // namespace

std::string format_drcov(const CoverageSnapshot& snap, int version, size_t* skipped) {
  bool segments = version >= 3;
  struct Entry { uint64_t start, end, offset; size_t module; uint16_t containing; };
  std::vector<Entry> entries;
  std::vector<uint16_t> first_entry(snap.modules.size(), 0);
  for (size_t m = 0; m < snap.modules.size(); ++m) {
    const auto& mod = snap.modules[m];
    first_entry[m] = static_cast<uint16_t>(entries.size());
    if (!segments || mod.segments.empty()) {
      entries.push_back({mod.base, mod.end, 0, m, first_entry[m]});
      continue;
    }
    for (const auto& seg : mod.segments) entries.push_back({seg.start, seg.end, seg.offset, m, first_entry[m]});
  }

  std::string records;
  size_t count = 0, left_out = 0;
  for (const auto& b : snap.blocks) {
    if (b.module < 0 || static_cast<size_t>(b.module) >= snap.modules.size()) {
      ++left_out;
      continue;
    }
    // The entry holding the block: the module (v2) or the segment it starts in (v3).
    size_t id = first_entry[b.module];
    if (segments)
      for (size_t e = id; e < entries.size() && entries[e].module == static_cast<size_t>(b.module); ++e)
        if (b.start >= entries[e].start && b.start < entries[e].end) id = e;
    uint64_t offset = b.start - entries[id].start;
    if (b.start < entries[id].start || offset > UINT32_MAX || id >= 0xffff) {
      ++left_out;
      continue;
    }
    size_t before = records.size();
    put_record(records, offset, b.size, static_cast<uint16_t>(id));
    count += (records.size() - before) / 8;
  }
  if (skipped) *skipped = left_out;

  std::string out = fmt::format("DRCOV VERSION: {}\nDRCOV FLAVOR: drcov\n", segments ? 3 : 2);
  out += fmt::format("Module Table: version {}, count {}\n", segments ? 5 : 4, entries.size());
  out += segments ? "Columns: id, containing_id, start, end, entry, offset, preferred_base, path\n"
                  : "Columns: id, containing_id, start, end, entry, offset, path\n";
  for (size_t e = 0; e < entries.size(); ++e) {
    const auto& mod = snap.modules[entries[e].module];
    out += fmt::format("{:3}, {:3}, 0x{:016x}, 0x{:016x}, 0x{:016x}, {:016x}, ", e, entries[e].containing,
                       entries[e].start, entries[e].end, mod.entry, entries[e].offset);
    if (segments) out += fmt::format("0x{:016x}, ", mod.preferred_base);
    out += mod.path + "\n";
  }
  out += fmt::format("BB Table: {} bbs\n", count);
  out += records;
  return out;
}

}  // namespace backend
