#include "backend/points/software_breakpoints.h"

#include <fmt/format.h>

namespace backend {

namespace {
Result<void> write_byte(const ProcMemory& mem, uint64_t addr, uint8_t byte) {
  auto r = mem.write(addr, std::span<const uint8_t>(&byte, 1));
  if (!r) return r.error();
  return {};
}
}  // namespace

int& SoftwareBreakpoints::refs_of(Entry& e, BreakpointOwner owner) {
  switch (owner) {
    case BreakpointOwner::Client: return e.client_refs;
    case BreakpointOwner::ClientHardware: return e.hardware_refs;
    case BreakpointOwner::Tracepoint: return e.tracepoint_refs;
    case BreakpointOwner::Internal: break;
  }
  return e.internal_refs;
}

bool SoftwareBreakpoints::has_client(uint64_t addr) const {
  auto it = table_.find(addr);
  return it != table_.end() && it->second.client_refs + it->second.hardware_refs > 0;
}

bool SoftwareBreakpoints::any_client_in(uint64_t begin, uint64_t end) const {
  for (auto it = table_.lower_bound(begin); it != table_.end() && it->first < end; ++it)
    if (it->second.client_refs + it->second.hardware_refs > 0) return true;
  return false;
}

bool SoftwareBreakpoints::has(uint64_t addr, BreakpointOwner owner) const {
  auto it = table_.find(addr);
  if (it == table_.end()) return false;
  Entry e = it->second;
  return refs_of(e, owner) > 0;
}

bool SoftwareBreakpoints::client_is_hardware(uint64_t addr) const {
  auto it = table_.find(addr);
  return it != table_.end() && it->second.client_refs == 0 && it->second.hardware_refs > 0;
}

Result<void> SoftwareBreakpoints::insert(const ProcMemory& mem, uint64_t addr, BreakpointOwner owner) {
  auto it = table_.find(addr);
  if (it == table_.end()) {
    uint8_t original = 0;
    auto r = mem.read(addr, std::span<uint8_t>(&original, 1));
    if (!r) return Error{r.error().code, fmt::format("Cannot insert breakpoint at {:#x}: cannot read memory", addr)};
    // Lifted for a step still under way: the int3 goes in at lower().
    bool lifted = lifted_removed_.erase(addr) != 0;
    if (!lifted && !held_)
      if (auto w = write_byte(mem, addr, kInt3); !w)
        return Error{w.error().code, fmt::format("Cannot insert breakpoint at {:#x}: cannot write memory", addr)};
    Entry e{original};
    e.lifted = lifted;
    it = table_.emplace(addr, e).first;
    history_.insert(addr);
  }
  refs_of(it->second, owner)++;
  return {};
}

Result<void> SoftwareBreakpoints::remove(const ProcMemory& mem, uint64_t addr, BreakpointOwner owner) {
  auto it = table_.find(addr);
  if (it == table_.end()) return Error{ENOENT, fmt::format("No breakpoint at {:#x}", addr)};
  int& refs = refs_of(it->second, owner);
  if (refs == 0) return Error{ENOENT, fmt::format("No breakpoint at {:#x}", addr)};
  --refs;
  if (it->second.client_refs + it->second.hardware_refs + it->second.internal_refs + it->second.tracepoint_refs > 0)
    return {};
  Entry e = it->second;
  table_.erase(it);
  if (e.lifted) {
    lifted_removed_.insert(addr);
    return {};
  }
  if (held_) return {};  // the original byte is what memory holds
  if (auto w = write_byte(mem, addr, e.original); !w)
    return Error{w.error().code, fmt::format("Cannot remove breakpoint at {:#x}: {}", addr, w.error().message)};
  return {};
}

Result<void> SoftwareBreakpoints::lift(const ProcMemory& mem, uint64_t addr) {
  auto it = table_.find(addr);
  if (it == table_.end() || it->second.lifted) return {};
  if (!held_)
    if (auto w = write_byte(mem, addr, it->second.original); !w) return w;
  it->second.lifted = true;
  return {};
}

Result<void> SoftwareBreakpoints::lower(const ProcMemory& mem, uint64_t addr) {
  auto it = table_.find(addr);
  if (it == table_.end()) lifted_removed_.erase(addr);
  if (it == table_.end() || !it->second.lifted) return {};
  if (!held_)
    if (auto w = write_byte(mem, addr, kInt3); !w) return w;
  it->second.lifted = false;
  return {};
}

void SoftwareBreakpoints::unshadow(uint64_t addr, std::span<uint8_t> buf) const {
  for (auto it = table_.lower_bound(addr); it != table_.end() && it->first < addr + buf.size(); ++it)
    if (!it->second.lifted) buf[it->first - addr] = it->second.original;
}

void SoftwareBreakpoints::shadow_write(uint64_t addr, std::span<uint8_t> buf) {
  for (auto it = table_.lower_bound(addr); it != table_.end() && it->first < addr + buf.size(); ++it) {
    uint8_t& b = buf[it->first - addr];
    it->second.original = b;
    if (!it->second.lifted && !held_) b = kInt3;
  }
}

void SoftwareBreakpoints::restore_all(const ProcMemory& mem) {
  for (auto& [addr, e] : table_)
    if (!e.lifted) (void)write_byte(mem, addr, e.original);
  table_.clear();
  lifted_removed_.clear();
}

void SoftwareBreakpoints::restore_into(const ProcMemory& other) const {
  for (auto& [addr, e] : table_)
    if (!e.lifted) (void)write_byte(other, addr, e.original);
}

void SoftwareBreakpoints::reinsert_all(const ProcMemory& mem) const {
  for (auto& [addr, e] : table_)
    if (!e.lifted) (void)write_byte(mem, addr, kInt3);
}

}  // namespace backend
