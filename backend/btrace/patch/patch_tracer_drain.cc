// PatchTracer: the drain (a thread's ring read into its history) and the inline caches of the
// dynamic stubs, moved to what the drains saw.
#include "backend/btrace/patch/patch_tracer.h"

#include <algorithm>
#include <cstring>

#include "backend/btrace/patch/patch_tracer_detail.h"

namespace backend {

size_t PatchTracer::drain(pid_t tid, Ring& r, PatchThread* t) {
  if (!ready_) return 0;
  drain_deferred();  // the older entries first
  flush_calls(tid, r, t);  // each buffered call where it came among the branches
  uint64_t head = head_of(r);
  if (head <= r.first || head > r.end) return 0;
  size_t used = 0;
  size_t count = drain_span(tid, r, t, r.first, head, used);
  // The head stays: a thread stopped inside a stub between reading it and writing it back
  // (an asynchronous stop) goes on with the value it read. Only a full ring (whose store is
  // made again from the start) and a thread at rest start the ring again (restart()).
  r.first += used;
  return count;
}

void PatchTracer::take_last(Ring& r, BranchCursor& cursor) {
  if (!r.last) return;
  cursor.block_start = r.last->to;
  cursor.last_flow = r.last->from;
  cursor.last_flow_taken = true;
  r.last.reset();
}

// A dynamic site's latest target: its inline cache moves there after the drain.
void PatchTracer::note_dynamic(uint32_t id, uint64_t stub, uint64_t to) {
  if (last_dynamic_.size() < edges_.size()) last_dynamic_.resize(edges_.size(), 0);
  uint32_t& at = last_dynamic_[id];
  if (at) {
    cache_moves_[at - 1].second = to;
  } else {
    cache_moves_.emplace_back(stub, to);
    cache_move_ids_.push_back(id);
    at = static_cast<uint32_t>(cache_moves_.size());
  }
}

void PatchTracer::drain_deferred() {
  while (deferred_) (void)drain_deferred_some(SIZE_MAX);
}

bool PatchTracer::drain_deferred_some(size_t max_bytes) {
  if (!deferred_) return false;
  if (max_bytes != SIZE_MAX) max_bytes = std::min<size_t>(max_bytes, std::max<size_t>(ring_bytes_ / 4, 64));  // a few pieces a ring
  Deferred& d = *deferred_;
  auto it = rings_.find(d.tid);
  if (it == rings_.end() || !ready_) {
    deferred_.reset();
    return false;
  }
  size_t used = 0;
  uint64_t until = d.head - d.first > max_bytes ? d.first + max_bytes : d.head;
  (void)drain_span(d.tid, it->second, nullptr, d.first, until, used);
  d.first += used;
  if (used == 0 && until != d.head) {
    // Nothing read (a dynamic entry cut by the limit): the rest at once, so that every call
    // makes progress.
    (void)drain_span(d.tid, it->second, nullptr, d.first, d.head, used);
    d.first += used;
  }
  if (d.first >= d.head || used == 0) deferred_.reset();
  return true;
}

namespace {

// A run of fixed (4-byte) entries from offset i, at most `max` of them, stopping before a
// dynamic entry or an id no stub writes: the drain's common case, in a loop of its own so
// that everything it touches stays in registers (in the whole loop the compiler kept the
// table, the bounds and the entry on the stack). Returns the offset after the run; counts
// the branches in it (an entry whose edge is no branch counts nothing), the newest in last.
size_t fixed_run(const uint8_t* buf, size_t i, size_t bytes, size_t max, uint8_t* flags, size_t nedges,
                 size_t& count, uint32_t& last, uint32_t* out) {
  size_t n = count;
  uint32_t newest = last;
  for (size_t left = max; left && i + 4 <= bytes; --left) {
    uint32_t word;
    __builtin_prefetch(buf + i + 1024);  // the lines another CPU wrote: ask for them early
    std::memcpy(&word, buf + i, 4);
    if (word >= nedges) break;  // the dynamic flag is bit 31: above every id
    i += 4;
    uint8_t f = flags[word];
    if (!(f & 1)) continue;                        // kEdgeTaken
    if (!(f & 2)) flags[word] = f | 2;             // kEdgeSeen: the warm plan learns what ran
    newest = word;
    if (out) out[n] = word;  // keep_all: out is indexed by the count (every fixed branch kept)
    ++n;
  }
  count = n;
  last = newest;
  return i;
}

}  // namespace

size_t PatchTracer::drain_span(pid_t tid, Ring& r, PatchThread* t, uint64_t first, uint64_t head, size_t& used) {
  used = 0;
  // A shared ring is read where it lies; another one copied first.
  const uint8_t* buf = r.view ? r.view + (first - r.head_addr) : nullptr;
  size_t bytes = head - first;
  if (!buf) {
    drain_buf_.resize(bytes);
    auto got = mem_.read(first, drain_buf_);
    if (!got) return 0;
    bytes = *got;
    buf = drain_buf_.data();
  }
  // Entry ids (4 bytes; with the dynamic flag, the 8-byte target follows). Only the newest
  // the history keeps are passed on (a 1 MiB BTS-sized history keeps 43,690 of the millions a
  // drain may bring); every entry moves the inline caches. The ring's entry ids go to the
  // history as they are (resolved through edges_ once per history); only a dynamic entry's
  // branch is spelled out. Locals only in the loops: a member written there is stored back at
  // every entry, as the compiler cannot tell it from the ring's bytes.
  const Edge* edges = edges_.data();
  uint8_t* flags = edge_flags_.data();
  const size_t nedges = edges_.size();
  const size_t kept = tracer_->branches_kept(tid);
  // A history that keeps more branches than this span can hold (a whole run kept) takes all
  // of it in one pass; else two: all entries for the inline caches and the count, then only
  // the newest the history keeps (one pass that keeps everything measured slower there).
  const bool keep_all = kept >= bytes / 4;
  const size_t most = keep_all ? bytes / 4 : std::min(kept, bytes / 4);
  if (entries_.size() < most) entries_.resize(most);
  uint32_t* out = entries_.data();
  size_t nout = 0;
  batch_.clear();
  size_t count = 0, end = 0;
  uint32_t last_word = 0;  // the newest branch: its entry word, and its target when dynamic
  uint64_t last_to = 0;
  // (offset, branches before it) every kMark entries: the second pass starts near the first
  // branch kept instead of walking the whole ring again.
  constexpr size_t kMark = 4096;
  size_t until_mark = 1;
  drain_marks_.clear();
  for (size_t i = 0; i + 4 <= bytes;) {
    if (!keep_all && --until_mark == 0) {
      drain_marks_.emplace_back(i, count);
      until_mark = kMark;
    }
    uint32_t word;
    std::memcpy(&word, buf + i, 4);
    if (!(word & patch::kDynamicEntry)) {
      if (word >= nedges) break;  // cannot happen: stubs only write ids we made
      // This entry and the fixed ones after it, up to the next mark.
      if (keep_all) {
        size_t kept_now = nout;  // out[] is indexed by what it holds (dynamic entries too)
        i = fixed_run(buf, i, bytes, bytes / 4, flags, nedges, kept_now, last_word, out);
        count += kept_now - nout;
        nout = kept_now;
      } else {
        size_t at = i;
        i = fixed_run(buf, i, bytes, until_mark, flags, nedges, count, last_word, nullptr);
        until_mark -= (i - at) / 4 - 1;  // the test above counted the run's first entry
      }
      end = i;
      continue;
    }
    uint32_t id = word & ~patch::kDynamicEntry;
    if (id >= nedges || i + 12 > bytes) break;
    const Edge& e = edges[id];
    uint64_t to;
    std::memcpy(&to, buf + i + 4, 8);
    i += 12;
    end = i;
    if (e.stub) note_dynamic(id, e.stub, to);
    if (to == e.from + e.len) continue;
    last_word = word;
    last_to = to;
    ++count;
    if (keep_all) {
      out[nout++] = BranchRing::kExplicit | static_cast<uint32_t>(batch_.size());
      batch_.push_back(Branch{e.from, to});
    }
  }
  Branch last;
  if (count) {
    const Edge& e = edges[last_word & ~patch::kDynamicEntry];
    last = Branch{e.from, (last_word & patch::kDynamicEntry) ? last_to : e.to};
  }
  if (!keep_all) {
    size_t skip = count - std::min(count, kept);
    size_t start = 0, before = 0;
    for (const auto& [at, n] : drain_marks_) {
      if (n > skip) break;
      start = at;
      before = n;
    }
    for (size_t i = start, n = before; i < end;) {
      uint32_t word;
      std::memcpy(&word, buf + i, 4);
      if (!(word & patch::kDynamicEntry)) {
        i += 4;
        if ((flags[word] & kEdgeTaken) && n++ >= skip) out[nout++] = word;
        continue;
      }
      const Edge& e = edges[word & ~patch::kDynamicEntry];
      uint64_t to;
      std::memcpy(&to, buf + i + 4, 8);
      i += 12;
      if (to == e.from + e.len || n++ < skip) continue;
      out[nout++] = BranchRing::kExplicit | static_cast<uint32_t>(batch_.size());
      batch_.push_back(Branch{e.from, to});
    }
  }
  tracer_->record_entries(tid, std::span<const uint32_t>(out, nout), batch_,
                         [this](uint32_t id) { return Branch{edges_[id].from, edges_[id].to}; });
  tracer_->record_count(tid, count, last);
  used = end;
  stats_.drained += count;
  if (count) {
    r.last = last;  // its cursor follows now, or when its PatchThread is at hand
    if (t) take_last(r, t->cursor);
  }
  return count;
}

// Each dynamic site that missed its inline cache since the last drain caches its latest
// target, when that target is instrumented (a hit jumps there directly). Never the stub a
// thread stands in (it may be between reading the target and the id); only while no thread
// runs (the 12 bytes are not one store).
void PatchTracer::update_caches() {
  if (cache_moves_.empty()) return;
  std::vector<uint64_t> pcs;
  for (const auto& [tid, r] : rings_) pcs.push_back(pc_of(tid));
  for (const auto& [base, target] : cache_moves_) {
    auto it = stubs_.find(base);
    if (it == stubs_.end() || !it->second.cache || it->second.cached == target) continue;
    StubInfo& info = it->second;
    if (std::any_of(pcs.begin(), pcs.end(), [&, b = base](uint64_t pc) { return pc >= b && pc < b + info.len; })) continue;
    if (!visited_.count(target)) continue;
    ran_targets_.push_back(target);
    auto [e, fresh] = cache_edges_.try_emplace({info.flow, target}, static_cast<uint32_t>(edges_.size()));
    if (fresh) add_edge(Edge{info.flow, target, info.flow_len, 0});
    uint8_t slot[patch::kCacheBytes] = {};
    uint64_t dest = destination(target);
    std::memcpy(slot, &target, 8);
    std::memcpy(slot + 8, &e->second, 4);
    std::memcpy(slot + 16, &dest, 8);
    if (area_write(base + *info.cache, slot)) {
      info.cached = target;
      cached_by_target_.emplace(target, base);
    }
  }
  for (uint32_t id : cache_move_ids_) last_dynamic_[id] = 0;
  cache_move_ids_.clear();
  cache_moves_.clear();
}

void PatchTracer::clear_caches() {
  cached_by_target_.clear();
  uint8_t zeros[patch::kCacheBytes] = {};
  for (auto& [base, info] : stubs_)
    if (info.cache && info.cached) {
      area_write(base + *info.cache, zeros);
      info.cached = 0;
    }
}

}  // namespace backend
