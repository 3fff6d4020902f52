#include "backend/btrace/patch/area_writes.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include <sys/uio.h>

namespace backend::patch {

namespace {
// Two pending ranges closer than this are written as one (the bytes between come from the
// copy, which is exact): one write of a few more bytes costs less than two.
constexpr uint64_t kMergeGap = 256;
constexpr size_t kMaxIov = 1024;  // UIO_MAXIOV: the most one process_vm_writev takes
}  // namespace

void AreaWrites::add_area(uint64_t begin, uint64_t end, bool writable, SharedView view) {
  if (begin < end) areas_.push_back(Area{begin, end, writable, {}, std::move(view)});
}

uint8_t* AreaWrites::view_of(uint64_t addr, uint64_t len) {
  Area* a = area_of(addr, len);
  return a && a->view && a->end - a->begin <= a->view.size() ? a->view.data() + (addr - a->begin) : nullptr;
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
  if (uint8_t* to = view_of(addr, bytes.size())) {
    // The program may be running this very code (a frontier trap turned into a jmp, an exit
    // relinked, a table slot): aligned words in one store, and no store moved before another.
    if (bytes.size() == 8 && addr % 8 == 0) {
      uint64_t v;
      std::memcpy(&v, bytes.data(), 8);
      __atomic_store_n(reinterpret_cast<uint64_t*>(to), v, __ATOMIC_RELEASE);
    } else if (bytes.size() == 4 && addr % 4 == 0) {
      uint32_t v;
      std::memcpy(&v, bytes.data(), 4);
      __atomic_store_n(reinterpret_cast<uint32_t*>(to), v, __ATOMIC_RELEASE);
    } else {
      std::memcpy(to, bytes.data(), bytes.size());
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    return true;
  }
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
  // Ranges in writable areas (the table's slots, scattered by their hash) go together, up to
  // IOV_MAX at a time; the rest (read-only to the program) one /proc write each.
  std::vector<iovec> local, remote;
  auto send = [&] {
    if (local.empty()) return;
    size_t want = 0;
    for (const auto& v : local) want += v.iov_len;
    ssize_t n = ::process_vm_writev(mem.pid(), local.data(), local.size(), remote.data(), remote.size(), 0);
    if (n < 0 || static_cast<size_t>(n) != want)  // (not allowed here, or partly): one by one
      for (size_t i = 0; i < local.size(); ++i) {
        auto w = mem.write(reinterpret_cast<uint64_t>(remote[i].iov_base),
                           std::span<const uint8_t>(static_cast<const uint8_t*>(local[i].iov_base), local[i].iov_len));
        ok = ok && w && *w == local[i].iov_len;
      }
    local.clear();
    remote.clear();
  };
  for (const auto& [lo, hi] : dirty_) {
    Area* a = area_of(lo, hi - lo);
    if (!a) continue;
    uint64_t off = lo - a->begin;
    if (a->writable) {
      local.push_back(iovec{a->copy.data() + off, hi - lo});
      remote.push_back(iovec{reinterpret_cast<void*>(lo), hi - lo});
      if (local.size() == kMaxIov) send();
      continue;
    }
    auto n = mem.write(lo, std::span<const uint8_t>(a->copy.data() + off, hi - lo));
    ok = ok && n && *n == hi - lo;
  }
  send();
  dirty_.clear();
  return ok;
}

void CodeWrites::write(uint64_t addr, std::span<const uint8_t> bytes) {
  for (size_t i = 0; i < bytes.size();) {
    uint64_t at = addr + i, page = at & ~(kPage - 1), off = at - page;
    size_t n = std::min<size_t>(bytes.size() - i, kPage - off);
    Page& p = pages_[page];
    std::memcpy(p.bytes.data() + off, bytes.data() + i, n);
    for (size_t k = 0; k < n; ++k) p.set.set(off + k);
    p.lo = std::min(p.lo, off);
    p.hi = std::max<uint64_t>(p.hi, off + n);
    i += n;
  }
}

bool CodeWrites::overlaps(uint64_t addr, uint64_t len) const {
  for (uint64_t at = addr; at < addr + len; ++at) {
    auto it = pages_.find(at & ~(kPage - 1));
    if (it != pages_.end() && it->second.set.test(at & (kPage - 1))) return true;
  }
  return false;
}

void CodeWrites::drop(uint64_t lo, uint64_t hi) {
  for (auto it = pages_.lower_bound(lo & ~(kPage - 1)); it != pages_.end() && it->first < hi;) {
    Page& p = it->second;
    for (uint64_t off = p.lo; off < p.hi; ++off)
      if (it->first + off >= lo && it->first + off < hi) p.set.reset(off);
    it = p.set.none() ? pages_.erase(it) : std::next(it);
  }
}

void CodeWrites::overlay(uint64_t addr, std::span<uint8_t> buf) const {
  if (pages_.empty() || buf.empty()) return;
  uint64_t end = addr + buf.size();
  for (auto it = pages_.lower_bound(addr & ~(kPage - 1)); it != pages_.end() && it->first < end; ++it) {
    const Page& p = it->second;
    uint64_t lo = std::max(addr, it->first + p.lo), hi = std::min(end, it->first + p.hi);
    for (uint64_t a = lo; a < hi; ++a)
      if (p.set.test(a - it->first)) buf[a - addr] = p.bytes[a - it->first];
  }
}

bool CodeWrites::flush(const ProcMemory& mem) {
  bool ok = true;
  std::vector<uint8_t> buf;
  for (auto it = pages_.begin(); it != pages_.end();) {
    // A run of adjacent pages: [lo, hi) from the first written byte to the last.
    auto last = it;
    while (std::next(last) != pages_.end() && std::next(last)->first == last->first + kPage) ++last;
    uint64_t lo = it->first + it->second.lo, hi = last->first + last->second.hi;
    auto end = std::next(last);
    buf.resize(hi - lo);
    auto n = mem.read(lo, buf);
    if (n && *n == buf.size()) {
      overlay(lo, buf);
      auto w = mem.write(lo, buf);
      ok = ok && w && *w == buf.size();
    } else {
      // Part of the run unreadable: each written stretch on its own.
      for (auto p = it; p != end; ++p)
        for (uint64_t a = p->second.lo; a < p->second.hi;) {
          if (!p->second.set.test(a)) {
            ++a;
            continue;
          }
          uint64_t b = a;
          while (b < p->second.hi && p->second.set.test(b)) ++b;
          auto w = mem.write(p->first + a, std::span<const uint8_t>(p->second.bytes.data() + a, b - a));
          ok = ok && w && *w == b - a;
          a = b;
        }
    }
    it = end;
  }
  pages_.clear();
  return ok;
}

}  // namespace backend::patch
