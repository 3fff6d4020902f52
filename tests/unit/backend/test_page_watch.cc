// plan_page_protection and syscall_may_touch (backend/points/page_watch.h): which pages a
// replay protects for emulated watchpoints, and which system calls run with them open.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/syscall.h>

#include <array>
#include <vector>

#include "backend/points/page_watch.h"

using backend::HwKind;
using backend::MemoryRegion;
using backend::PageProtection;
using backend::WatchedRange;

namespace {

std::vector<MemoryRegion> maps() {
  std::vector<MemoryRegion> m(5);
  m[0] = {0x400000, 0x401000, true, false, true, "/bin/prog"};
  m[1] = {0x404000, 0x408000, true, true, false, "/bin/prog"};  // .data and .bss
  m[2] = {0x7f0000000000, 0x7f0000010000, true, true, false, ""};
  m[2].shared = true;
  m[3] = {0x7ffffffde000, 0x7ffffffff000, true, true, false, "[stack]"};
  m[4] = {0x500000, 0x520000, true, false, false, "[heap]"};  // read-only for the test
  return m;
}

constexpr uint64_t kSp = 0x7fffffffe000;

}  // namespace

TEST_CASE("page watch: a write watch protects its page read-only", "[page_watch]") {
  std::vector<WatchedRange> r{{HwKind::Write, 0x404010, 8}};
  auto p = backend::plan_page_protection(r, maps(), kSp);
  REQUIRE(p);
  CHECK(p->lo == 0x404000);
  CHECK(p->hi == 0x405000);
  CHECK(p->original == (PROT_READ | PROT_WRITE));
  CHECK(p->protect == PROT_READ);
  CHECK(p->changes());
  CHECK(p->contains(0x404fff));
  CHECK_FALSE(p->contains(0x405000));
}

TEST_CASE("page watch: read and access watches take every access away", "[page_watch]") {
  std::vector<WatchedRange> r{{HwKind::Write, 0x404010, 8}, {HwKind::Access, 0x405ffc, 8}};
  auto p = backend::plan_page_protection(r, maps(), kSp);
  REQUIRE(p);
  CHECK(p->lo == 0x404000);
  CHECK(p->hi == 0x407000);  // the access watch straddles into a third page
  CHECK(p->protect == PROT_NONE);
}

TEST_CASE("page watch: what stays with checked steps, and why", "[page_watch]") {
  auto why = [](std::vector<WatchedRange> r, uint64_t sp = kSp) {
    auto p = backend::plan_page_protection(r, maps(), sp);
    REQUIRE_FALSE(p);
    return p.error().message;
  };
  CHECK(why({}) == "no watched region");
  CHECK(why({{HwKind::Write, 0x600000, 8}}) == "0x600000 is not mapped");
  CHECK(why({{HwKind::Write, 0x7fffffffd000, 8}}) == "the watched pages are on the stack");
  CHECK(why({{HwKind::Write, 0x404010, 8}}, 0x404800) == "the watched pages are on the stack");  // sp moved there
  CHECK(why({{HwKind::Write, 0x400010, 8}}) == "the watched pages hold code");
  CHECK(why({{HwKind::Write, 0x7f0000000010, 8}}) == "the watched pages are a shared mapping");
  CHECK(why({{HwKind::Write, 0x407ff8, 16}}) == "the watched pages are in more than one mapping");
  CHECK(why({{HwKind::Write, 0x500000, 8}, {HwKind::Write, 0x51f000, 8}}) == "the watched regions span 32 pages");
}

TEST_CASE("page watch: a read-only mapping watched for writes needs no mprotect", "[page_watch]") {
  std::vector<WatchedRange> r{{HwKind::Write, 0x500100, 4}};
  auto p = backend::plan_page_protection(r, maps(), kSp);
  REQUIRE(p);
  CHECK(p->original == PROT_READ);
  CHECK_FALSE(p->changes());
}

TEST_CASE("page watch: the system calls that run with the pages open", "[page_watch]") {
  PageProtection p{0x404000, 0x405000, PROT_READ | PROT_WRITE, PROT_READ};
  auto touches = [&](long nr, std::array<uint64_t, 6> a) { return backend::syscall_may_touch(p, nr, a); };
  // A pointer into the pages, or just below them (a structure that runs into them).
  CHECK(touches(SYS_rt_sigaction, {14, 0x7ffe0000, 0x404020, 8, 0, 0}));
  CHECK(touches(SYS_pipe2, {0x403ff8, 0, 0, 0, 0, 0}));
  CHECK_FALSE(touches(SYS_rt_sigaction, {14, 0x7ffe0000, 0x7ffe0100, 8, 0, 0}));
  CHECK_FALSE(touches(SYS_close, {3, 0, 0, 0, 0, 0}));
  // Mapping calls over them (the start below them, the length reaching in).
  CHECK(touches(SYS_munmap, {0x400000, 0x5000, 0, 0, 0, 0}));
  CHECK(touches(SYS_mprotect, {0x300000, 0x105000, PROT_READ, 0, 0, 0}));
  CHECK_FALSE(touches(SYS_munmap, {0x300000, 0x1000, 0, 0, 0, 0}));
  CHECK(touches(SYS_mremap, {0x200000, 0x1000, 0x1000, 3, 0x404000, 0}));  // moved onto them
  CHECK_FALSE(touches(SYS_mremap, {0x200000, 0x1000, 0x2000, 3, 0x300000, 0}));
  CHECK(touches(SYS_brk, {0x402000, 0, 0, 0, 0, 0}));  // the heap's end below them
  CHECK_FALSE(touches(SYS_brk, {0, 0, 0, 0, 0, 0}));
  CHECK_FALSE(touches(SYS_brk, {0x600000, 0, 0, 0, 0, 0}));
  CHECK(touches(SYS_clone, {0x1200011, 0, 0, 0, 0, 0}));  // a fork's child runs unprotected
  CHECK(touches(SYS_vfork, {0, 0, 0, 0, 0, 0}));
  CHECK(backend::syscall_changes_mappings(SYS_mmap));
  CHECK_FALSE(backend::syscall_changes_mappings(SYS_read));
}
