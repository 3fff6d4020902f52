// ReplayPoint: the order reverse execution relies on (backend/replay/replay_point.h).
#include <catch2/catch.hpp>

#include "backend/replay/replay_point.h"

using backend::replay::ReplayPoint;

namespace {
ReplayPoint at(uint64_t branches, uint64_t events, uint64_t pc, uint64_t rcx = 0) {
  ReplayPoint p;
  p.branches = branches;
  p.events = events;
  p.pc = pc;
  p.rcx = rcx;
  return p;
}
}  // namespace

TEST_CASE("replay points: branches first, then events, then pc", "[replay]") {
  CHECK(at(1, 9, 0x900) < at(2, 0, 0x100));  // a taken branch later, wherever it went
  CHECK(at(5, 1, 0x900) < at(5, 2, 0x100));  // a signal's handler entered: an event later
  CHECK(at(5, 2, 0x100) < at(5, 2, 0x104));  // straight on between two branches
  CHECK(at(5, 2, 0x100) == at(5, 2, 0x100));
  CHECK_FALSE(at(5, 2, 0x100) == at(5, 3, 0x100));
}

TEST_CASE("replay points: a rep instruction's iterations count rcx down", "[replay]") {
  CHECK(at(7, 0, 0x400, 10) < at(7, 0, 0x400, 9));
  CHECK(at(7, 0, 0x400, 1) < at(7, 0, 0x402, 1));
}

TEST_CASE("replay points: the recorded end is after everything", "[replay]") {
  ReplayPoint end;
  end.end = true;
  ReplayPoint other_end = at(9, 9, 9);
  other_end.end = true;
  CHECK(at(~0ull, ~0ull, ~0ull) < end);
  CHECK(end == other_end);  // one end, whatever else it holds
  CHECK(end.describe() == "the recorded end");
  CHECK(at(3, 4, 0x10).describe() == "pc 0x10 after 3 branches and 4 events");
}
