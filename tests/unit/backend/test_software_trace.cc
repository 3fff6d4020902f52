// Software trace planning over hand-assembled code.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <vector>

#include "backend/btrace/software_trace.h"

using namespace backend;

namespace {

// Sparse synthetic address space: byte strings placed at chosen addresses.
struct Code {
  std::map<uint64_t, std::vector<uint8_t>> pieces;
  void at(uint64_t addr, std::vector<uint8_t> bytes) { pieces[addr] = std::move(bytes); }
  CodeReader reader() {
    return [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
      for (auto& [base, bytes] : pieces) {
        if (addr >= base && addr < base + bytes.size()) {
          size_t n = std::min<size_t>(out.size(), base + bytes.size() - addr);
          std::memcpy(out.data(), bytes.data() + (addr - base), n);
          return n;
        }
      }
      return 0;
    };
  }
};

}  // namespace

TEST_CASE("software trace: direct jumps and calls need no stop", "[swtrace]") {
  Code code;
  code.at(0x1000, {0x90, 0xeb, 0x0d});                    // nop; jmp 0x1010 (0x1003 + 0x0d)
  code.at(0x1010, {0xe8, 0x0b, 0x00, 0x00, 0x00});        // call 0x1020
  code.at(0x1020, {0x48, 0x89, 0xd8, 0x75, 0xdb});        // mov rax,rbx; jne 0x1000
  BlockCache cache(code.reader());
  TraceController ctl(cache);
  auto stop = ctl.stop_address_for(0x1000);
  REQUIRE(stop.ok());
  CHECK(*stop == 0x1023);
  CHECK(ctl.stop_insn().kind == FlowKind::CondJump);
  CHECK(*ctl.stop_insn().direct_target == 0x1000);
  REQUIRE(ctl.pending().size() == 2);
  CHECK(ctl.pending()[0].from == 0x1001);
  CHECK(ctl.pending()[0].to == 0x1010);
  CHECK(ctl.pending()[1].from == 0x1010);
  CHECK(ctl.pending()[1].to == 0x1020);

  SoftwareTraceThread thread(24 * 100);
  CHECK(ctl.commit(0x1023, thread));
  CHECK(ctl.pending().empty());
  CHECK(thread.ring().total() == 2);
  // The engine then emulates the jne and reports it.
  thread.on_flow(ctl.stop_insn(), FlowOutcome{0x1000, true});
  thread.on_flow(ctl.stop_insn(), FlowOutcome{0x1025, false});  // not taken: nothing recorded
  auto h = thread.ring().newest(10);
  REQUIRE(h.size() == 3);
  CHECK(h[2].from == 0x1023);
  CHECK(h[2].to == 0x1000);
  auto blocks = thread.ring().read(TraceRead::Delta, 0x1000);
  REQUIRE(blocks.ok());
  REQUIRE(blocks->size() == 4);
  CHECK((*blocks)[0].begin == 0x1000);
  CHECK((*blocks)[1].begin == 0x1020);
  CHECK((*blocks)[1].end == 0x1023);
  CHECK((*blocks)[3].begin == 0);
  CHECK((*blocks)[3].end == 0x1001);
}

TEST_CASE("software trace: the thread already stands on the stop", "[swtrace]") {
  Code code;
  code.at(0x3000, {0xc3});  // ret
  BlockCache cache(code.reader());
  TraceController ctl(cache);
  CHECK(*ctl.stop_address_for(0x3000) == 0x3000);
  CHECK(ctl.pending().empty());
  CHECK(ctl.stop_insn().kind == FlowKind::Return);
}

TEST_CASE("software trace: cycles and undecodable targets stop on the direct branch", "[swtrace]") {
  Code code;
  code.at(0x2000, {0xeb, 0xfe});                          // jmp .
  code.at(0x2100, {0x90, 0xeb, 0x01, 0x90, 0xeb, 0xfa});  // nop; jmp 0x2104; nop; jmp 0x2100
  code.at(0x2200, {0xe9, 0xfb, 0xff, 0x0f, 0x00});        // jmp 0x102200 (not mapped)
  BlockCache cache(code.reader());
  TraceController ctl(cache);
  CHECK(*ctl.stop_address_for(0x2000) == 0x2000);
  CHECK(ctl.pending().empty());
  CHECK(ctl.stop_insn().kind == FlowKind::Jump);
  // 0x2101 -> 0x2104 is fine, 0x2104 -> 0x2100 jumps back into the path: stop there.
  CHECK(*ctl.stop_address_for(0x2100) == 0x2104);
  REQUIRE(ctl.pending().size() == 1);
  CHECK(ctl.pending()[0].to == 0x2104);
  CHECK(*ctl.stop_address_for(0x2200) == 0x2200);
  CHECK(ctl.pending().empty());
  CHECK(ctl.stop_insn().kind == FlowKind::Jump);
  CHECK_FALSE(ctl.stop_address_for(0x9999).ok());
}

TEST_CASE("software trace: a long chain of direct jumps is cut", "[swtrace]") {
  Code code;
  // 100 blocks, each `jmp +0` to the next (eb 00 falls through to the next instruction).
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 100; ++i) bytes.insert(bytes.end(), {0xeb, 0x00});
  bytes.push_back(0xc3);
  code.at(0x4000, bytes);
  BlockCache cache(code.reader());
  TraceController ctl(cache);
  auto stop = ctl.stop_address_for(0x4000);
  REQUIRE(stop.ok());
  CHECK(ctl.pending().size() == TraceController::kMaxDirectChain);
  CHECK(*stop == 0x4000 + 2 * TraceController::kMaxDirectChain);
}

TEST_CASE("software trace: stops elsewhere commit only what lies behind", "[swtrace]") {
  Code code;
  code.at(0x1000, {0x90, 0xeb, 0x0d});
  code.at(0x1010, {0xe8, 0x0b, 0x00, 0x00, 0x00});
  code.at(0x1020, {0x48, 0x89, 0xd8, 0x75, 0xdb});
  BlockCache cache(code.reader());
  TraceController ctl(cache);
  SoftwareTraceThread thread(24 * 100);
  // A signal while the thread is in the call block: only the first jmp happened.
  REQUIRE(ctl.stop_address_for(0x1000).ok());
  CHECK(ctl.commit(0x1010, thread));
  CHECK(thread.ring().total() == 1);
  // A stop off the path: nothing is recorded.
  REQUIRE(ctl.stop_address_for(0x1000).ok());
  CHECK_FALSE(ctl.commit(0x7777, thread));
  CHECK(thread.ring().total() == 1);
  // A stop inside the first block: nothing happened yet.
  REQUIRE(ctl.stop_address_for(0x1000).ok());
  CHECK(ctl.commit(0x1000, thread));
  CHECK(thread.ring().total() == 1);
}
