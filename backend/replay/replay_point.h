// A place in a replay's execution, as reverse execution compares them (replay_process.h): the
// thread's taken branches so far, the trace events consumed, the pc, and rcx. Between two taken
// branches and two events the program runs straight on, so pc grows; only the iterations of a
// `rep` string instruction share a pc, and their rcx counts down. `end`: held at the recorded
// exit (the last place there is).
#pragma once

#include <compare>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace backend::replay {

struct ReplayPoint {
  uint64_t branches = 0;
  uint64_t events = 0;
  uint64_t pc = 0;
  uint64_t rcx = 0;
  bool end = false;

  bool operator==(const ReplayPoint& o) const {
    return end == o.end && (end || (branches == o.branches && events == o.events && pc == o.pc && rcx == o.rcx));
  }
  std::strong_ordering operator<=>(const ReplayPoint& o) const {
    if (end != o.end) return end ? std::strong_ordering::greater : std::strong_ordering::less;
    if (end) return std::strong_ordering::equal;
    if (auto c = branches <=> o.branches; c != 0) return c;
    if (auto c = events <=> o.events; c != 0) return c;
    if (auto c = pc <=> o.pc; c != 0) return c;
    return o.rcx <=> rcx;  // a rep instruction's later iteration has the smaller rcx
  }
  std::string describe() const {
    if (end) return "the recorded end";
    return fmt::format("pc {:#x} after {} branches and {} events", pc, branches, events);
  }
};

}  // namespace backend::replay
