#include <catch2/catch.hpp>

#include <unistd.h>

#include "backend/btrace/trace_manager.h"

using namespace backend;

namespace {
TraceManager software(uint64_t* pc) {
  return TraceManager(TraceSource::Software, [pc](pid_t) { return *pc; });
}
}  // namespace

TEST_CASE("software source: enable, record, delta read, disable") {
  uint64_t pc = 0x1000;
  auto tm = software(&pc);
  REQUIRE(tm.enable(42).ok());
  CHECK(tm.enabled(42));
  CHECK(tm.software_traced(42));
  CHECK(tm.source_name() == "software");
  auto again = tm.enable(42);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == "Btrace already enabled.");
  tm.record(42, 0x1010, 0x2000);
  pc = 0x2008;
  auto blocks = tm.read(42, TraceRead::Delta);
  REQUIRE(blocks.ok());
  REQUIRE(blocks->size() == 2);
  CHECK((*blocks)[0].begin == 0x2000);
  CHECK((*blocks)[0].end == 0x2008);
  CHECK((*blocks)[1].begin == 0);
  CHECK((*blocks)[1].end == 0x1010);
  REQUIRE(tm.disable(42).ok());
  CHECK_FALSE(tm.enabled(42));
  CHECK_FALSE(tm.disable(42).ok());
}

TEST_CASE("buffer size is taken at enable time and reported back") {
  uint64_t pc = 0;
  auto tm = software(&pc);
  CHECK(tm.buffer_size(1) == TraceManager::kDefaultBufferSize);
  tm.set_buffer_size(0x100000);
  REQUIRE(tm.enable(7).ok());
  CHECK(tm.buffer_size(7) == 0x100000);
  tm.set_buffer_size(0x2000);
  CHECK(tm.buffer_size(7) == 0x100000);  // an enabled thread keeps its ring
}

TEST_CASE("the size reported is the one used: whole pages, a power of two (as BTS maps it)") {
  uint64_t pc = 0;
  auto tm = software(&pc);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  tm.set_buffer_size(1);
  REQUIRE(tm.enable(7).ok());
  CHECK(tm.buffer_size(7) == page);
  tm.set_buffer_size(3 * page + 5);
  REQUIRE(tm.enable(8).ok());
  CHECK(tm.buffer_size(8) == 4 * page);
}

TEST_CASE("a thread's exit frees its trace") {
  uint64_t pc = 0;
  auto tm = software(&pc);
  REQUIRE(tm.enable(5).ok());
  tm.record(5, 1, 2);
  tm.thread_exited(5);
  CHECK_FALSE(tm.enabled(5));
  CHECK(tm.history(5, 10).empty());
}

TEST_CASE("auto falls back to software where perf BTS cannot open; explicit bts says why") {
  uint64_t pc = 0;
  TraceManager automatic(TraceSource::Auto, [&](pid_t) { return pc; });
  REQUIRE(automatic.enable(getpid()).ok());
  // On machines with a working BTS PMU this would be perf-bts; ours have no PMU.
  if (!automatic.software_traced(getpid())) SUCCEED("perf BTS works on this machine");
  TraceManager bts(TraceSource::PerfBts, [&](pid_t) { return pc; });
  auto r = bts.enable(getpid());
  if (!r.ok()) {
    INFO(r.error().message);
    CHECK((r.error().message.find("recording") != std::string::npos || r.error().message.find("BTS") != std::string::npos));
  }
}

TEST_CASE("lbr source without the module refuses with a reason") {
  uint64_t pc = 0;
  TraceManager lbr(TraceSource::Lbr, [&](pid_t) { return pc; });
  auto r = lbr.enable(1);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("msr_helper") != std::string::npos);
}

TEST_CASE("lbr snapshots feed the ring once per new stop") {
  uint64_t pc = 0x500;
  TraceManager lbr(TraceSource::Lbr, [&](pid_t) { return pc; });
  uint64_t seq = 1;
  lbr.set_lbr_reader([&](pid_t, uint64_t* s) {
    *s = seq;
    return std::vector<Branch>{{0x100, 0x200}, {0x210, 0x300}};
  });
  REQUIRE(lbr.enable(9).ok());
  lbr.thread_stopped(9);
  lbr.thread_stopped(9);  // same sequence: nothing new
  CHECK(lbr.history(9, 10).size() == 2);
  seq = 2;
  lbr.thread_stopped(9);
  CHECK(lbr.history(9, 10).size() == 2);  // the same window again: nothing new
  seq = 3;
  lbr.set_lbr_reader([&](pid_t, uint64_t* s) {
    *s = seq;
    return std::vector<Branch>{{0x210, 0x300}, {0x310, 0x400}};  // overlaps by one branch
  });
  lbr.thread_stopped(9);
  auto h = lbr.history(9, 10);
  REQUIRE(h.size() == 3);
  CHECK(h.back().from == 0x310);
  auto delta = lbr.read(9, TraceRead::Delta);
  REQUIRE_FALSE(delta.ok());
  CHECK(delta.error().code == EOVERFLOW);  // GDB then reads `new`
  CHECK(lbr.read(9, TraceRead::New).ok());
}
