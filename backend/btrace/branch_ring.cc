// BranchRing: the software/LBR sources' history, read the way gdbserver reads a BTS buffer.
#include "backend/btrace/branch_ring.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
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

BranchRing::BranchRing(uint64_t size_bytes)
    : size_bytes_(size_bytes), capacity_(static_cast<size_t>(std::max<uint64_t>(1, size_bytes / kBytesPerBranch))) {}

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
  // The vector grows only as branches arrive: a huge configured size costs memory only once
  // that much history exists.
  size_t cap = capacity(), i = 0;
  if (ring_.size() < cap && n) {
    size_t take = std::min(cap - ring_.size(), n);
    if (ring_.size() + take > ring_.capacity()) {
      // The whole capacity at once where it is modest (address space only: pages are touched
      // as branches arrive), else 4x at a time: few or no copies of a history of millions.
      constexpr size_t kReserveAll = (size_t{1} << 30) / sizeof(uint32_t);
      size_t want = cap <= kReserveAll ? cap : std::max(ring_.size() + take, ring_.capacity() * 4);
      ring_.reserve(std::min(cap, want));
    }
#ifdef MADV_POPULATE_WRITE
    // Fault in the pages this batch fills with one call instead of one fault every 1024 branches.
    if (take >= 4096) {
      constexpr uintptr_t kPage = 4096;
      auto b = (reinterpret_cast<uintptr_t>(ring_.data() + ring_.size()) + kPage - 1) & ~(kPage - 1);
      auto e = reinterpret_cast<uintptr_t>(ring_.data() + ring_.size() + take) & ~(kPage - 1);
      if (e > b) (void)::madvise(reinterpret_cast<void*>(b), e - b, MADV_POPULATE_WRITE);
    }
#endif
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
  // Distinct branches keep coming (code generated at run time, a ring overwritten many times):
  // the dictionary is rebuilt from what the ring holds before it outgrows it.
  if (dict_.size() > 2 * ring_.size() + 65536) compact();
}

void BranchRing::compact() {
  std::vector<Branch> old = std::move(dict_);
  dict_.clear();
  index_.clear();
  fixed_.clear();
  for (uint32_t& id : ring_) id = intern(old[id]);
}

// The newest n branches (n <= what is stored), newest first.
static std::vector<Branch> newest_first(const std::vector<uint32_t>& ring, const std::vector<Branch>& dict,
                                        uint64_t head, size_t cap, size_t n) {
  std::vector<Branch> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(dict[ring[(head - 1 - i) % cap]]);
  return out;
}

bool BranchRing::retarget_newest(const Branch& was, uint64_t to) {
  if (head_ == 0) {
    if (origin_ == 0 || origin_ != was.to) return false;
    origin_ = to;
  } else {
    uint32_t& id = ring_[(head_ - 1) % capacity()];
    const Branch& b = dict_[id];
    if (b.from != was.from || b.to != was.to) return false;
    id = intern(Branch{was.from, to});
  }
  if (last_read_ == head_) reread_ = true;
  return true;
}

Result<std::vector<TraceBlock>> BranchRing::read(TraceRead kind, uint64_t current_pc) {
  size_t cap = capacity();
  size_t stored = static_cast<size_t>(std::min<uint64_t>(head_, cap));
  bool reread = std::exchange(reread_, false);
  if (kind == TraceRead::Delta) {
    uint64_t fresh = head_ - last_read_;
    if (fresh > cap || reread) return Error{EOVERFLOW, "Overflow."};
    auto branches = newest_first(ring_, dict_, head_, cap, static_cast<size_t>(fresh));
    last_read_ = head_;
    return build_blocks(branches, current_pc, true);
  }
  if (kind == TraceRead::New && head_ == last_read_) return std::vector<TraceBlock>{};
  auto branches = newest_first(ring_, dict_, head_, cap, stored);
  last_read_ = head_;
  bool complete = origin_ != 0 && head_ <= cap;  // the oldest block's start is known
  auto blocks = build_blocks(branches, current_pc, complete);
  if (complete && !blocks.empty()) blocks.back().begin = origin_;
  return blocks;
}

std::vector<Branch> BranchRing::newest(size_t n) const {
  size_t cap = capacity();
  n = std::min<size_t>(n, static_cast<size_t>(std::min<uint64_t>(head_, cap)));
  auto out = newest_first(ring_, dict_, head_, cap, n);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace backend
