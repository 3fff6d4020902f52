// PerfEvent: the descriptor every hardware trace lives on. Tested with a software event
// (task-clock), which any kernel gives without a PMU; the BTS and PT sources open theirs through
// the same PerfEvent::open.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/perf_event.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "backend/btrace/perf/perf_event.h"

using namespace backend;

namespace {

perf_event_attr task_clock() {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  return a;
}

void spin(std::chrono::milliseconds d) {
  auto end = std::chrono::steady_clock::now() + d;
  volatile unsigned long x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

uint64_t count(int fd) {
  uint64_t v = 0;
  REQUIRE(::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v));
  return v;
}

}  // namespace

TEST_CASE("perf event: opened close-on-exec", "[perfevent]") {
  CHECK(perf_open_flags() == PERF_FLAG_FD_CLOEXEC);
  auto ev = PerfEvent::open(task_clock(), 0);
  if (!ev) {
    WARN("no software perf events here (errno " << ev.error().code << "): skipped");
    return;
  }
  int flags = ::fcntl(ev->fd(), F_GETFD);
  CHECK((flags & FD_CLOEXEC) != 0);  // a program launched later must not inherit the trace
}

TEST_CASE("perf event: closing it stops the event even where a copy of the fd lives on", "[perfevent]") {
  auto ev = PerfEvent::open(task_clock(), 0);
  if (!ev) {
    WARN("no software perf events here (errno " << ev.error().code << "): skipped");
    return;
  }
  int copy = ::dup(ev->fd());  // what a forked, not yet exec'd, child would hold
  REQUIRE(copy >= 0);
  spin(std::chrono::milliseconds(20));
  uint64_t running = count(copy);
  CHECK(running > 0);
  {
    PerfEvent gone = std::move(*ev);  // `record stop`
  }
  uint64_t at_stop = count(copy);
  spin(std::chrono::milliseconds(20));
  CHECK(count(copy) == at_stop);  // no longer counting: the hardware would no longer record
  ::close(copy);
}

TEST_CASE("perf event: open errors carry the errno", "[perfevent]") {
  perf_event_attr bad = task_clock();
  bad.type = 0x7fffffff;  // no such PMU
  auto ev = PerfEvent::open(bad, 0);
  REQUIRE_FALSE(ev);
  CHECK(ev.error().code == ENOENT);
}
