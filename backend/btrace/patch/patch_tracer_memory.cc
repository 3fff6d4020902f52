// PatchTracer: the memory view (original bytes for reads, a fork child, the client's writes).
#include "backend/btrace/patch/patch_tracer.h"

#include <sys/ptrace.h>
#include <sys/user.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/btrace/patch/patch_tracer_detail.h"

namespace backend {

void PatchTracer::restore_into(const ProcMemory& child) const {
  for (const auto& [addr, s] : sites_)
    if (s.installed == Installed::Patch) (void)child.write(s.begin, s.original);
  // Its one thread got the forking thread's gs base: the program's 0 again.
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, child.pid(), nullptr, &regs) != 0 || regs.gs_base == 0) return;
  bool ours = std::any_of(rings_.begin(), rings_.end(), [&](const auto& e) { return e.second.head_addr == regs.gs_base; });
  if (!ours) return;
  regs.gs_base = 0;
  ::ptrace(PTRACE_SETREGS, child.pid(), nullptr, &regs);
}

void PatchTracer::unshadow(uint64_t addr, std::span<uint8_t> buf) const {
  code_writes_.overlay(addr, buf);  // memory as it is about to be: a patch just taken out
  if (ranges_.empty() || buf.empty()) return;
  uint64_t end = addr + buf.size();
  auto it = ranges_.upper_bound(addr);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    const Site& s = sites_.at(it->second);
    for (uint64_t a = std::max(s.begin, addr); a < std::min(s.end, end); ++a) buf[a - addr] = s.original[a - s.begin];
  }
}

bool PatchTracer::read_code(uint64_t addr, std::span<uint8_t> out) {
  if (out.empty()) return true;
  const Region* r = region_of(addr);
  if (!r || r->writable || out.size() > r->hi - addr) return false;
  for (uint64_t at = addr, end = addr + out.size(); at < end;) {
    uint64_t page = at & ~(kPage - 1);
    auto it = code_pages_.find(page);
    if (it == code_pages_.end()) {
      std::vector<uint8_t> bytes(kPage);
      auto n = mem_.read(page, bytes);
      if (!n || *n != kPage) return false;
      breakpoints_.unshadow(page, bytes);
      unshadow(page, bytes);
      it = code_pages_.emplace(page, std::move(bytes)).first;
    }
    uint64_t n = std::min(end, page + kPage) - at;
    std::memcpy(out.data() + (at - addr), it->second.data() + (at - page), n);
    at += n;
  }
  return true;
}

void PatchTracer::invalidate(uint64_t addr, uint64_t len) {
  WriteBatch batch(*this);
  bool touches = false;
  for (const auto& r : regions_) touches = touches || (addr < r.hi && addr + len > r.lo);
  // The warm plan keeps what ran so far (the sites name its blocks, and forget_plans() drops
  // them), hashed over the bytes as they were: before the pages read for that are dropped.
  if (touches) learn_ran();
  if (len > 64 * kPage) code_pages_.clear();
  else
    for (uint64_t page = addr & ~(kPage - 1); page < addr + len; page += kPage) code_pages_.erase(page);
  if (!touches) return;
  forget_plans();
}

// Plans made from the old bytes are dropped (stubs stay allocated; the table and the inline
// caches are emptied so no stub trusts a target planned from them).
void PatchTracer::forget_plans() {
  for (auto& [a, s] : sites_) uninstall(s);
  for (auto& [start, t] : translations_) set_gate(start, false);  // old stubs may still lead there
  translations_.clear();
  exits_.clear();
  frontier_jumps_.clear();
  sites_.clear();
  site_starts_.clear();
  visited_.clear();
  ranges_.clear();
  clear_caches();
  if (ready_) {
    // Every slot the table used (the mask only grew), and its first size again.
    std::vector<uint8_t> zeros((uint64_t{table_mask_} + 1) * 8, 0);
    area_write(table_keys_, zeros);
    std::fill(table_.begin(), table_.end(), 0);
    table_used_ = stats_.table_targets = 0;
    table_mask_ = kTableFirstSlots - 1;
    write_table_mask();
  }
}

}  // namespace backend
