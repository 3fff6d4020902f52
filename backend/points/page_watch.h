// Emulated watchpoints by page protection, for replays. Where the debug registers do not trap,
// a watched program otherwise runs as checked steps: a stop for every straight-line run. In a
// replay almost nothing but the program itself writes its memory (system calls are emulated,
// their results put there by the server, which checks them against the watchpoints), so the
// pages holding the watched bytes can be protected instead: the program runs at full speed and
// only an access to those pages stops it (SIGSEGV), where one checked step decides whether the
// access was a hit. This file holds the pure decisions: which pages, with what protection, and
// which system calls the kernel must run with the pages open again.
#pragma once

#include <cstdint>
#include <span>

#include "backend/error.h"
#include "backend/memory_region.h"
#include "backend/points/watch_emulator.h"

namespace backend {

struct PageProtection {
  uint64_t lo = 0, hi = 0;  // page-aligned [lo, hi), inside one mapping
  int original = 0;         // PROT_* of that mapping
  int protect = 0;          // PROT_* while armed: no write; nothing at all for read/access regions
  bool operator==(const PageProtection&) const = default;
  bool contains(uint64_t addr) const { return addr >= lo && addr < hi; }
  // A read-only mapping watched for writes needs no mprotect: nothing in user space writes it.
  bool changes() const { return original != protect; }
};

// At most this many pages are protected (regions far apart would protect the pages between).
inline constexpr uint64_t kMaxProtectedPages = 16;

// What to protect so that every access the ranges watch faults, or why they cannot be watched
// so: not mapped, more than one mapping, the stack (sp's mapping: written at every call),
// code, or a special mapping ([vdso], [vvar], [vsyscall]).
Result<PageProtection> plan_page_protection(std::span<const WatchedRange> ranges,
                                            std::span<const MemoryRegion> maps, uint64_t sp);

// May system call `nr`, run by the kernel for real with these arguments, write the protected
// pages or change their mapping (the kernel's own writes fail with EFAULT instead of faulting
// into the server)? Conservative: any argument pointing at or up to a page below them, any
// mapping call over them, any call that makes a child (which would inherit the protection).
bool syscall_may_touch(const PageProtection& p, long nr, std::span<const uint64_t, 6> args);

// mmap, munmap, mprotect, mremap, madvise, brk: the protection may need to be planned again.
bool syscall_changes_mappings(long nr);

}  // namespace backend
