#include "backend/points/debug_registers.h"

#include <sys/ptrace.h>
#include <sys/user.h>

#include <cstddef>
#include <vector>

#include <fmt/format.h>

namespace backend {

namespace {

void* dr_offset(int n) {
  return reinterpret_cast<void*>(offsetof(struct user, u_debugreg) + sizeof(unsigned long) * static_cast<size_t>(n));
}

struct Piece { uint64_t addr, len; };

// Splits a region into naturally aligned pieces of 1, 2, 4 or 8 bytes (what one slot can watch).
std::vector<Piece> split(uint64_t addr, uint64_t len) {
  std::vector<Piece> out;
  while (len > 0) {
    uint64_t size = 8;
    while (size > 1 && ((addr % size) != 0 || size > len)) size /= 2;
    out.push_back({addr, size});
    addr += size;
    len -= size;
  }
  return out;
}

}  // namespace

bool DebugRegisters::empty() const {
  for (const auto& s : slots_)
    if (s.used) return false;
  return true;
}

bool DebugRegisters::contains(HwKind kind, uint64_t addr) const {
  for (const auto& s : slots_)
    if (s.used && s.kind == kind && s.region == addr) return true;
  return false;
}

Result<void> DebugRegisters::insert(HwKind kind, uint64_t addr, uint64_t len) {
  if (kind == HwKind::Execute) len = 1;  // GDB sends the instruction "kind"; DR7 uses len 1
  if (len == 0 || len > 32)
    return Error{EINVAL, fmt::format("Cannot watch {} bytes at {:#x}: length must be 1 to 32", len, addr)};
  // Same region again: share the slots.
  bool shared = false;
  for (auto& s : slots_)
    if (s.used && s.kind == kind && s.region == addr && s.region_len == len) {
      ++s.refs;
      shared = true;
    }
  if (shared) return {};
  auto pieces = split(addr, len);
  int free_slots = 0;
  for (const auto& s : slots_) free_slots += !s.used;
  if (static_cast<int>(pieces.size()) > free_slots)
    return Error{ENOSPC, fmt::format("No free hardware debug register for {:#x} ({} needed, {} free)", addr,
                                     pieces.size(), free_slots)};
  size_t next = 0;
  for (auto& s : slots_) {
    if (s.used || next == pieces.size()) continue;
    s = Slot{true, kind, pieces[next].addr, pieces[next].len, addr, len, 1};
    ++next;
  }
  return {};
}

Result<void> DebugRegisters::remove(HwKind kind, uint64_t addr, uint64_t len) {
  if (kind == HwKind::Execute) len = 1;
  bool found = false;
  for (auto& s : slots_)
    if (s.used && s.kind == kind && s.region == addr && s.region_len == len) {
      found = true;
      if (--s.refs == 0) s = Slot{};
    }
  if (!found) return Error{ENOENT, fmt::format("No hardware breakpoint or watchpoint at {:#x}", addr)};
  return {};
}

uint64_t DebugRegisters::dr7() const {
  uint64_t v = 0;
  for (int i = 0; i < kSlots; ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (!s.used) continue;
    // RW: 00 execute, 01 write, 11 read/write (x86 has no read-only watch).
    uint64_t rw = s.kind == HwKind::Execute ? 0 : s.kind == HwKind::Write ? 1 : 3;
    uint64_t lenbits = s.len == 1 ? 0 : s.len == 2 ? 1 : s.len == 8 ? 2 : 3;
    v |= 1ull << (2 * i);  // local enable
    v |= (rw | (lenbits << 2)) << (16 + 4 * i);
  }
  if (v) v |= 1ull << 8;  // LE, as gdbserver sets it
  return v;
}

Result<void> DebugRegisters::apply(pid_t tid) const {
  // DR7 off first: the kernel validates each address against the enabled slots.
  if (ptrace(PTRACE_POKEUSER, tid, dr_offset(7), nullptr) != 0)
    return errno_error(fmt::format("Cannot write DR7 of thread {}", tid));
  for (int i = 0; i < kSlots; ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (!s.used) continue;
    if (ptrace(PTRACE_POKEUSER, tid, dr_offset(i), reinterpret_cast<void*>(s.addr)) != 0)
      return errno_error(fmt::format("Cannot write DR{} of thread {}", i, tid));
  }
  uint64_t v = dr7();
  if (v && ptrace(PTRACE_POKEUSER, tid, dr_offset(7), reinterpret_cast<void*>(v)) != 0)
    return errno_error(fmt::format("Cannot write DR7 of thread {}", tid));
  // Status bits left from before (take_hit skips DR6 while no slot is used) must not look
  // like a hit of the slots just set.
  ptrace(PTRACE_POKEUSER, tid, dr_offset(6), nullptr);
  return {};
}

void DebugRegisters::clear_thread(pid_t tid) {
  ptrace(PTRACE_POKEUSER, tid, dr_offset(7), nullptr);
  ptrace(PTRACE_POKEUSER, tid, dr_offset(6), nullptr);
}

void DebugRegisters::clear_dr6(pid_t tid) { ptrace(PTRACE_POKEUSER, tid, dr_offset(6), nullptr); }

uint64_t DebugRegisters::read_dr6(pid_t tid) {
  errno = 0;
  long v = ptrace(PTRACE_PEEKUSER, tid, dr_offset(6), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

std::optional<HwHit> DebugRegisters::take_hit(pid_t tid) const {
  if (empty()) return std::nullopt;  // every trap asks: spare the PEEKUSER when nothing is set
  uint64_t dr6 = read_dr6(tid);
  std::optional<HwHit> hit;
  for (int i = 0; i < kSlots && !hit; ++i) {
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (s.used && (dr6 & (1ull << i))) hit = HwHit{s.kind, s.region};
  }
  if (dr6) ptrace(PTRACE_POKEUSER, tid, dr_offset(6), nullptr);
  return hit;
}

}  // namespace backend
