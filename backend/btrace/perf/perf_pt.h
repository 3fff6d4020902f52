// Intel PT, the way gdbserver records `record btrace pt` (gdb/nat/linux-btrace.c,
// linux_enable_pt / linux_read_pt): a per-thread perf event of the intel_pt PMU (type from
// sysfs, config 0 = the kernel's defaults, user mode only), one read-write user page, and an
// AUX area mapped read-only, so the kernel writes it in overwrite ("snapshot") mode. A read
// hands GDB the whole AUX buffer, oldest byte first, ending at aux_head; libipt in GDB finds
// its way in at the first PSB packet, so stale bytes do no harm.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/btrace/branch_ring.h"
#include "backend/btrace/perf/perf_event.h"
#include "backend/error.h"

namespace backend {

inline constexpr const char* kPtTypePath = "/sys/bus/event_source/devices/intel_pt/type";

// Whether PT can be recorded here, and if not, why (gdbserver's words where it has them).
struct PtSupport {
  bool works = false;
  int type = -1;      // the intel_pt PMU's perf type
  std::string why;    // "" when it works
};
// Reads the PMU type from `type_path` and opens (then closes) a disabled event on this thread.
PtSupport probe_pt(const char* type_path = kPtTypePath);

// The PMU type from sysfs, or gdbserver's error text ("Failed to open ... Your system does not
// support Intel PT.").
Result<int> pt_event_type(const char* type_path = kPtTypePath);
perf_event_attr pt_attr(int type);

struct PtRead {
  std::vector<uint8_t> raw;  // the buffer, oldest byte first; empty with `unchanged`
  bool unchanged = false;    // a `new` read with nothing written since the last read
};

// The AUX ring over memory: the user page (for aux_head) and the AUX area. Pure, so it is
// tested on synthetic buffers.
class PtAuxRing {
 public:
  PtAuxRing(const perf_event_mmap_page* header, std::span<const uint8_t> aux);
  uint64_t size() const { return aux_.size(); }
  // All/New: the whole buffer ending at aux_head (New: empty when aux_head did not move).
  // Delta is not supported (aux_head wraps inside the buffer): Error{ENOTSUP}, which the
  // server sends as gdbserver does, "E.Generic Error.", and GDB then reads `new`.
  Result<PtRead> read(TraceRead kind);

 private:
  const perf_event_mmap_page* header_;
  std::span<const uint8_t> aux_;
  uint64_t last_head_ = 0;
};

// A live PT recording of one thread.
class PerfPtSource {
 public:
  // size_bytes: Qbtrace-conf:pt:size (GDB's default 16 KiB); a power of two of pages, halved
  // until the AUX mmap succeeds. config: extra perf_event_attr.config bits (pt_features.h).
  static Result<std::unique_ptr<PerfPtSource>> open(pid_t tid, uint64_t size_bytes, uint64_t config = 0);
  // A source over `user_page` (struct perf_event_mmap_page: aux_head is read from it) and
  // `aux`, the AUX area; `event` is the perf event that fills them (open() passes its own), or
  // none when something else writes them (the test feeds, tests/support).
  static std::unique_ptr<PerfPtSource> over(Mapping user_page, Mapping aux, PerfEvent event = {});
  ~PerfPtSource();
  PerfPtSource(const PerfPtSource&) = delete;
  PerfPtSource& operator=(const PerfPtSource&) = delete;

  uint64_t size_bytes() const { return ring_->size(); }  // reported in btrace-conf
  Result<PtRead> read(TraceRead kind) { return ring_->read(kind); }

 private:
  PerfPtSource() = default;
  PerfEvent event_;
  Mapping user_page_;
  Mapping aux_;
  std::unique_ptr<PtAuxRing> ring_;
};

}  // namespace backend
