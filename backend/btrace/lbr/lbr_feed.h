// Where LBR windows come from, for `--btrace-source=lbr` and `monitor lbr`: the msr_helper
// device (one handle for the whole server: the module ties a thread's attachment to the handle
// that attached it, so a second handle would get EEXIST), or any other LbrFeed the server is
// given (the test build's replayed snapshots, tests/support). And how consecutive windows are
// stitched into one history.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backend/btrace/branch_ring.h"
#include "backend/host/cpu_id.h"
#include "backend/btrace/lbr/lbr_device.h"
#include "backend/btrace/perf/perf_event.h"
#include "backend/x86/block_cache.h"
#include "backend/error.h"

namespace backend {

// The LBR as it was at a thread's last stop.
struct LbrWindow {
  uint64_t sequence = 0;              // changes with every new snapshot; 0 = none since arming
  uint64_t ip = 0;                    // the thread's ip when it was taken
  std::vector<Branch> oldest_first;
  uint32_t depth = 0;                 // entries the stack holds: a full window may have lost older ones
  bool from_trap = false;             // taken in the thread's int3/#DB trap: it ran to get there
  // User-mode near branches the thread took since it was armed, counted by the PMU: with it,
  // how much of the window is new is known exactly (see stitch_lbr_window). nullopt: no counter.
  std::optional<uint64_t> taken_total;
  bool simulated = false;             // synthetic (simulate_lbr=1 or a replay file): TEST ONLY
  bool conflict = false;              // another LBR user held the hardware meanwhile
};

class LbrFeed {
 public:
  virtual ~LbrFeed() = default;
  // Start recording `tid` (idempotent: arming an armed thread is fine). Errors say why.
  virtual Result<void> arm(pid_t tid) = 0;
  // Stop recording `tid` and free it in the module (idempotent).
  virtual void release(pid_t tid) = 0;
  virtual bool armed(pid_t tid) const = 0;
  // The window of the thread's last stop; `pc` is where it stands now.
  virtual Result<LbrWindow> window(pid_t tid, uint64_t pc) = 0;
  virtual std::string name() const = 0;  // for status lines
};

// The msr_helper module through one shared device handle.
class DeviceLbrFeed final : public LbrFeed {
 public:
  explicit DeviceLbrFeed(LbrDevice device);
  ~DeviceLbrFeed() override;  // detaches what it armed
  Result<void> arm(pid_t tid) override;
  void release(pid_t tid) override;
  bool armed(pid_t tid) const override { return armed_.count(tid) != 0; }
  Result<LbrWindow> window(pid_t tid, uint64_t pc) override;
  std::string name() const override;
  LbrDevice& device() { return device_; }

 private:
  LbrDevice device_;
  std::set<pid_t> armed_;
  std::map<pid_t, PerfEvent> counters_;  // taken-branch counters of the armed threads
  std::string counter_missing_;          // why there are none (status line)
  uint32_t depth_ = 0;
  bool simulated_ = false;
};

// Why the LBR source cannot be used, from the error of opening the device and the CPU: the
// module refuses to load on AMD and on architectural-LBR CPUs, and on a VM that drops
// DEBUGCTL.LBR, so "not loaded" alone would hide the reason; any other open error (permissions,
// ABI version) is said as it is.
std::string lbr_unavailable_reason(const std::string& path, const Error& open_error, const CpuId& cpu);

// The perf event that counts a thread's user-mode taken near branches (the same branches
// msr_helper's LBR_SELECT lets into the stack): Intel's BR_INST_RETIRED.NEAR_TAKEN on the big
// cores msr_helper drives; nullopt where the event is unknown.
std::optional<perf_event_attr> taken_branch_counter_attr(const CpuId& cpu);

// How a new window joins the history. `recent` is the newest part of the history since its
// last gap (oldest first); the window is oldest first too. Windows overlap when the thread took
// fewer branches than the stack holds: the window's start equals the history's end. Content
// alone is ambiguous in loops (a breakpoint in a loop whose iteration takes fewer branches than
// the stack holds gives the same window at every stop), so with `where` each candidate overlap
// must also fit the code: the first new branch must lie on the straight-line path from the
// previous stop's pc, the stop's pc on the path from the newest branch's target, and a trap at
// the previous stop's pc cannot come without a branch. The longest overlap that fits is
// skipped. No overlap with a non-empty history, or a full first window (the thread may have
// taken more branches since recording began than the stack holds), means branches were lost:
// a gap comes first.
struct LbrStitch {
  size_t skip = 0;   // window entries already in the history
  bool gap = false;  // branches were lost before the window's first new entry
};
struct LbrStopPlace {
  uint64_t previous_pc = 0;  // where the thread was resumed from (the history so far ends there)
  uint64_t pc = 0;           // where it stopped now
  // Branches taken since the previous window, from the PMU's counter: decides alone (a window
  // of n entries then holds min(n, new) new ones; more new than n means some were lost).
  std::optional<uint64_t> new_branches;
  // Whether `to` is reached from `from` without a taken branch (falling through conditional
  // branches); nullopt when the code cannot be read.
  std::function<std::optional<bool>(uint64_t from, uint64_t to)> straight_line;
};
LbrStitch stitch_lbr_window(std::span<const Branch> recent, const LbrWindow& window,
                            const LbrStopPlace* where = nullptr);

// LbrStopPlace::straight_line over decoded code.
std::optional<bool> straight_line_reaches(BlockCache& code, uint64_t from, uint64_t to);

}  // namespace backend
