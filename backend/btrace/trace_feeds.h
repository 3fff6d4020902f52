// Branch data from somewhere other than the hardware: the injection point through which the
// test build of the server (tests/support) serves BTS and PT from files a test writes, the way
// the kernel would. The shipped server never sets one; TraceManager then opens perf events.
#pragma once

#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/btrace/perf/perf_bts.h"
#include "backend/btrace/perf/perf_pt.h"
#include "backend/error.h"

namespace backend {

class TraceFeeds {
 public:
  virtual ~TraceFeeds() = default;
  // BTS: when serves_bts(), open_bts() gives tid's source instead of a perf event (its errors
  // are what perf's would have been: auto falls back to the software source and says why).
  virtual bool serves_bts() const { return false; }
  virtual Result<std::unique_ptr<PerfBtsSource>> open_bts(pid_t tid) { return Error{ENODEV, "no BTS feed"}; }
  // PT: when serves_pt(), PT counts as available and open_pt() gives tid's source.
  virtual bool serves_pt() const { return false; }
  virtual Result<std::unique_ptr<PerfPtSource>> open_pt(pid_t tid) { return Error{ENODEV, "no PT feed"}; }
  // Bytes of the block-patching ring in the program (0: its default); a tiny ring makes the
  // full-ring trap happen in a short test.
  virtual uint64_t patch_ring_bytes() const { return 0; }
  // Branches a sealed piece of a kept history holds (0: BranchRing's default); small pieces
  // make a short test seal many.
  virtual size_t history_piece_branches() const { return 0; }
  // The first line of `monitor btrace status` while it serves anything ("" for none).
  virtual std::string status_line() const { return {}; }
};

}  // namespace backend
