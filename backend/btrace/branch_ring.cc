// BranchRing: the software/LBR sources' history, read the way gdbserver reads a BTS buffer.
#include "backend/btrace/branch_ring.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "backend/btrace/blocks.h"

namespace backend {

uint64_t bts_buffer_bytes(uint64_t requested, uint64_t page_size) {
  if (page_size == 0) page_size = 4096;
  uint64_t pages = requested / page_size + (requested % page_size != 0);
  uint64_t pow2 = 1;
  while (pow2 < pages && pow2 < (uint64_t{1} << 30)) pow2 <<= 1;
  return pow2 * page_size;
}

BranchRing::BranchRing(uint64_t size_bytes, size_t piece_branches)
    : piece_(std::max<size_t>(piece_branches, 64)),
      size_bytes_(size_bytes),
      capacity_(static_cast<size_t>(std::max<uint64_t>(1, size_bytes / kBytesPerBranch))) {}

size_t BranchRing::capacity() const { return capacity_; }

uint64_t BranchRing::size_bytes() const { return size_bytes_; }
uint64_t BranchRing::total() const { return head_; }

uint32_t BranchRing::intern(const Branch& b) {
  auto [it, fresh] = index_.try_emplace(b, static_cast<uint32_t>(dict_.size()));
  if (fresh) dict_.push_back(b);
  return it->second;
}

void BranchRing::push(uint64_t from, uint64_t to) {
  uint32_t id = intern(Branch{from, to});
  append_ids(&id, 1);
}

void BranchRing::push_many(std::span<const Branch> branches) {
  for (const Branch& b : branches) push(b.from, b.to);
}

void BranchRing::push_entries(std::span<const uint32_t> entries, std::span<const Branch> explicit_branches,
                              const std::function<Branch(uint32_t)>& fixed) {
  // Translated in place a chunk at a time, then appended like any ids.
  constexpr size_t kChunk = 4096;
  uint32_t ids[kChunk];
  for (size_t at = 0; at < entries.size();) {
    size_t n = std::min(kChunk, entries.size() - at);
    for (size_t i = 0; i < n; ++i) {
      uint32_t e = entries[at + i];
      if (e & kExplicit) {
        ids[i] = intern(explicit_branches[e & ~kExplicit]);
        continue;
      }
      if (e >= fixed_.size()) fixed_.resize(std::max<size_t>(e + 1, fixed_.size() * 2), 0);
      uint32_t& known = fixed_[e];
      if (!known) known = intern(fixed(e)) + 1;
      ids[i] = known - 1;
    }
    append_ids(ids, n);
    at += n;
  }
}

void BranchRing::append_ids(const uint32_t* ids, size_t n) {
  if (sealing()) {
    while (n) {
      if (ring_.size() == piece_) seal();
      if (ring_.capacity() < piece_) ring_.reserve(piece_);  // once: the open piece is reused
      size_t take = std::min(piece_ - ring_.size(), n);
      ring_.insert(ring_.end(), ids, ids + take);
      head_ += take;
      ids += take;
      n -= take;
    }
  } else {
    // The whole capacity at once (at most one piece: address space only, pages are touched
    // as branches arrive).
    size_t cap = capacity(), i = 0;
    if (ring_.size() < cap && n) {
      size_t take = std::min(cap - ring_.size(), n);
      if (ring_.capacity() < cap) ring_.reserve(cap);
      ring_.insert(ring_.end(), ids, ids + take);
      head_ += take;
      i = take;
    }
    if (i < n) {
      size_t at = head_ % cap;
      head_ += n - i;
      for (; i < n; ++i) {
        ring_[at] = ids[i];
        if (++at == cap) at = 0;
      }
    }
  }
  // Distinct branches keep coming (code generated at run time, a ring overwritten many times):
  // the dictionary is rebuilt from what the ring holds before it outgrows it.
  if (dict_.size() > 2 * stored() + 65536) compact();
}

namespace {

// Table slots: ids are dense from 0, so up to this many distinct branches predict without
// sharing a slot; the extra last slot is the context of a piece's first branch.
constexpr size_t kPredictSlots = size_t{1} << 16;
constexpr uint32_t kPredictMask = kPredictSlots - 1;

}  // namespace

BranchRing::Piece BranchRing::encode(const uint32_t* ids, size_t n, uint64_t first) {
  Piece p;
  p.first = first;
  p.count = n;
  p.hits.assign((n + 63) / 64, 0);
  predicted_.assign(kPredictSlots + 1, 0);  // id + 1 of what followed; 0: nothing yet
  if (misses_.size() < 4 * n + 4) misses_.resize(4 * n + 4);
  uint32_t* table = predicted_.data();
  uint8_t* m = misses_.data();
  uint32_t widest = 0;
  size_t context = kPredictSlots;
  // Without a branch on the outcome (a miss every few branches would be mispredicted): each
  // id is written as a miss and kept only when it was one; 64 outcomes a word.
  for (size_t word = 0; word * 64 < n; ++word) {
    size_t end = std::min(n, word * 64 + 64);
    uint64_t bits = 0;
    for (size_t i = word * 64; i < end; ++i) {
      uint32_t id = ids[i];
      uint32_t* slot = table + context;
      uint32_t miss = *slot != id + 1;
      *slot = id + 1;
      bits = bits >> 1 | uint64_t{1 - miss} << 63;
      std::memcpy(m, &id, 4);
      m += 4 * miss;
      widest |= id & (0u - miss);
      context = id & kPredictMask;
    }
    p.hits[word] = bits >> (64 - (end - word * 64));  // the first outcome in bit 0
  }
  // The misses narrowed to the bytes the widest needs.
  p.width = widest < (1u << 8) ? 1 : widest < (1u << 16) ? 2 : widest < (1u << 24) ? 3 : 4;
  size_t count = static_cast<size_t>(m - misses_.data()) / 4;
  p.misses.resize(count * p.width);
  for (size_t i = 0; i < count; ++i) std::memcpy(p.misses.data() + i * p.width, misses_.data() + 4 * i, p.width);
  return p;
}

void BranchRing::decode(const Piece& p, std::vector<uint32_t>& out) const {
  std::vector<uint32_t> table(kPredictSlots + 1, 0);
  out.resize(p.count);
  const uint8_t* m = p.misses.data();
  size_t context = kPredictSlots;
  for (size_t i = 0; i < p.count; ++i) {
    uint32_t id;
    if (p.hits[i >> 6] >> (i & 63) & 1) {
      id = table[context] - 1;
    } else {
      id = 0;
      std::memcpy(&id, m, p.width);  // little-endian
      m += p.width;
      table[context] = id + 1;
    }
    out[i] = id;
    context = id & kPredictMask;
  }
}

void BranchRing::seal() {
  pieces_.push_back(encode(ring_.data(), ring_.size(), head_ - ring_.size()));
  ring_.clear();
  drop_unstored_pieces();
}

void BranchRing::drop_unstored_pieces() {
  uint64_t oldest = head_ - stored();  // the oldest branch the ring keeps
  while (!pieces_.empty() && pieces_.front().first + pieces_.front().count <= oldest) pieces_.pop_front();
}

size_t BranchRing::stored_bytes() const {
  size_t bytes = ring_.size() * sizeof(uint32_t);
  for (const Piece& p : pieces_) bytes += p.hits.size() * sizeof(uint64_t) + p.misses.size();
  return bytes;
}

void BranchRing::compact() {
  std::vector<Branch> old = std::move(dict_);
  dict_.clear();
  index_.clear();
  fixed_.clear();
  if (sealing()) {
    // Rare (run-time code, histories overwritten many times): each piece decoded and sealed
    // again under the new numbering; pieces no longer stored go first.
    drop_unstored_pieces();
    std::vector<uint32_t> ids;
    for (Piece& p : pieces_) {
      decode(p, ids);
      for (uint32_t& id : ids) id = intern(old[id]);
      p = encode(ids.data(), ids.size(), p.first);
    }
  }
  for (uint32_t& id : ring_) id = intern(old[id]);
}

// The ids of the newest n branches (n <= what is stored), newest first.
std::vector<uint32_t> BranchRing::ids_newest_first(size_t n) const {
  std::vector<uint32_t> out;
  out.reserve(n);
  if (!sealing()) {
    size_t cap = capacity();
    for (size_t i = 0; i < n; ++i) out.push_back(ring_[(head_ - 1 - i) % cap]);
    return out;
  }
  for (size_t i = ring_.size(); i > 0 && out.size() < n; --i) out.push_back(ring_[i - 1]);
  std::vector<uint32_t> ids;
  for (auto p = pieces_.rbegin(); p != pieces_.rend() && out.size() < n; ++p) {
    decode(*p, ids);
    for (size_t i = ids.size(); i > 0 && out.size() < n; --i) out.push_back(ids[i - 1]);
  }
  return out;
}

std::vector<Branch> BranchRing::newest_first(size_t n) const {
  std::vector<Branch> out;
  out.reserve(n);
  for (uint32_t id : ids_newest_first(n)) out.push_back(dict_[id]);
  return out;
}

bool BranchRing::retarget_newest(const Branch& was, uint64_t to) {
  if (head_ == 0) {
    if (origin_ == 0 || origin_ != was.to) return false;
    origin_ = to;
  } else {
    uint32_t& id = sealing() ? ring_.back() : ring_[(head_ - 1) % capacity()];
    const Branch& b = dict_[id];
    if (b.from != was.from || b.to != was.to) return false;
    id = intern(Branch{was.from, to});
  }
  if (last_read_ == head_) reread_ = true;
  return true;
}

Result<std::vector<TraceBlock>> BranchRing::read(TraceRead kind, uint64_t current_pc) {
  size_t cap = capacity();
  bool reread = std::exchange(reread_, false);
  if (kind == TraceRead::Delta) {
    uint64_t fresh = head_ - last_read_;
    if (fresh > cap || reread) return Error{EOVERFLOW, "Overflow."};
    auto branches = newest_first(static_cast<size_t>(fresh));
    last_read_ = head_;
    return build_blocks(branches, current_pc, true);
  }
  if (kind == TraceRead::New && head_ == last_read_) return std::vector<TraceBlock>{};
  auto branches = newest_first(stored());
  last_read_ = head_;
  bool complete = origin_ != 0 && head_ <= cap;  // the oldest block's start is known
  auto blocks = build_blocks(branches, current_pc, complete);
  if (complete && !blocks.empty()) blocks.back().begin = origin_;
  return blocks;
}

std::vector<Branch> BranchRing::newest(size_t n) const {
  n = std::min(n, stored());
  auto out = newest_first(n);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace backend
