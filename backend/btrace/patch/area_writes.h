// Writes into the program's memory that only the block-patching source makes (its stub areas
// and its table), gathered: each area has a copy here that every write goes to, and flush()
// sends what changed in a few large writes instead of one per stub, exit, slot and cache.
// An area the server maps too (patch_shared.h) needs neither: a write is a store into it, in
// the program at once (stores keep their order, aligned 4- and 8-byte ones are never torn).
//
// The copies are exact because nothing else writes there: the areas are mapped by the server
// (zero-filled, like a fresh copy), the program only reads or executes them. Writes outside
// every area are the caller's to make.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "backend/btrace/patch/shared_mapping.h"
#include "backend/ptrace/proc_memory.h"

namespace backend::patch {

class AreaWrites {
 public:
  // [begin, end): memory only the server writes, zero-filled now. `writable`: the program maps
  // it writable (the table), so that many scattered ranges go in one process_vm_writev.
  // `view`: the server's own mapping of it (shared): writes go there, nothing is ever pending.
  void add_area(uint64_t begin, uint64_t end, bool writable = false, SharedView view = {});
  // The server's view of [addr, addr+len) when that lies in a shared area, else nullptr.
  uint8_t* view_of(uint64_t addr, uint64_t len);
  // The area is gone (unmapped): its copy and anything pending in it are dropped.
  void remove_area(uint64_t begin);
  // false when [addr, addr+len) is not inside one area. Else the copy holds the bytes and the
  // range is pending (`direct`: written through to mem now as well, nothing pending).
  bool write(const ProcMemory& mem, uint64_t addr, std::span<const uint8_t> bytes, bool direct);
  bool pending() const { return !dirty_.empty(); }
  // Every pending range written; false when a write failed (the program's areas are not what
  // the server built: the caller must stop using them).
  bool flush(const ProcMemory& mem);

 private:
  struct Area {
    uint64_t begin = 0, end = 0;
    bool writable = false;
    std::vector<uint8_t> copy;  // [begin, begin + copy.size()); zeros beyond
    SharedView view;            // shared with the program: no copy
  };
  Area* area_of(uint64_t addr, uint64_t len);

  std::vector<Area> areas_;
  std::map<uint64_t, uint64_t> dirty_;  // begin -> end, disjoint, merged when close
};

// Patches and the original bytes they replace, written into the program's code, gathered per
// page while no thread of the program runs: flush() sends each run of adjacent touched pages
// with one read and one write instead of one write per patch (a free run puts back every patch
// of the process; a stop takes them all out again). Only for memory that nothing but the
// server writes meanwhile (the bytes between patches come from the read just before).
class CodeWrites {
 public:
  void write(uint64_t addr, std::span<const uint8_t> bytes);
  bool pending() const { return !pages_.empty(); }
  bool overlaps(uint64_t addr, uint64_t len) const;
  // [lo, hi) was unmapped: nothing pending there is written.
  void drop(uint64_t lo, uint64_t hi);
  // Memory as it will be: the pending bytes over buf, read from [addr, addr+buf.size()).
  void overlay(uint64_t addr, std::span<uint8_t> buf) const;
  // false when a read or write failed (what was pending is dropped all the same).
  bool flush(const ProcMemory& mem);

 private:
  static constexpr uint64_t kPage = 4096;
  struct Page {
    std::array<uint8_t, kPage> bytes{};
    std::bitset<kPage> set;
    uint64_t lo = kPage, hi = 0;  // [lo, hi): the offsets written
  };
  std::map<uint64_t, Page> pages_;
};

}  // namespace backend::patch
