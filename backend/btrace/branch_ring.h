// A bounded ring of taken branches for one thread, with the read positions GDB's `all`, `new`
// and `delta` reads need. The configured size counts 24 bytes a branch, like a BTS record;
// memory is 4 bytes a branch stored (ids into a dictionary of the distinct branches: a history
// of millions repeats a few thousand), so that keeping millions costs little to write. A ring
// bigger than one piece (kPieceBranches) keeps its older branches in sealed pieces of a few
// bits a branch (most branches are the one that followed the same branch last time): a whole
// run of tens of millions of branches would otherwise take hundreds of MB of fresh pages, and
// the pages, not the stubs, were most of what recording it cost.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
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
  static constexpr size_t kPieceBranches = size_t{1} << 18;
  // piece_branches: the branches a sealed piece holds (tests pass small ones).
  explicit BranchRing(uint64_t size_bytes, size_t piece_branches = kPieceBranches);
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
  // Bytes the stored branches take (the ids, plain or sealed; not the dictionary nor the
  // address space reserved ahead).
  size_t stored_bytes() const;

 private:
  struct BranchHash {
    size_t operator()(const Branch& b) const { return (b.from * 0x9e3779b97f4a7c15ull) ^ (b.to * 0xc2b2ae3d27d4eb4full); }
  };
  struct BranchEq {
    bool operator()(const Branch& a, const Branch& b) const { return a.from == b.from && a.to == b.to; }
  };
  // Sealed branches: for each, one bit set when it is the branch that followed the previous
  // one the last time that one was seen in this piece (`hits`), else its id in `misses`,
  // `width` bytes little-endian. Each piece decodes alone.
  struct Piece {
    uint64_t first = 0;  // the index (in push order) of its first branch
    size_t count = 0;
    std::vector<uint64_t> hits;
    std::vector<uint8_t> misses;
    unsigned width = 4;
  };
  uint32_t intern(const Branch& b);
  void append_ids(const uint32_t* ids, size_t n);
  void compact();  // the dictionary keeps only what the ring holds (bounded memory)
  bool sealing() const { return capacity_ > piece_; }
  size_t stored() const { return static_cast<size_t>(std::min<uint64_t>(head_, capacity_)); }
  void seal();  // ring_ (the open piece) becomes a sealed one; pieces no longer stored go
  void drop_unstored_pieces();  // those whose every branch is older than what the ring keeps
  Piece encode(const uint32_t* ids, size_t n, uint64_t first);
  void decode(const Piece& p, std::vector<uint32_t>& out) const;
  std::vector<uint32_t> ids_newest_first(size_t n) const;
  std::vector<Branch> newest_first(size_t n) const;

  // Not sealing: the circular ring of capacity_ ids. Sealing: the open piece, the newest
  // branches (never empty once one was pushed: a full one is sealed when the next comes).
  std::vector<uint32_t> ring_;  // dictionary ids
  std::deque<Piece> pieces_;    // sealing: older branches, oldest first
  size_t piece_ = kPieceBranches;
  std::vector<uint32_t> predicted_;  // encode(): the table of what followed each id
  std::vector<uint8_t> misses_;      // encode(): each miss 4 bytes, before narrowing
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
