#include "backend/points/watch_emulator.h"

#include "backend/host/cpu_id.h"

#include <algorithm>

#include <fmt/format.h>

namespace backend {

namespace {

// Beyond this many decoded addresses the byte cache starts over (memory stays bounded).
constexpr size_t kMaxCachedInsns = 1u << 20;

bool overlaps(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len) { return a < b + b_len && b < a + a_len; }

bool kind_sees(HwKind kind, const MemAccess& access) {
  switch (kind) {
    case HwKind::Write: return access.write;
    case HwKind::Read: return access.read;
    case HwKind::Access: return access.read || access.write;
    case HwKind::Execute: return false;
  }
  return false;
}

}  // namespace

WatchEmulator::WatchEmulator() : decoder_(CpuQuirks{.segment_pop_reads_slot = amd_like(read_cpu_id())}) {}

Result<void> WatchEmulator::insert(HwKind kind, uint64_t addr, uint64_t len) {
  if (auto r = slots_.insert(kind, addr, len); !r) return r;
  if (kind == HwKind::Execute) return {};  // a slot only: the int3 is the caller's
  for (auto& region : regions_)
    if (region.kind == kind && region.addr == addr && region.len == len) {
      ++region.refs;
      return {};
    }
  regions_.push_back(Region{kind, addr, len, 1});
  return {};
}

Result<void> WatchEmulator::remove(HwKind kind, uint64_t addr, uint64_t len) {
  if (kind == HwKind::Execute) return slots_.remove(kind, addr, len);
  auto it = std::find_if(regions_.begin(), regions_.end(), [&](const Region& r) {
    return r.kind == kind && r.addr == addr && r.len == len;
  });
  if (it == regions_.end()) return Error{ENOENT, fmt::format("No watchpoint at {:#x}", addr)};
  (void)slots_.remove(kind, addr, len);
  if (--it->refs == 0) regions_.erase(it);
  return {};
}

std::vector<WatchedRange> WatchEmulator::ranges() const {
  std::vector<WatchedRange> out;
  out.reserve(regions_.size());
  for (const auto& r : regions_) out.push_back(WatchedRange{r.kind, r.addr, r.len});
  return out;
}

void WatchEmulator::clear() {
  slots_.clear();
  regions_.clear();
  forget_code();
}

void WatchEmulator::invalidate_code(uint64_t addr, uint64_t len) {
  if (code_.empty()) return;
  decoder_.invalidate(addr, len);
  // An instruction starting up to 15 bytes before addr may cover the written bytes.
  for (auto it = code_.begin(); it != code_.end();)
    it = overlaps(it->first, it->second.size, addr, len) ? code_.erase(it) : std::next(it);
}

void WatchEmulator::forget_code() {
  code_.clear();
  decoder_.clear();
}

const WatchEmulator::Code& WatchEmulator::code_at(uint64_t pc, const Reader& read) {
  auto it = code_.find(pc);
  if (it != code_.end()) return it->second;
  if (code_.size() >= kMaxCachedInsns) forget_code();
  Code c;
  // Near the end of a mapping fewer than 16 bytes are readable: take what is there.
  for (size_t n = c.bytes.size(); n > 0; n /= 2)
    if (read(pc, std::span<uint8_t>(c.bytes.data(), n))) {
      c.size = static_cast<uint8_t>(n);
      break;
    }
  return code_.emplace(pc, c).first->second;
}

std::vector<std::vector<uint8_t>> WatchEmulator::snapshot(const Reader& read) const {
  std::vector<std::vector<uint8_t>> out;
  out.reserve(regions_.size());
  for (const auto& r : regions_) {
    std::vector<uint8_t> bytes(r.len);
    if (!read(r.addr, bytes)) bytes.clear();  // unreadable now: a later readable value counts as a change
    out.push_back(std::move(bytes));
  }
  return out;
}

WatchEmulator::Step WatchEmulator::prepare(const user_regs_struct& regs, bool exact_allowed, const Reader& read) {
  Step step;
  if (exact_allowed) {
    const Code& code = code_at(regs.rip, read);
    InsnAccesses a = decoder_.decode(std::span<const uint8_t>(code.bytes.data(), code.size), regs);
    if (a.exact) {
      step.exact = true;
      step.accesses = std::move(a.accesses);
      return step;
    }
  }
  step.snapshots = snapshot(read);
  return step;
}

bool WatchEmulator::touches(const MemAccess& access) const {
  for (const auto& r : regions_)
    if (kind_sees(r.kind, access) && overlaps(access.addr, access.size, r.addr, r.len)) return true;
  return false;
}

RunAhead WatchEmulator::run_ahead(const user_regs_struct& regs, const CodeBytesReader& read) {
  return decoder_.run_ahead(regs, read, [this](const MemAccess& a) { return touches(a); });
}

std::optional<WatchHit> WatchEmulator::check(const Step& step, const Reader& read) const {
  if (step.exact) {
    for (const auto& r : regions_)
      for (const auto& access : step.accesses)
        if (kind_sees(r.kind, access) && overlaps(access.addr, access.size, r.addr, r.len))
          return WatchHit{r.kind, r.addr};
    return std::nullopt;
  }
  // Inexact: only a change of the watched bytes is seen (reads cannot be), as a write.
  auto now = snapshot(read);
  for (size_t i = 0; i < regions_.size() && i < step.snapshots.size(); ++i) {
    const Region& r = regions_[i];
    if (r.kind == HwKind::Read) continue;
    if (now[i] != step.snapshots[i]) return WatchHit{r.kind, r.addr};
  }
  return std::nullopt;
}

}  // namespace backend
