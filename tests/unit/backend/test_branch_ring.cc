// BranchRing: capacity, all/new/delta semantics (GDB's qXfer:btrace:read annexes), overflow, wrap-around.
#include <catch2/catch.hpp>

#include <vector>

#include "backend/btrace/blocks.h"
#include "backend/btrace/branch_ring.h"
#include "tests/unit/backend/trace_blocks_util.h"

using namespace backend;


TEST_CASE("blocks: built newest first, partial block only when asked", "[btrace]") {
  std::vector<Branch> br = {{0x130, 0x200}, {0x110, 0x120}};  // newest first
  CHECK(flat(build_blocks(br, 0x210, true)) == Blocks{{0x200, 0x210}, {0x120, 0x130}, {0, 0x110}});
  CHECK(flat(build_blocks(br, 0x210, false)) == Blocks{{0x200, 0x210}, {0x120, 0x130}});
  CHECK(flat(build_blocks({}, 0x210, true)) == Blocks{{0, 0x210}});
  CHECK(build_blocks({}, 0x210, false).empty());
}

TEST_CASE("BTS buffer sizes: whole pages, a power of two of them", "[btrace]") {
  CHECK(bts_buffer_bytes(1, 4096) == 4096);  // gdb.btrace/buffer-size.exp: "Buffer size: 4kB."
  CHECK(bts_buffer_bytes(0, 4096) == 4096);
  CHECK(bts_buffer_bytes(4096, 4096) == 4096);
  CHECK(bts_buffer_bytes(4097, 4096) == 8192);
  CHECK(bts_buffer_bytes(3 * 4096, 4096) == 4 * 4096);
  CHECK(bts_buffer_bytes(5 * 4096 + 1, 4096) == 8 * 4096);
  CHECK(bts_buffer_bytes(0x10000, 4096) == 0x10000);  // GDB's default stays as it is
  CHECK(bts_buffer_bytes(100, 0x10000) == 0x10000);   // 64 KiB pages
  CHECK(bts_buffer_bytes(UINT64_MAX / 2, 4096) == (uint64_t{1} << 30) * 4096);  // capped
}

TEST_CASE("branch ring: capacity and size", "[btrace]") {
  CHECK(BranchRing(0).capacity() == 1);
  CHECK(BranchRing(23).capacity() == 1);
  CHECK(BranchRing(48).capacity() == 2);
  CHECK(BranchRing(0x10000).capacity() == 0x10000 / 24);
  CHECK(BranchRing(0x10000).size_bytes() == 0x10000);
  // A huge request is accepted without allocating it up front (the test would run out of
  // memory otherwise on small machines).
  BranchRing huge(uint64_t{1} << 40);
  huge.push(1, 2);
  CHECK(huge.total() == 1);
  CHECK(huge.capacity() == (uint64_t{1} << 40) / 24);
}

TEST_CASE("branch ring: delta, new and all", "[btrace]") {
  BranchRing ring(24 * 100);
  // Nothing happened yet.
  CHECK(flat(*ring.read(TraceRead::Delta, 0x100)) == Blocks{{0, 0x100}});
  CHECK(ring.read(TraceRead::New, 0x100)->empty());
  CHECK(ring.read(TraceRead::All, 0x100)->empty());

  ring.push(0x105, 0x200);  // jmp at 0x105 -> 0x200
  ring.push(0x20a, 0x300);
  CHECK(ring.total() == 2);
  CHECK(flat(*ring.read(TraceRead::Delta, 0x304)) == Blocks{{0x300, 0x304}, {0x200, 0x20a}, {0, 0x105}});
  // Second delta with nothing new: just {0, pc}.
  CHECK(flat(*ring.read(TraceRead::Delta, 0x304)) == Blocks{{0, 0x304}});
  CHECK(ring.read(TraceRead::New, 0x304)->empty());
  // All still returns everything, without the partial block.
  CHECK(flat(*ring.read(TraceRead::All, 0x304)) == Blocks{{0x300, 0x304}, {0x200, 0x20a}});

  ring.push(0x310, 0x400);
  CHECK(flat(*ring.read(TraceRead::New, 0x408)) == Blocks{{0x400, 0x408}, {0x300, 0x310}, {0x200, 0x20a}});
  CHECK(ring.read(TraceRead::New, 0x408)->empty());  // New updated last-read
  ring.push(0x410, 0x500);
  CHECK(flat(*ring.read(TraceRead::Delta, 0x501)) == Blocks{{0x500, 0x501}, {0, 0x410}});

  auto h = ring.newest(2);
  REQUIRE(h.size() == 2);
  CHECK(h[0].from == 0x310);  // oldest first
  CHECK(h[1].from == 0x410);
  CHECK(ring.newest(100).size() == 4);
}

TEST_CASE("branch ring: wrap-around keeps the newest capacity branches", "[btrace]") {
  BranchRing ring(24 * 3);
  for (uint64_t i = 1; i <= 7; ++i) ring.push(i * 0x100 + 0x10, (i + 1) * 0x100);
  // Branches 5, 6, 7 remain: (0x510->0x600), (0x610->0x700), (0x710->0x800).
  CHECK(flat(*ring.read(TraceRead::All, 0x808)) == Blocks{{0x800, 0x808}, {0x700, 0x710}, {0x600, 0x610}});
  auto h = ring.newest(10);
  REQUIRE(h.size() == 3);
  CHECK(h[0].from == 0x510);
  CHECK(h[2].to == 0x800);
  // Exactly capacity new branches since the last read: still a delta.
  for (uint64_t i = 8; i <= 10; ++i) ring.push(i * 0x100 + 0x10, (i + 1) * 0x100);
  CHECK(flat(*ring.read(TraceRead::Delta, 0xb00)) ==
        Blocks{{0xb00, 0xb00}, {0xa00, 0xa10}, {0x900, 0x910}, {0, 0x810}});
}

TEST_CASE("branch ring: delta overflow", "[btrace]") {
  BranchRing ring(24 * 2);
  ring.push(0x10, 0x20);
  ring.push(0x30, 0x40);
  ring.push(0x50, 0x60);
  auto d = ring.read(TraceRead::Delta, 0x61);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == EOVERFLOW);
  CHECK(d.error().message == "Overflow.");
  // GDB then asks for `new`: the whole ring, and the read position moves.
  CHECK(flat(*ring.read(TraceRead::New, 0x61)) == Blocks{{0x60, 0x61}, {0x40, 0x50}});
  CHECK(flat(*ring.read(TraceRead::Delta, 0x61)) == Blocks{{0, 0x61}});
  // Capacity one: a single new branch is fine, two overflow.
  BranchRing one(1);
  one.push(1, 2);
  CHECK(one.read(TraceRead::Delta, 3).ok());
  one.push(3, 4);
  one.push(5, 6);
  CHECK(one.read(TraceRead::Delta, 7).error().code == EOVERFLOW);
  CHECK(flat(*one.read(TraceRead::All, 7)) == Blocks{{6, 7}});
}

TEST_CASE("with a known origin and no overwrite, all keeps the oldest block") {
  backend::BranchRing ring(24 * 8);
  ring.set_origin(0x100);
  ring.push(0x110, 0x200);
  auto blocks = ring.read(backend::TraceRead::All, 0x208);
  REQUIRE(blocks.ok());
  REQUIRE(blocks->size() == 2);
  CHECK((*blocks)[0].begin == 0x200);
  CHECK((*blocks)[0].end == 0x208);
  CHECK((*blocks)[1].begin == 0x100);
  CHECK((*blocks)[1].end == 0x110);
  for (int i = 0; i < 20; ++i) ring.push(0x300 + i, 0x400 + i);  // overwrites: origin unknown again
  auto wrapped = ring.read(backend::TraceRead::All, 0x500);
  REQUIRE(wrapped.ok());
  for (const auto& b : *wrapped) CHECK(b.begin != 0x100);
}

TEST_CASE("push_many keeps what push keeps, across the wrap", "[btrace]") {
  // 10 branches of room; batches of 3, 4 and 9 fill it, wrap, and overwrite the oldest
  BranchRing one(10 * BranchRing::kBytesPerBranch), many(10 * BranchRing::kBytesPerBranch);
  std::vector<Branch> all;
  for (uint64_t i = 1; i <= 16; ++i) all.push_back(Branch{0x1000 + 16 * i, 0x2000 + 16 * i});
  for (const Branch& b : all) one.push(b.from, b.to);
  many.push_many(std::span<const Branch>(all).subspan(0, 3));
  many.push_many(std::span<const Branch>(all).subspan(3, 4));
  many.push_many(std::span<const Branch>(all).subspan(7, 9));
  many.push_many({});
  CHECK(many.total() == one.total());
  auto a = one.newest(10), b = many.newest(10);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].from == b[i].from);
    CHECK(a[i].to == b[i].to);
  }
  CHECK(b.back().from == all.back().from);
}

namespace {
bool same(const std::vector<Branch>& a, const std::vector<Branch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].from != b[i].from || a[i].to != b[i].to) return false;
  return true;
}
}  // namespace

TEST_CASE("push_entries: the caller's ids and explicit branches keep what push keeps", "[btrace]") {
  // The block-patching drain: ids of fixed edges (resolved once per ring), explicit branches
  // for dynamic targets, in one order; across the wrap of a 10-branch ring.
  const std::vector<Branch> edges = {{0x100, 0x200}, {0x210, 0x100}, {0x300, 0x400}};
  int lookups = 0;
  auto fixed = [&](uint32_t id) {
    ++lookups;
    return edges.at(id);
  };
  BranchRing one(10 * BranchRing::kBytesPerBranch), ids(10 * BranchRing::kBytesPerBranch);
  std::vector<uint32_t> entries;
  std::vector<Branch> explicit_branches;
  for (uint32_t i = 0; i < 17; ++i) {
    if (i % 4 == 3) {
      Branch b{0x500 + i, 0x600 + i};
      entries.push_back(BranchRing::kExplicit | static_cast<uint32_t>(explicit_branches.size()));
      explicit_branches.push_back(b);
      one.push(b.from, b.to);
    } else {
      entries.push_back(i % 3);
      one.push(edges[i % 3].from, edges[i % 3].to);
    }
  }
  ids.push_entries(std::span<const uint32_t>(entries).subspan(0, 5), explicit_branches, fixed);
  ids.push_entries(std::span<const uint32_t>(entries).subspan(5), explicit_branches, fixed);
  CHECK(ids.total() == one.total());
  CHECK(same(ids.newest(10), one.newest(10)));
  CHECK(lookups == 3);  // each fixed id once
  auto blocks_one = one.read(TraceRead::All, 0x700), blocks_ids = ids.read(TraceRead::All, 0x700);
  REQUIRE(blocks_one.ok());
  REQUIRE(blocks_ids.ok());
  CHECK(flat(*blocks_one) == flat(*blocks_ids));

  SECTION("forget_fixed: a new numbering is resolved anew") {
    ids.forget_fixed();
    const std::vector<Branch> renumbered = {{0x900, 0x910}};
    ids.push_entries(std::vector<uint32_t>{0}, {}, [&](uint32_t id) { return renumbered.at(id); });
    auto last = ids.newest(1);
    REQUIRE(last.size() == 1);
    CHECK(last[0].from == 0x900);
  }
}

TEST_CASE("branch ring: the dictionary of distinct branches stays bounded by what the ring holds", "[btrace]") {
  // Branches that never repeat (code generated at run time): the ring keeps 100 of them, the
  // dictionary is rebuilt from those before it grows without bound; the history is unchanged.
  BranchRing ring(100 * BranchRing::kBytesPerBranch);
  std::vector<uint32_t> fixed_ids{0};
  for (uint64_t i = 0; i < 200000; ++i) {
    ring.push(0x10000 + i, 0x20000 + i);
    if (i % 1000 == 0) ring.push_entries(fixed_ids, {}, [](uint32_t) { return Branch{0x1, 0x2}; });
  }
  CHECK(ring.distinct() <= 2 * 100 + 65536 + 1);
  auto last = ring.newest(3);
  REQUIRE(last.size() == 3);
  CHECK(last[0].from == 0x10000 + 199997);
  CHECK(last[1].from == 0x10000 + 199998);
  CHECK(last[2].from == 0x10000 + 199999);
  CHECK(last[2].to == 0x20000 + 199999);
}

TEST_CASE("branch ring: a signal right after a branch takes that branch's target", "[btrace]") {
  BranchRing ring(24 * 8);
  ring.push(0x105, 0x200);
  ring.push(0x20a, 0x100);  // the loop's branch back; the signal comes before 0x100 runs
  CHECK_FALSE(ring.retarget_newest(Branch{0x105, 0x200}, 0x800));  // not the newest
  CHECK_FALSE(ring.retarget_newest(Branch{0x20a, 0x101}, 0x800));
  REQUIRE(ring.retarget_newest(Branch{0x20a, 0x100}, 0x800));  // 0x800: the handler
  ring.push(0x810, 0x900);  // the handler's ret to the restorer
  ring.push(0x905, 0x100);  // sigreturn back where the signal came
  CHECK(ring.total() == 4);  // no branch more
  // No empty block at 0x100 before the handler (that would show 0x100 run twice).
  CHECK(flat(*ring.read(TraceRead::All, 0x104)) ==
        Blocks{{0x100, 0x104}, {0x900, 0x905}, {0x800, 0x810}, {0x200, 0x20a}});
}

TEST_CASE("branch ring: a changed branch the client read makes its next delta an overflow", "[btrace]") {
  BranchRing ring(24 * 8);
  ring.push(0x20a, 0x100);
  CHECK(flat(*ring.read(TraceRead::Delta, 0x100)) == Blocks{{0x100, 0x100}, {0, 0x20a}});
  REQUIRE(ring.retarget_newest(Branch{0x20a, 0x100}, 0x800));
  ring.push(0x810, 0x100);
  CHECK(ring.read(TraceRead::Delta, 0x104).error().message == "Overflow.");
  CHECK(flat(*ring.read(TraceRead::New, 0x104)) == Blocks{{0x100, 0x104}, {0x800, 0x810}});
  CHECK(flat(*ring.read(TraceRead::Delta, 0x104)) == Blocks{{0, 0x104}});  // once only
}

TEST_CASE("branch ring: a signal before the first branch moves the origin", "[btrace]") {
  BranchRing ring(24 * 8);
  CHECK_FALSE(ring.retarget_newest(Branch{0, 0x100}, 0x800));  // no origin known
  ring.set_origin(0x100);
  CHECK_FALSE(ring.retarget_newest(Branch{0, 0x104}, 0x800));
  REQUIRE(ring.retarget_newest(Branch{0, 0x100}, 0x800));
  ring.push(0x810, 0x100);
  CHECK(flat(*ring.read(TraceRead::All, 0x104)) == Blocks{{0x100, 0x104}, {0x800, 0x810}});
}

TEST_CASE("branch ring: sealed pieces keep exactly what a plain ring keeps", "[btrace]") {
  // A ring of 1,000 branches in pieces of 64 (sealed, a few bits a branch) against one plain
  // ring per step: loops (mostly predicted), a branch that alternates (mispredicted), branches
  // never seen again and ids past the prediction table's 65,536 slots.
  const size_t cap = 1000;
  BranchRing sealed(cap * BranchRing::kBytesPerBranch, 64), plain(cap * BranchRing::kBytesPerBranch);
  std::vector<Branch> all;
  for (uint64_t i = 0; i < 5000; ++i) {
    if (i % 7 == 0) all.push_back({0x4000 + (i % 2) * 0x10, 0x5000});
    else if (i % 11 == 0) all.push_back({0x100000 + i, 0x200000 + i});
    else all.push_back({0x1000 + (i % 5) * 0x10, 0x2000 + (i % 3) * 0x10});
  }
  for (uint64_t i = 0; i < 70000; ++i) all.push_back({0x900000 + i % 66000, 0x910000});  // > 65,536 ids
  size_t at = 0;
  for (size_t batch : {1, 63, 64, 65, 200, 1000, 5000, 100000}) {
    size_t n = std::min(batch, all.size() - at);
    sealed.push_many(std::span<const Branch>(all).subspan(at, n));
    plain.push_many(std::span<const Branch>(all).subspan(at, n));
    at += n;
    CHECK(sealed.total() == plain.total());
    CHECK(same(sealed.newest(cap), plain.newest(cap)));
    CHECK(same(sealed.newest(17), plain.newest(17)));
    auto a = sealed.read(TraceRead::Delta, 0x9999), b = plain.read(TraceRead::Delta, 0x9999);
    REQUIRE(a.ok() == b.ok());
    if (a.ok()) CHECK(flat(*a) == flat(*b));
  }
  REQUIRE(at == all.size());
  CHECK(flat(*sealed.read(TraceRead::All, 0x9999)) == flat(*plain.read(TraceRead::All, 0x9999)));
  // Only what the ring keeps: at most the pieces that cover the newest 1,000, and the open one.
  CHECK(sealed.stored_bytes() < (cap + 2 * 64) * sizeof(uint32_t));
}

TEST_CASE("branch ring: a loop's sealed history takes a few bits a branch", "[btrace]") {
  BranchRing ring(size_t{4} << 20 << 3, 4096);  // room for 1.4 M branches, pieces of 4,096
  std::vector<Branch> loop;
  for (uint64_t i = 0; i < 100; ++i) loop.push_back({0x1000 + 0x10 * i, 0x1000 + 0x10 * ((i + 1) % 100)});
  for (int round = 0; round < 10000; ++round) ring.push_many(loop);  // 1 M branches
  CHECK(ring.total() == 1000000);
  CHECK(ring.stored_bytes() < 1000000 / 4);  // plain: 4 bytes a branch
  auto last = ring.newest(1000000);
  REQUIRE(last.size() == 1000000);
  for (size_t i = 0; i < last.size(); i += 997) CHECK(last[i].from == loop[i % 100].from);
}

TEST_CASE("branch ring: sealed pieces and the newest branch's signal", "[btrace]") {
  // The newest branch is always in the open piece (a full one is sealed only when the next
  // branch comes), so a signal's retarget works right after a piece fills.
  BranchRing ring(1000 * BranchRing::kBytesPerBranch, 64);
  for (uint64_t i = 0; i < 128; ++i) ring.push(0x1000 + i, 0x2000);
  REQUIRE(ring.retarget_newest(Branch{0x1000 + 127, 0x2000}, 0x800));
  ring.push(0x810, 0x2000);
  auto last = ring.newest(2);
  REQUIRE(last.size() == 2);
  CHECK(last[0].to == 0x800);
  CHECK(last[1].from == 0x810);
}

TEST_CASE("branch ring: the dictionary stays bounded when sealed pieces hold the history", "[btrace]") {
  BranchRing ring(100 * BranchRing::kBytesPerBranch, 64);
  for (uint64_t i = 0; i < 200000; ++i) ring.push(0x10000 + i, 0x20000 + i);
  CHECK(ring.distinct() <= 2 * 100 + 65536 + 1);
  auto last = ring.newest(100);
  REQUIRE(last.size() == 100);
  for (size_t i = 0; i < 100; ++i) CHECK(last[i].from == 0x10000 + 199900 + i);
}
