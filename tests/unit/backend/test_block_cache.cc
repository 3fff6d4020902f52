// BlockCache over hand-assembled code in a synthetic address space.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <vector>

#include "backend/x86/block_cache.h"

using namespace backend;

namespace {

// One readable region [base, base + bytes.size()); counts reads.
struct FakeCode {
  uint64_t base = 0x400000;
  std::vector<uint8_t> bytes;
  int reads = 0;
  CodeReader reader() {
    return [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
      ++reads;
      if (addr < base || addr >= base + bytes.size()) return 0;
      size_t n = std::min<size_t>(out.size(), base + bytes.size() - addr);
      std::memcpy(out.data(), bytes.data() + (addr - base), n);
      return n;
    };
  }
  uint64_t put(std::initializer_list<uint8_t> b) {
    uint64_t at = base + bytes.size();
    bytes.insert(bytes.end(), b);
    return at;
  }
};

}  // namespace

TEST_CASE("decoder: block ends at the first control-flow instruction", "[decoder]") {
  FakeCode code;
  uint64_t start = code.put({0x48, 0x89, 0xd8});         // mov rax, rbx
  code.put({0x90});                                      // nop
  uint64_t jcc = code.put({0x74, 0x10});                 // je +0x10
  code.put({0xc3});
  BlockCache cache(code.reader());
  auto b = cache.block_at(start);
  REQUIRE(b.ok());
  CHECK(b->start == start);
  CHECK(b->insn_count == 3);
  CHECK(b->end.addr == jcc);
  CHECK(b->end.len == 2);
  CHECK(b->end.kind == FlowKind::CondJump);
  REQUIRE(b->end.direct_target);
  CHECK(*b->end.direct_target == jcc + 2 + 0x10);
  CHECK(b->end.bytes[0] == 0x74);
  CHECK(cache.size() == 1);
  int reads = code.reads;
  REQUIRE(cache.block_at(start).ok());  // cached: no new read
  CHECK(code.reads == reads);
}

TEST_CASE("decoder: classification of control-flow forms", "[decoder]") {
  struct Case { std::vector<uint8_t> bytes; FlowKind kind; bool direct; };
  std::vector<Case> cases = {
      {{0xeb, 0x05}, FlowKind::Jump, true},                    // jmp rel8
      {{0xe9, 0x00, 0x01, 0x00, 0x00}, FlowKind::Jump, true},  // jmp rel32
      {{0x0f, 0x85, 0x10, 0, 0, 0}, FlowKind::CondJump, true}, // jne rel32
      {{0xe8, 0xfb, 0xff, 0xff, 0xff}, FlowKind::Call, true},  // call rel32 (backwards)
      {{0xc3}, FlowKind::Return, false},                       // ret
      {{0xc2, 0x10, 0x00}, FlowKind::Return, false},           // ret 0x10
      {{0xf2, 0xc3}, FlowKind::Return, false},                 // bnd ret
      {{0xff, 0xe0}, FlowKind::IndirectJump, false},           // jmp *rax
      {{0x3e, 0xff, 0xe0}, FlowKind::IndirectJump, false},     // notrack jmp *rax
      {{0xff, 0x25, 0x10, 0, 0, 0}, FlowKind::IndirectJump, false},  // jmp *0x10(rip)
      {{0xff, 0xd0}, FlowKind::IndirectCall, false},           // call *rax
      {{0x41, 0xff, 0x54, 0x24, 0x08}, FlowKind::IndirectCall, false},  // call *8(r12)
      {{0xe2, 0xfe}, FlowKind::Loop, true},                    // loop .
      {{0xe1, 0x02}, FlowKind::Loop, true},                    // loope
      {{0xe0, 0x02}, FlowKind::Loop, true},                    // loopne
      {{0xe3, 0x02}, FlowKind::Loop, true},                    // jrcxz
      {{0x67, 0xe3, 0x02}, FlowKind::Loop, true},              // jecxz
      {{0x0f, 0x05}, FlowKind::Syscall, false},                // syscall
      {{0xcc}, FlowKind::Trap, false},                         // int3
      {{0xcd, 0x80}, FlowKind::Trap, false},                   // int 0x80
      {{0x0f, 0x0b}, FlowKind::Trap, false},                   // ud2
      {{0xf4}, FlowKind::Trap, false},                         // hlt
      {{0x48, 0xcf}, FlowKind::Trap, false},                   // iretq
      {{0x0f, 0x34}, FlowKind::Trap, false},                   // sysenter
      {{0xcb}, FlowKind::Trap, false},                         // retf
      {{0xff, 0x28}, FlowKind::Trap, false},                   // ljmp *(rax)
      {{0xff, 0x18}, FlowKind::Trap, false},                   // lcall *(rax)
  };
  for (const auto& c : cases) {
    FakeCode code;
    uint64_t at = code.put({0x90});
    uint64_t insn_addr = code.base + code.bytes.size();
    code.bytes.insert(code.bytes.end(), c.bytes.begin(), c.bytes.end());
    BlockCache cache(code.reader());
    auto b = cache.block_at(at);
    INFO("first byte " << std::hex << int(c.bytes[0]) << " second " << int(c.bytes.size() > 1 ? c.bytes[1] : 0));
    REQUIRE(b.ok());
    CHECK(b->end.addr == insn_addr);
    CHECK(b->end.len == c.bytes.size());
    CHECK(b->end.kind == c.kind);
    CHECK(b->end.direct_target.has_value() == c.direct);
    auto one = cache.insn_at(insn_addr);
    REQUIRE(one.ok());
    CHECK(one->first == c.bytes.size());
    REQUIRE(one->second.has_value());
    CHECK(one->second->kind == c.kind);
  }
}

TEST_CASE("decoder: direct targets", "[decoder]") {
  FakeCode code;
  uint64_t a = code.put({0xe8, 0xfb, 0xff, 0xff, 0xff});  // call . (target = a)
  BlockCache cache(code.reader());
  auto b = cache.block_at(a);
  REQUIRE(b.ok());
  CHECK(*b->end.direct_target == a);
  FakeCode code2;
  uint64_t l = code2.put({0xe2, 0xfe});  // loop .
  BlockCache cache2(code2.reader());
  CHECK(*cache2.block_at(l)->end.direct_target == l);
}

TEST_CASE("decoder: insn_at of an ordinary instruction", "[decoder]") {
  FakeCode code;
  uint64_t a = code.put({0x48, 0x8d, 0x05, 0x00, 0x00, 0x00, 0x00});  // lea rax, [rip]
  BlockCache cache(code.reader());
  auto r = cache.insn_at(a);
  REQUIRE(r.ok());
  CHECK(r->first == 7);
  CHECK_FALSE(r->second.has_value());
  CHECK_FALSE(cache.insn_at(0x1000).ok());
}

TEST_CASE("decoder: unreadable and undecodable code", "[decoder]") {
  FakeCode code;
  uint64_t a = code.put({0x90, 0x90});  // runs off the end of the mapping
  BlockCache cache(code.reader());
  auto b = cache.block_at(a);
  REQUIRE(b.ok());
  CHECK(b->end.kind == FlowKind::Trap);
  CHECK(b->end.addr == a + 2);
  CHECK(b->end.len == 0);
  CHECK(b->insn_count == 3);
  auto bad = cache.block_at(0x10);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == EIO);
  // A truncated instruction at the end of the mapping is undecodable.
  FakeCode code2;
  uint64_t c = code2.put({0x90, 0x48, 0x8b});
  BlockCache cache2(code2.reader());
  auto b2 = cache2.block_at(c);
  REQUIRE(b2.ok());
  CHECK(b2->end.kind == FlowKind::Trap);
  CHECK(b2->end.addr == c + 1);
}

TEST_CASE("decoder: long blocks across chunk boundaries and the instruction bound", "[decoder]") {
  FakeCode code;
  code.base = 0x400ff0;  // straddles a page boundary
  for (int i = 0; i < 1000; ++i) code.put({0x48, 0x89, 0xd8});  // mov rax, rbx (3 bytes)
  uint64_t ret = code.put({0xc3});
  BlockCache cache(code.reader());
  auto b = cache.block_at(code.base);
  REQUIRE(b.ok());
  CHECK(b->insn_count == 1001);
  CHECK(b->end.addr == ret);
  CHECK(b->end.kind == FlowKind::Return);
  // From an offset inside: a separate cache entry.
  auto b2 = cache.block_at(code.base + 3 * 500);
  REQUIRE(b2.ok());
  CHECK(b2->insn_count == 501);
  CHECK(cache.size() == 2);

  FakeCode big;
  for (int i = 0; i < 5000; ++i) big.put({0x90});
  BlockCache cache3(big.reader());
  auto b3 = cache3.block_at(big.base);
  REQUIRE(b3.ok());
  CHECK(b3->insn_count == 4096);
  CHECK(b3->end.kind == FlowKind::Trap);
  CHECK(b3->end.addr == big.base + 4095);
  CHECK(b3->end.len == 1);
}

TEST_CASE("decoder: invalidate drops every overlapping block", "[decoder]") {
  FakeCode code;
  uint64_t b1 = code.put({0x90, 0x90, 0xc3});        // [b1, b1+3)
  uint64_t b2 = code.put({0x90, 0x90, 0x90, 0xc3});  // [b2, b2+4)
  uint64_t b3 = code.put({0xc3});
  BlockCache cache(code.reader());
  REQUIRE(cache.block_at(b1).ok());
  REQUIRE(cache.block_at(b2).ok());
  REQUIRE(cache.block_at(b2 + 2).ok());
  REQUIRE(cache.block_at(b3).ok());
  CHECK(cache.size() == 4);
  cache.invalidate(b2 + 3, 1);  // the ret of b2: b2 and b2+2 go, b1 and b3 stay
  CHECK(cache.size() == 2);
  cache.invalidate(b1 + 3, 0);
  CHECK(cache.size() == 2);
  cache.invalidate(b1 - 100, 100);  // ends just before b1
  CHECK(cache.size() == 2);
  // After patching the code, the next lookup sees the new bytes.
  code.bytes[0] = 0xcc;
  cache.invalidate(b1, 1);
  CHECK(cache.size() == 1);
  auto nb = cache.block_at(b1);
  REQUIRE(nb.ok());
  CHECK(nb->end.kind == FlowKind::Trap);
  CHECK(nb->end.addr == b1);
  cache.clear();
  CHECK(cache.size() == 0);
}

TEST_CASE("decoder: tail_start is the latest instruction start 5 bytes or more before the end", "[decoder]") {
  FakeCode code;
  // mov rax, rbx; nop; je: 6 bytes, so only the block start lies 5 or more before the end
  uint64_t a = code.put({0x48, 0x89, 0xd8});
  code.put({0x90});
  code.put({0x74, 0x10});
  // ten nops and a ret: the nop 5 bytes before the end (4 nops and the ret after it)
  uint64_t b = code.put({0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90});
  code.put({0xc3});
  // movabs rax, imm64 (10 bytes); ret: the movabs, however far back it starts
  uint64_t c = code.put({0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8});
  code.put({0xc3});
  // a lone ret: shorter than 5 bytes, so its own start
  uint64_t d = code.put({0xc3});
  // push rbp; mov rbp, rsp; call rel32: the call alone is 5 bytes
  uint64_t e = code.put({0x55});
  code.put({0x48, 0x89, 0xe5});
  uint64_t call = code.put({0xe8, 0, 0, 0, 0});
  BlockCache cache(code.reader());
  auto tail = [&](uint64_t start) {
    auto blk = cache.block_at(start);
    REQUIRE(blk.ok());
    uint64_t end = blk->end.addr + blk->end.len;
    CHECK(end - blk->tail_start >= Block::kTailBytes);
    return blk->tail_start;
  };
  CHECK(tail(a) == a);
  CHECK(tail(b) == b + 6);
  CHECK(tail(c) == c);
  auto lone = cache.block_at(d);
  REQUIRE(lone.ok());
  CHECK(lone->tail_start == d);
  CHECK(tail(e) == call);
}
