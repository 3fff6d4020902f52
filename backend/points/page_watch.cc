#include "backend/points/page_watch.h"

#include <sys/mman.h>
#include <sys/syscall.h>

#include <algorithm>

#include <fmt/format.h>

namespace backend {

namespace {

constexpr uint64_t kPage = 4096;

bool overlaps(uint64_t a, uint64_t a_end, uint64_t b, uint64_t b_end) { return a < b_end && b < a_end; }

}  // namespace

Result<PageProtection> plan_page_protection(std::span<const WatchedRange> ranges,
                                            std::span<const MemoryRegion> maps, uint64_t sp) {
  if (ranges.empty()) return Error{EINVAL, "no watched region"};
  uint64_t lo = UINT64_MAX, hi = 0;
  bool reads = false;
  for (const auto& r : ranges) {
    if (r.len == 0 || r.addr + r.len < r.addr) return Error{EINVAL, "an empty or wrapping region"};
    lo = std::min(lo, r.addr & ~(kPage - 1));
    hi = std::max(hi, (r.addr + r.len + kPage - 1) & ~(kPage - 1));
    reads = reads || r.kind != HwKind::Write;
  }
  if ((hi - lo) / kPage > kMaxProtectedPages)
    return Error{E2BIG, fmt::format("the watched regions span {} pages", (hi - lo) / kPage)};
  auto m = std::find_if(maps.begin(), maps.end(), [&](const MemoryRegion& r) { return lo >= r.start && lo < r.end; });
  if (m == maps.end()) return Error{EFAULT, fmt::format("{:#x} is not mapped", lo)};
  if (hi > m->end) return Error{EXDEV, "the watched pages are in more than one mapping"};
  if (sp >= m->start && sp < m->end) return Error{EBUSY, "the watched pages are on the stack"};
  if (m->name == "[stack]" || m->name == "[vdso]" || m->name == "[vvar]" || m->name == "[vsyscall]")
    return Error{EPERM, fmt::format("the watched pages are in {}", m->name)};
  if (m->exec) return Error{EPERM, "the watched pages hold code"};
  // The server's own writes (a replayed call's results, the client's `set var`) go through
  // /proc/PID/mem, which writes a write-protected page only where it is private (copy on write).
  if (m->shared) return Error{EPERM, "the watched pages are a shared mapping"};
  if (!m->read) return Error{EACCES, "the watched pages are not readable"};
  PageProtection p;
  p.lo = lo;
  p.hi = hi;
  p.original = PROT_READ | (m->write ? PROT_WRITE : 0);
  p.protect = reads ? PROT_NONE : PROT_READ;
  return p;
}

bool syscall_changes_mappings(long nr) {
  return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mprotect || nr == SYS_mremap || nr == SYS_madvise ||
         nr == SYS_brk;
}

bool syscall_may_touch(const PageProtection& p, long nr, std::span<const uint64_t, 6> args) {
  // A structure the kernel writes may start below the pages and run into them.
  uint64_t below = p.lo >= kPage ? p.lo - kPage : 0;
  for (uint64_t a : args)
    if (a >= below && a < p.hi) return true;
  auto over = [&](uint64_t addr, uint64_t len) {
    uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;
    return overlaps(addr, end, p.lo, p.hi);
  };
  switch (nr) {
    case SYS_mmap:
    case SYS_munmap:
    case SYS_mprotect:
    case SYS_madvise:
      return over(args[0], args[1]);
    case SYS_mremap:
      return over(args[0], args[1]) || over(args[4], args[2]);
    case SYS_brk:
      return args[0] != 0 && args[0] < p.hi;  // the heap's end moved below them (or over them)
    case SYS_clone:
    case SYS_clone3:
    case SYS_fork:
    case SYS_vfork:
      return true;  // a child runs on its own (unrecorded): it must not inherit the protection
    default:
      return false;
  }
}

}  // namespace backend
