// A bounded ring of taken branches for one thread, with the read positions GDB's `all`, `new`
// and `delta` reads need. The configured size counts 24 bytes a branch, like a BTS record;
// memory is 4 bytes a branch stored (ids into a dictionary of the distinct branches: a history
// of millions repeats a few thousand), so that keeping millions costs little to write.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/btrace/branch.h"
#include "backend/error.h"

namespace backend {

struct TraceBlock { uint64_t begin = 0, end = 0; };  // inclusive instruction addresses
enum class TraceRead { All, New, Delta };

// The size a BTS buffer asked for as `requested` bytes really gets: whole pages, a power of
// two of them (at least one), as perf maps it and as gdbserver then reports it in btrace-conf.
// Every source uses it, so `info record` says the same whatever records.
uint64_t bts_buffer_bytes(uint64_t requested, uint64_t page_size);

class BranchRing {
 public:
  static constexpr size_t kBytesPerBranch = 24;
  explicit BranchRing(uint64_t size_bytes);
  void push(uint64_t from, uint64_t to);
  // The same as push() for each, in order (the block-patching source drains thousands at once).
  void push_many(std::span<const Branch> branches);
  uint64_t size_bytes() const;       // the size reported in btrace-conf
  size_t capacity() const;           // branches
  uint64_t total() const;            // branches ever pushed
  // Blocks newest first; the newest ends at current_pc. Delta appends {0, from of the oldest new
  // branch} (or just {0, current_pc} when nothing happened); overflow since the last read gives
  // Error{EOVERFLOW, "Overflow."}. All/New drop the partial oldest block. Updates last-read.
  Result<std::vector<TraceBlock>> read(TraceRead kind, uint64_t current_pc);
  // Where recording started. While nothing has been overwritten, `all`/`new` then keep the
  // oldest block too ({origin, from of the oldest branch}), as GDB saw it when it enabled.
  void set_origin(uint64_t pc) { origin_ = pc; }
  // The origin while nothing has been overwritten yet, else 0.
  uint64_t origin() const { return head_ <= capacity() ? origin_ : 0; }
  // The newest n branches, oldest first (monitor btrace history/calls).
  std::vector<Branch> newest(size_t n) const;
  // A signal delivered where the newest branch `was` had just arrived (nothing of the block
  // there ran): that branch goes to `to` instead (the handler), so the block it began, empty,
  // is not shown; sigreturn's branch back to was.to follows later. Where nothing was recorded
  // yet and recording began at was.to, the origin moves. A branch the client already read
  // makes its next delta read an overflow: it reads the history anew. False: not the newest.
  bool retarget_newest(const Branch& was, uint64_t to);

  // The block-patching source's drain: `entries` in order, each either the caller's id of a
  // fixed branch (resolved through `fixed` the first time this ring meets that id, then by
  // table) or kExplicit | i for explicit_branches[i]. The caller's ids hold until
  // forget_fixed() (a new numbering).
  static constexpr uint32_t kExplicit = 0x80000000u;
  void push_entries(std::span<const uint32_t> entries, std::span<const Branch> explicit_branches,
                    const std::function<Branch(uint32_t)>& fixed);
  void forget_fixed() { fixed_.clear(); }
  size_t distinct() const { return dict_.size(); }  // dictionary entries (tests)

 private:
  struct BranchHash {
    size_t operator()(const Branch& b) const { return (b.from * 0x9e3779b97f4a7c15ull) ^ (b.to * 0xc2b2ae3d27d4eb4full); }
  };
  struct BranchEq {
    bool operator()(const Branch& a, const Branch& b) const { return a.from == b.from && a.to == b.to; }
  };
  uint32_t intern(const Branch& b);
  void append_ids(const uint32_t* ids, size_t n);
  void compact();  // the dictionary keeps only what the ring holds (bounded memory)

  std::vector<uint32_t> ring_;  // dictionary ids
  std::vector<Branch> dict_;    // id -> branch
  std::unordered_map<Branch, uint32_t, BranchHash, BranchEq> index_;  // branch -> id
  std::vector<uint32_t> fixed_;  // push_entries: the caller's id -> dictionary id + 1 (0: unseen)
  uint64_t head_ = 0;       // total pushed
  uint64_t last_read_ = 0;  // head at the previous read
  uint64_t size_bytes_ = 0;
  size_t capacity_ = 1;     // size_bytes_ / kBytesPerBranch, at least 1 (no division per push)
  uint64_t origin_ = 0;     // 0: unknown
  bool reread_ = false;     // a branch the client read has changed: its next delta overflows
};

}  // namespace backend
