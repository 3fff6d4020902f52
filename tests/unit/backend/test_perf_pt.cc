// The PT AUX ring over synthetic buffers, gdbserver's error texts, and the probe on this
// machine (no intel_pt PMU on our VMs: only the "absent" path can run here).
#include <catch2/catch.hpp>

#include <linux/perf_event.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/btrace/perf/perf_pt.h"

using namespace backend;

namespace {

struct FakeAux {
  perf_event_mmap_page header{};
  std::vector<uint8_t> aux;
  explicit FakeAux(size_t size) : aux(size, 0) {}
  // What the PT driver does in overwrite mode: write at aux_head, wrapping, head stays inside.
  void write(std::vector<uint8_t> bytes) {
    for (uint8_t b : bytes) {
      aux[header.aux_head % aux.size()] = b;
      header.aux_head = (header.aux_head + 1) % aux.size();
    }
  }
  PtAuxRing ring() { return PtAuxRing(&header, std::span<const uint8_t>(aux.data(), aux.size())); }
};

std::vector<uint8_t> seq(uint8_t first, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(first + i);
  return v;
}

}  // namespace

TEST_CASE("perf pt: the whole buffer, oldest byte first, ending at aux_head", "[perfpt]") {
  FakeAux f(16);
  auto ring = f.ring();
  CHECK(ring.size() == 16);
  f.write(seq(1, 10));
  auto r = ring.read(TraceRead::All);
  REQUIRE(r);
  // the unwritten tail (zeros) comes first, as in gdbserver's read: libipt syncs on PSB
  CHECK(r->raw == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  f.write(seq(11, 10));  // wraps: head = 20 % 16 = 4
  r = ring.read(TraceRead::All);
  REQUIRE(r);
  CHECK(r->raw == seq(5, 16));  // bytes 5..20, reassembled across the end of the buffer
}

TEST_CASE("perf pt: new is empty when nothing was written, delta is refused", "[perfpt]") {
  FakeAux f(8);
  auto ring = f.ring();
  f.write(seq(1, 3));
  auto r = ring.read(TraceRead::New);
  REQUIRE(r);
  CHECK_FALSE(r->unchanged);
  CHECK(r->raw.size() == 8);
  r = ring.read(TraceRead::New);
  REQUIRE(r);
  CHECK(r->unchanged);
  CHECK(r->raw.empty());
  f.write(seq(4, 1));
  CHECK_FALSE(ring.read(TraceRead::New)->unchanged);
  auto d = ring.read(TraceRead::Delta);
  REQUIRE_FALSE(d);
  CHECK(d.error().code == ENOTSUP);
  CHECK(d.error().message == "Generic Error.");
}

TEST_CASE("perf pt: gdbserver's texts when the PMU is missing or unreadable", "[perfpt]") {
  auto t = pt_event_type("/nonexistent/intel_pt/type");
  REQUIRE_FALSE(t);
  CHECK(t.error().message ==
        "Failed to open /nonexistent/intel_pt/type (No such file or directory).  Your system does "
        "not support Intel PT.");
  char path[] = "/tmp/bs_pttypeXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "x\n", 2) == 2);
  ::close(fd);
  t = pt_event_type(path);
  REQUIRE_FALSE(t);
  CHECK(t.error().message == std::string("Failed to read the PT event type from ") + path + ".");
  FILE* w = std::fopen(path, "w");
  std::fputs("9\n", w);
  std::fclose(w);
  t = pt_event_type(path);
  REQUIRE(t);
  CHECK(*t == 9);
  ::unlink(path);
  perf_event_attr a = pt_attr(9);
  CHECK(a.type == 9);
  CHECK(a.config == 0);
  CHECK(a.exclude_kernel == 1);
  CHECK(a.exclude_hv == 1);
  CHECK(a.exclude_idle == 1);
  CHECK(a.sample_period == 0);
}

TEST_CASE("perf pt: the probe gives the reason where PT is absent", "[perfpt]") {
  PtSupport s = probe_pt();
  if (s.works) {
    SUCCEED("Intel PT works on this machine");
    return;
  }
  INFO(s.why);
  CHECK_FALSE(s.why.empty());
  if (::access(kPtTypePath, F_OK) != 0)
    CHECK(s.why.find("Your system does not support Intel PT.") != std::string::npos);
  // A PMU type that no kernel has: the open fails and the reason names the errno.
  char path[] = "/tmp/bs_pttypeXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "2147483000\n", 11) == 11);
  ::close(fd);
  PtSupport bogus = probe_pt(path);
  ::unlink(path);
  CHECK_FALSE(bogus.works);
  CHECK(bogus.why.find("perf_event_open failed: No such file or directory") != std::string::npos);
}
