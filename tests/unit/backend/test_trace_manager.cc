#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <map>

#include "backend/btrace/trace_manager.h"
#include "backend/btrace/blocks.h"
#include "tests/support/file_trace_feeds.h"
#include "tests/unit/backend/trace_blocks_util.h"

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

TEST_CASE("a recorded thread's new thread is recorded from its first instruction, and GDB's enable adopts it") {
  uint64_t pc = 0x1000;
  auto tm = software(&pc);
  REQUIRE(tm.enable(10).ok());
  tm.thread_created(11, 10);  // a clone of a recorded thread
  CHECK(tm.enabled(11));
  CHECK(tm.software_traced(11));
  tm.record(11, 0x1010, 0x2000);
  tm.thread_created(21, 20);  // of a thread GDB does not record: nothing
  CHECK_FALSE(tm.enabled(21));
  CHECK_FALSE(tm.software_traced(21));
  // GDB learns of thread 11 at the next stop and enables it: what it did before is kept. GDB
  // then holds the pc it enabled at and asks for the delta since: refused once (as after an
  // overflow), so that it reads `new`, the whole history.
  REQUIRE(tm.enable(11).ok());
  CHECK(tm.history(11, 10).size() == 1);
  auto delta = tm.read(11, TraceRead::Delta);
  REQUIRE_FALSE(delta.ok());
  CHECK(delta.error().message == "Overflow.");
  auto whole = tm.read(11, TraceRead::New);
  REQUIRE(whole.ok());
  CHECK(whole->size() == 2);
  CHECK(whole->back().begin == 0x1000);  // from its first instruction
  CHECK(tm.read(11, TraceRead::Delta).ok());
  auto again = tm.enable(11);  // a second enable is GDB's error, as for any thread
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == "Btrace already enabled.");
  tm.thread_created(12, 11);
  REQUIRE(tm.disable(11).ok());
  CHECK(tm.enabled(12));
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

TEST_CASE("auto falls back to the software source with block patching where perf BTS cannot open, explicit bts says why") {
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

namespace {

// Synthetic LBR windows, as the module would hand them out at successive stops.
class FakeLbr final : public LbrFeed {
 public:
  std::vector<LbrWindow> windows;  // windows[i] is handed out at the i-th stop
  size_t stops = 0;
  std::set<pid_t> armed_set;
  std::vector<pid_t> released;
  std::optional<Error> arm_error;
  uint32_t depth = 4;
  Result<void> arm(pid_t tid) override {
    if (arm_error) return *arm_error;
    armed_set.insert(tid);
    return {};
  }
  void release(pid_t tid) override {
    if (armed_set.erase(tid)) released.push_back(tid);
  }
  bool armed(pid_t tid) const override { return armed_set.count(tid) != 0; }
  Result<LbrWindow> window(pid_t, uint64_t) override {
    if (stops == 0 || stops > windows.size()) return LbrWindow{};
    LbrWindow w = windows[stops - 1];
    w.sequence = stops;
    w.depth = depth;
    w.from_trap = true;  // breakpoint stops
    return w;
  }
  std::string name() const override { return "fake LBR"; }
  void stop(std::vector<Branch> oldest_first) {
    LbrWindow w;
    w.oldest_first = std::move(oldest_first);
    windows.push_back(w);
    ++stops;
  }
};

LbrWindow window_of(std::vector<Branch> b, uint32_t depth) {
  LbrWindow w;
  w.oldest_first = std::move(b);
  w.depth = depth;
  return w;
}

}  // namespace

namespace {

// A loop calling hit(), with a breakpoint in hit:
//   hit:  0x10 push rbp; 0x11 mov rbp,rsp; 0x14 nop (breakpoint); 0x15 pop rbp; 0x16 ret
//   loop: 0x100 nop; 0x101 call hit; 0x106 inc ecx; 0x108 jne 0x100; 0x10a ret
const Branch kCall{0x101, 0x10}, kRet{0x16, 0x106}, kBack{0x108, 0x100};
constexpr uint64_t kBreakpoint = 0x14;

CodeReader loop_code() {
  static const std::map<uint64_t, std::vector<uint8_t>> regions = {
      {0x10, {0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3}},
      {0x100, {0x90, 0xe8, 0x0a, 0xff, 0xff, 0xff, 0xff, 0xc1, 0x75, 0xf6, 0xc3}}};
  return [](uint64_t addr, std::span<uint8_t> out) -> size_t {
    for (const auto& [base, bytes] : regions)
      if (addr >= base && addr < base + bytes.size()) {
        size_t n = std::min<size_t>(out.size(), base + bytes.size() - addr);
        std::memcpy(out.data(), bytes.data() + (addr - base), n);
        return n;
      }
    return 0;
  };
}

}  // namespace

TEST_CASE("lbr stitch: in a loop, content alone is ambiguous, the code decides", "[lbr-stitch]") {
  // The history ends with the call that reached the breakpoint; one iteration later the thread
  // is at the breakpoint again and the depth-4 window is the same four branches.
  const std::vector<Branch> recent = {kCall, kRet, kBack, kCall};
  LbrWindow w = window_of({kCall, kRet, kBack, kCall}, 4);
  w.from_trap = true;
  // Without the code the longest overlap wins: "nothing new", an iteration lost. (The old
  // dedup, which looked for the history's newest branch in the window, lost it the same way.)
  CHECK(stitch_lbr_window(recent, w).skip == 4);
  BlockCache code(loop_code());
  LbrStopPlace where{kBreakpoint, kBreakpoint, std::nullopt,
                     [&](uint64_t a, uint64_t b) { return straight_line_reaches(code, a, b); }};
  auto s = stitch_lbr_window(recent, w, &where);
  CHECK(s.skip == 1);  // ret, jne back, call: one iteration
  CHECK_FALSE(s.gap);
  // a stop that did not run (a switch-out snapshot at the same pc) brings nothing new
  w.from_trap = false;
  CHECK(stitch_lbr_window(recent, w, &where).skip == 4);
}

TEST_CASE("lbr stitch: with the PMU's taken-branch count the join is exact", "[lbr-stitch]") {
  const std::vector<Branch> recent = {kCall, kRet, kBack, kCall};
  LbrWindow w = window_of({kCall, kRet, kBack, kCall}, 4);
  // one iteration: 3 new
  LbrStopPlace where{kBreakpoint, kBreakpoint, 3, {}};
  auto s = stitch_lbr_window(recent, w, &where);
  CHECK(s.skip == 1);
  CHECK_FALSE(s.gap);
  // 300 iterations later the window looks the same, and content and code both say "one
  // iteration"; the count says 900 branches: a gap, then the whole window
  where.new_branches = 900;
  s = stitch_lbr_window(recent, w, &where);
  CHECK(s.skip == 0);
  CHECK(s.gap);
  // exactly a window's worth: nothing lost
  where.new_branches = 4;
  s = stitch_lbr_window(recent, w, &where);
  CHECK(s.skip == 0);
  CHECK_FALSE(s.gap);
  // nothing new
  where.new_branches = 0;
  CHECK(stitch_lbr_window(recent, w, &where).skip == 4);
  // the count says 1 new, but the rest of the window is not the history's end: entries were lost
  where.new_branches = 1;
  s = stitch_lbr_window(std::vector<Branch>{{1, 2}, {3, 4}, {5, 6}}, w, &where);
  CHECK(s.skip == 3);
  CHECK(s.gap);
}

TEST_CASE("lbr stitch: straight-line reach over decoded code", "[lbr-stitch]") {
  BlockCache code(loop_code());
  CHECK(straight_line_reaches(code, 0x14, 0x16) == std::optional<bool>(true));
  CHECK(straight_line_reaches(code, 0x14, 0x101) == std::optional<bool>(false));  // past the ret
  CHECK(straight_line_reaches(code, 0x106, 0x10a) == std::optional<bool>(true));  // falls through the jne
  CHECK(straight_line_reaches(code, 0x500, 0x501) == std::nullopt);               // no code there
}

TEST_CASE("lbr stitch: gaps where windows do not overlap, and for a full first window", "[lbr-stitch]") {
  const std::vector<Branch> old = {{1, 2}, {3, 4}};
  auto s = stitch_lbr_window(old, window_of({{5, 6}, {7, 8}}, 4));
  CHECK(s.skip == 0);
  CHECK(s.gap);
  // first window: a gap only when the stack was full (older branches may have been lost)
  s = stitch_lbr_window({}, window_of({{5, 6}, {7, 8}}, 4));
  CHECK_FALSE(s.gap);
  s = stitch_lbr_window({}, window_of({{5, 6}, {7, 8}, {9, 10}, {11, 12}}, 4));
  CHECK(s.gap);
  // an empty window changes nothing
  s = stitch_lbr_window(old, window_of({}, 4));
  CHECK(s.skip == 0);
  CHECK_FALSE(s.gap);
}

TEST_CASE("build_blocks: a gap entry ends the older history and shows as GDB's gap block", "[lbr-stitch]") {
  // newest first: c2 (0x330 -> 0x400), c1 (0x310 -> 0x320), gap after 0x205, b1 (0x105 -> 0x200)
  std::vector<Branch> nf = {{0x330, 0x400}, {0x310, 0x320}, gap_after(0x205), {0x105, 0x200}};
  CHECK(flat(build_blocks(nf, 0x404, true)) ==
        Blocks{{0x400, 0x404}, {0x320, 0x330}, {0x310, 0x310}, {0x310, 0x30f}, {0x200, 0x205}, {0, 0x105}});
}

TEST_CASE("lbr source: windows stitched at stops, loop iterations not lost, delta reads work", "[lbr-stitch]") {
  uint64_t pc = 0x100;
  TraceManager tm(TraceSource::Lbr, [&](pid_t) { return pc; });
  auto lbr = std::make_shared<FakeLbr>();
  TraceSetup setup;
  setup.lbr = lbr;
  setup.code = loop_code();
  tm.configure(setup);
  REQUIRE(tm.enable(9).ok());
  CHECK(lbr->armed(9));
  // stop 1 at the breakpoint in hit: the call
  pc = kBreakpoint;
  lbr->stop({kCall});
  tm.thread_stopped(9);
  tm.thread_stopped(9);  // the same snapshot again: nothing new
  CHECK(tm.history(9, 100).size() == 1);
  auto d1 = tm.read(9, TraceRead::Delta);
  REQUIRE(d1.ok());
  CHECK(flat(*d1) == Blocks{{0x10, 0x14}, {0, 0x101}});
  // stops 2..4: one more iteration each (ret, jne back, call); the depth-4 windows are identical
  for (int i = 0; i < 3; ++i) {
    lbr->stop({kCall, kRet, kBack, kCall});
    tm.thread_stopped(9);
  }
  CHECK(tm.history(9, 100).size() == 1 + 3 * 3);
  auto d2 = tm.read(9, TraceRead::Delta);  // no longer refused
  REQUIRE(d2.ok());
  CHECK(d2->size() == 9 + 1);
  CHECK(d2->front().begin == 0x10);
  CHECK(d2->front().end == 0x14);
  CHECK(d2->back().begin == 0);
  CHECK(d2->back().end == 0x16);  // from of the oldest new branch (the first ret)
  REQUIRE(tm.disable(9).ok());
  CHECK(lbr->released == std::vector<pid_t>{9});  // detach issued
}

TEST_CASE("lbr source: a window that does not overlap puts a gap into the history", "[lbr-stitch]") {
  uint64_t pc = 0x100;
  TraceManager tm(TraceSource::Lbr, [&](pid_t) { return pc; });
  auto lbr = std::make_shared<FakeLbr>();
  TraceSetup setup;
  setup.lbr = lbr;
  tm.configure(setup);
  REQUIRE(tm.enable(3).ok());
  pc = 0x205;
  lbr->stop({{0x105, 0x200}});
  tm.thread_stopped(3);
  pc = 0x404;
  lbr->stop({{0x300, 0x301}, {0x302, 0x303}, {0x310, 0x320}, {0x330, 0x400}});  // full, no overlap
  tm.thread_stopped(3);
  auto all = tm.read(3, TraceRead::All);
  REQUIRE(all.ok());
  CHECK(flat(*all) == Blocks{{0x400, 0x404}, {0x320, 0x330}, {0x303, 0x310}, {0x301, 0x302}, {0x300, 0x300},
                             {0x300, 0x2ff}, {0x200, 0x205}, {0x100, 0x105}});
  auto h = tm.history(3, 10);
  REQUIRE(h.size() == 6);
  CHECK(is_gap(h[1]));
  CHECK(h[1].from == 0x205);
}

TEST_CASE("lbr source: attach failures and a missing module are reported, not ignored", "[lbr-stitch]") {
  uint64_t pc = 0;
  TraceManager tm(TraceSource::Lbr, [&](pid_t) { return pc; });
  auto lbr = std::make_shared<FakeLbr>();
  lbr->arm_error = Error{EBUSY, "msr_helper attach thread 4: Device or resource busy (another user owns the LBR)"};
  TraceSetup setup;
  setup.lbr = lbr;
  tm.configure(setup);
  auto r = tm.enable(4);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "Failed to start recording: msr_helper attach thread 4: Device or resource busy (another user owns the LBR)");
  CHECK_FALSE(tm.enabled(4));
  // no module: the reason found at open time, not "not loaded" for every error
  TraceManager none(TraceSource::Lbr, [&](pid_t) { return pc; });
  TraceSetup missing;
  missing.lbr_unavailable = "msr_helper: not usable (/dev/msr_helper: Permission denied (needs root / CAP_SYS_RAWIO))";
  none.configure(missing);
  r = none.enable(4);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("Permission denied") != std::string::npos);
  CHECK(r.error().message.find("not loaded") == std::string::npos);
}

TEST_CASE("lbr source: a thread's exit releases it in the module", "[lbr-stitch]") {
  uint64_t pc = 0;
  TraceManager tm(TraceSource::Lbr, [&](pid_t) { return pc; });
  auto lbr = std::make_shared<FakeLbr>();
  TraceSetup setup;
  setup.lbr = lbr;
  tm.configure(setup);
  REQUIRE(tm.enable(5).ok());
  tm.thread_exited(5);
  CHECK(lbr->released == std::vector<pid_t>{5});
}

TEST_CASE("auto keeps why perf BTS was refused and says which source it chose", "[trace-explain]") {
  uint64_t pc = 0;
  TraceManager automatic(TraceSource::Auto, [&](pid_t) { return pc; });
  TraceSetup setup;
  setup.lbr_unavailable = "msr_helper: not loaded (/dev/msr_helper: No such file or directory)";
  setup.pt_unavailable = "Failed to open /sys/bus/event_source/devices/intel_pt/type (No such file or directory).  "
                         "Your system does not support Intel PT.";
  // A ring that cannot open: auto must fall back and say why.
  setup.feeds = std::make_shared<test_support::FileTraceFeeds>("/nonexistent/ring", "", 0);
  automatic.configure(setup);
  REQUIRE(automatic.enable(getpid()).ok());
  CHECK(automatic.software_traced(getpid()));
  auto lines = automatic.explain();
  std::string all;
  for (const auto& l : lines) all += l + "\n";
  INFO(all);
  CHECK(all.find("perf-bts: not used: TEST ring file /nonexistent/ring: No such file or directory") != std::string::npos);
  CHECK(all.find("lbr: not available: msr_helper: not loaded") != std::string::npos);
  CHECK(all.find("pt: not available: Failed to open /sys/bus/event_source/devices/intel_pt/type") != std::string::npos);
  CHECK(all.find("software: used with block patching (auto falls back to it)") != std::string::npos);
  CHECK(automatic.patch_traced(getpid()));  // the engine may run it through patched code
  CHECK(automatic.source_name() == "patch");
}

TEST_CASE("pt: refused with the reason where it is not available", "[trace-explain]") {
  uint64_t pc = 0;
  TraceManager tm(TraceSource::Auto, [&](pid_t) { return pc; });
  TraceSetup setup;
  setup.pt_unavailable = "no intel_pt here";
  tm.configure(setup);
  auto r = tm.enable(1, TraceFormat::Pt);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == "no intel_pt here");
  CHECK_FALSE(tm.enabled(1));
}
