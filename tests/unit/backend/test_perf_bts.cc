// PerfBtsRing over synthetic perf mmap regions built in memory (no BTS hardware here; see
// tests/data/README.md), and PerfBtsSource's error path on this PMU-less machine.
#include <catch2/catch.hpp>

#include <linux/perf_event.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "backend/host/cpu_id.h"
#include "backend/btrace/perf/perf_bts.h"
#include "tests/unit/backend/trace_blocks_util.h"

using namespace backend;

namespace {

constexpr size_t kPage = 4096;

// A fake mapping: header page + `data_size` bytes of data, written like the kernel would
// (records appended at data_head, wrapping at data_size).
struct FakePerfRing {
  std::vector<uint8_t> mem;
  uint64_t data_size;
  explicit FakePerfRing(uint64_t size, bool v5_header = true) : mem(kPage + size, 0), data_size(size) {
    auto* p = page();
    if (v5_header) {
      p->data_offset = kPage;
      p->data_size = size;
    }
  }
  perf_event_mmap_page* page() { return reinterpret_cast<perf_event_mmap_page*>(mem.data()); }
  void put_bytes(const void* src, size_t n) {
    const auto* s = static_cast<const uint8_t*>(src);
    for (size_t i = 0; i < n; ++i) mem[kPage + (page()->data_head + i) % data_size] = s[i];
    page()->data_head += n;
  }
  void sample(uint64_t from, uint64_t to) {
    perf_event_header h{PERF_RECORD_SAMPLE, 0, 24};
    put_bytes(&h, sizeof h);
    put_bytes(&from, 8);
    put_bytes(&to, 8);
  }
  void other_record() {  // e.g. PERF_RECORD_LOST, 16 bytes... but 24 to stay aligned
    perf_event_header h{PERF_RECORD_LOST, 0, 24};
    uint64_t zero[2] = {};
    put_bytes(&h, sizeof h);
    put_bytes(zero, 16);
  }
  std::span<const uint8_t> span() const { return {mem.data(), mem.size()}; }
};


}  // namespace

TEST_CASE("perf bts ring: all, new and delta on a simple buffer", "[perfbts]") {
  FakePerfRing fake(kPage);
  PerfBtsRing ring(fake.span(), kPage, 0);
  CHECK(ring.data_size() == kPage);
  CHECK(flat(*ring.read(TraceRead::Delta, 0x100)) == Blocks{{0, 0x100}});
  fake.sample(0x105, 0x200);
  fake.sample(0x20a, 0x300);
  CHECK(flat(*ring.read(TraceRead::Delta, 0x304)) == Blocks{{0x300, 0x304}, {0x200, 0x20a}, {0, 0x105}});
  CHECK(flat(*ring.read(TraceRead::Delta, 0x304)) == Blocks{{0, 0x304}});
  CHECK(ring.read(TraceRead::New, 0x304)->empty());
  CHECK(flat(*ring.read(TraceRead::All, 0x304)) == Blocks{{0x300, 0x304}, {0x200, 0x20a}});
  fake.sample(0x310, 0x400);
  CHECK(flat(*ring.read(TraceRead::New, 0x401)) == Blocks{{0x400, 0x401}, {0x300, 0x310}, {0x200, 0x20a}});
}

TEST_CASE("perf bts ring: wrap-around reassembles records, old partial record ignored", "[perfbts]") {
  // 100-byte data area: 4 records fit, and records straddle the end of the area.
  FakePerfRing fake(100);
  PerfBtsRing ring(fake.span(), kPage, 0);
  for (uint64_t i = 1; i <= 9; ++i) fake.sample(i * 0x100 + 0x10, (i + 1) * 0x100);
  // head = 216; the last 100 bytes hold records 6..9 (96 bytes) plus 4 stale bytes of record 5.
  auto r = ring.read_branches(TraceRead::All);
  REQUIRE(r.ok());
  CHECK_FALSE(r->incomplete);
  REQUIRE(r->branches.size() == 4);
  CHECK(r->branches[0].from == 0x910);
  CHECK(r->branches[0].to == 0xa00);
  CHECK(r->branches[3].from == 0x610);
  CHECK(r->branches[3].to == 0x700);
  // (Record 9 lies at bytes 192..216 = offsets 92..100 and 0..16: it was reassembled.)
  // Delta of two more records.
  fake.sample(0xa10, 0xb00);
  fake.sample(0xb10, 0xc00);
  CHECK(flat(*ring.read(TraceRead::Delta, 0xc02)) == Blocks{{0xc00, 0xc02}, {0xb00, 0xb10}, {0, 0xa10}});
}

TEST_CASE("perf bts ring: header without data_offset/data_size", "[perfbts]") {
  FakePerfRing fake(2 * kPage, false);
  fake.sample(0x1, 0x2);
  PerfBtsRing ring(fake.span(), kPage, 0);
  CHECK(ring.data_size() == 2 * kPage);
  CHECK(flat(*ring.read(TraceRead::All, 0x3)) == Blocks{{0x2, 0x3}});
}

TEST_CASE("perf bts ring: delta overflow", "[perfbts]") {
  FakePerfRing fake(48);
  PerfBtsRing ring(fake.span(), kPage, 0);
  fake.sample(0x10, 0x20);
  fake.sample(0x30, 0x40);
  CHECK(ring.read(TraceRead::Delta, 0x41).ok());  // exactly the buffer size: fine
  fake.sample(0x50, 0x60);
  fake.sample(0x70, 0x80);
  fake.sample(0x90, 0xa0);
  auto d = ring.read(TraceRead::Delta, 0xa1);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().code == EOVERFLOW);
  CHECK(d.error().message == "Overflow.");
  CHECK(flat(*ring.read(TraceRead::New, 0xa1)) == Blocks{{0xa0, 0xa1}, {0x80, 0x90}});
  // The head going backwards (a different event, a reset) is an overflow too.
  fake.page()->data_head = 24;
  CHECK(ring.read(TraceRead::Delta, 0xa1).error().code == EOVERFLOW);
}

TEST_CASE("perf bts ring: kernel branches dropped", "[perfbts]") {
  FakePerfRing fake(kPage);
  fake.sample(0x401000, 0x402000);
  fake.sample(0xffffffff81000100ull, 0x402100);  // kernel -> user return
  fake.sample(0x402110, 0x403000);
  PerfBtsRing by_bit63(fake.span(), kPage, 0);
  CHECK(flat(*by_bit63.read(TraceRead::All, 0x403004)) ==
        Blocks{{0x403000, 0x403004}, {0x402000, 0x402110}});
  // With a known _text, a lower kernel address is recognised as well.
  FakePerfRing fake2(kPage);
  fake2.sample(0x401000, 0x402000);
  fake2.sample(0x7000000000000000ull, 0x402100);
  PerfBtsRing by_text(fake2.span(), kPage, 0x7000000000000000ull);
  CHECK(flat(*by_text.read(TraceRead::Delta, 0x402101)) == Blocks{{0x402000, 0x402101}, {0, 0x401000}});
}

TEST_CASE("perf bts ring: a non-sample record stops the walk with a warning", "[perfbts]") {
  FakePerfRing fake(kPage);
  fake.sample(0x10, 0x20);
  fake.other_record();
  fake.sample(0x30, 0x40);
  fake.sample(0x50, 0x60);
  PerfBtsRing ring(fake.span(), kPage, 0);
  bool incomplete = false;
  auto b = ring.read(TraceRead::All, 0x61, &incomplete);
  REQUIRE(b.ok());
  CHECK(incomplete);
  CHECK(flat(*b) == Blocks{{0x60, 0x61}, {0x40, 0x50}});
}

TEST_CASE("perf bts: attr and error texts", "[perfbts]") {
  perf_event_attr a = perf_bts_attr();
  CHECK(a.type == PERF_TYPE_HARDWARE);
  CHECK(a.config == PERF_COUNT_HW_BRANCH_INSTRUCTIONS);
  CHECK(a.sample_period == 1);
  CHECK(a.sample_type == (PERF_SAMPLE_IP | PERF_SAMPLE_ADDR));
  CHECK(a.exclude_kernel == 1);
  CHECK(a.exclude_hv == 1);
  CHECK(a.exclude_idle == 1);
  CHECK(a.disabled == 0);
  CHECK(a.inherit == 0);

  // gdbserver's words, then what the errno means (issue 10: bare strerror told users nothing)
  CHECK(perf_bts_open_error(ENOENT).message ==
        "Failed to start recording: No such file or directory (no hardware PMU here: perf has no "
        "branch event (most VMs expose none))");
  CHECK(perf_bts_open_error(EOPNOTSUPP).message ==
        "Failed to start recording: Operation not supported (this CPU's PMU cannot do it (no BTS, "
        "or BTS disabled, e.g. by PTI))");
  CHECK(perf_bts_open_error(EBUSY).message ==
        "Failed to start recording: Device or resource busy (the hardware is in use by another LBR, "
        "BTS or PT user (perf record -b, a KVM guest's vLBR))");
  CHECK(perf_bts_open_error(E2BIG).message == "Failed to start recording: Argument list too long");
  char path[] = "/tmp/bs_paranoidXXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "3\n", 2) == 2);
  close(fd);
  CHECK(perf_bts_open_error(EACCES, path).message ==
        "You do not have permission to record the process.  Try setting "
        "/proc/sys/kernel/perf_event_paranoid to 2 or less.");
  fd = open(path, O_WRONLY | O_TRUNC);
  REQUIRE(write(fd, "2\n", 2) == 2);
  close(fd);
  CHECK(perf_bts_open_error(EPERM, path).message ==
        "Failed to start recording: Operation not permitted (refused by perf_event_paranoid; run as "
        "root or with CAP_PERFMON)");
  unlink(path);
  CHECK(perf_bts_open_error(EACCES, "/nonexistent/paranoid").message ==
        "Failed to open /nonexistent/paranoid (No such file or directory).  Your system does not "
        "support process recording.");
}

TEST_CASE("perf bts source: reports why it cannot record here", "[perfbts]") {
  auto src = PerfBtsSource::open(getpid(), 0x10000);
  if (src.ok()) {
    // Real BTS hardware: the mapping is a power of two of pages.
    CHECK(((*src)->size_bytes() & ((*src)->size_bytes() - 1)) == 0);
    SUCCEED("BTS works on this machine");
    return;
  }
  CpuId cpu = read_cpu_id();
  INFO(src.error().message);
  if (bts_disabled_for_cpu(cpu)) {
    CHECK(src.error().message == "BTS support has been disabled for the target cpu.");
  } else {
    // The development VM has no PMU: ENOENT, in gdbserver's words.
    CHECK(src.error().message.rfind("Failed to start recording: ", 0) == 0);
    if (src.error().code == ENOENT)
      CHECK(src.error().message.rfind("Failed to start recording: No such file or directory (no hardware PMU", 0) == 0);
  }
}
