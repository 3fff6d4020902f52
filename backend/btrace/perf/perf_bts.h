// perf BTS, the way gdbserver records `record btrace bts` (as gdbserver does in gdb/nat/linux-btrace.c):
// a per-thread perf event (branch instructions, period 1) whose overwrite-mode ring buffer holds
// 24-byte PERF_RECORD_SAMPLE {from, to} records, read backwards from data_head.
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

struct PerfBtsRead {
  std::vector<Branch> branches;  // newest first, kernel-`from` records dropped
  bool incomplete = false;       // a record that is not a 24-byte sample stopped the walk
                                 // ("Branch trace may be incomplete.")
  bool unchanged = false;        // `new` read with nothing written since the last read
};

// Parses a perf mmap region: page 0 is struct perf_event_mmap_page, the data area follows.
// Pure over memory, so it is tested on synthetic buffers.
class PerfBtsRing {
 public:
  // mapping = the whole mmap (header page + data pages). kernel_start = the kernel's _text, or
  // 0 if unknown (then any `from` with bit 63 set counts as a kernel address).
  PerfBtsRing(std::span<const uint8_t> mapping, size_t page_size, uint64_t kernel_start);
  uint64_t data_size() const { return size_; }
  // Updates the last-read head on success. Delta overflow -> Error{EOVERFLOW, "Overflow."}.
  Result<PerfBtsRead> read_branches(TraceRead kind);
  // Blocks as BranchRing::read gives them (shared builder); `incomplete` reports the warning.
  Result<std::vector<TraceBlock>> read(TraceRead kind, uint64_t current_pc, bool* incomplete = nullptr);

 private:
  uint64_t load_head() const;
  PerfBtsRead walk(uint64_t head, uint64_t bytes) const;

  const uint8_t* header_ = nullptr;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t kernel_start_ = 0;
  uint64_t last_head_ = 0;
};

// The attribute gdbserver uses for BTS.
perf_event_attr perf_bts_attr();
// The kernel's _text from /proc/kallsyms, 0 if hidden or unreadable.
uint64_t kernel_text_start();
// gdbserver's texts for a failed perf_event_open (errno err), reading the paranoid level from
// paranoid_path when err is EPERM/EACCES. The errnos perf gives when the hardware is missing or
// taken (ENOENT, EOPNOTSUPP, EBUSY, EINVAL) get what they mean after gdbserver's words.
Error perf_bts_open_error(int err, const char* paranoid_path = "/proc/sys/kernel/perf_event_paranoid");
// What a perf_event_open errno means for a hardware trace event ("" for others).
std::string perf_errno_meaning(int err);

// A live BTS recording of one thread: the perf event plus its PROT_READ mapping.
class PerfBtsSource {
 public:
  // size_bytes is the requested buffer size (Qbtrace-conf:bts:size); the mapping is a power of
  // two pages, halved until mmap succeeds.
  static Result<std::unique_ptr<PerfBtsSource>> open(pid_t tid, uint64_t size_bytes);
  // A source over `map`, laid out like the perf mmap (header page, then the data area at
  // data_offset/data_size), whose records PerfBtsRing reads with `kernel_start`; `event` is the
  // perf event that fills it (open() passes its own), or none when something else writes it
  // (the test feeds, tests/support).
  static std::unique_ptr<PerfBtsSource> over(Mapping map, size_t page_size, uint64_t kernel_start,
                                             PerfEvent event = {});
  ~PerfBtsSource();
  PerfBtsSource(const PerfBtsSource&) = delete;
  PerfBtsSource& operator=(const PerfBtsSource&) = delete;

  uint64_t size_bytes() const { return ring_->data_size(); }  // reported in btrace-conf
  Result<std::vector<TraceBlock>> read(TraceRead kind, uint64_t current_pc, bool* incomplete = nullptr) {
    return ring_->read(kind, current_pc, incomplete);
  }

 private:
  PerfBtsSource() = default;
  PerfEvent event_;  // declared first: destroyed (disabled, closed) after the mapping is gone
  Mapping map_;
  std::unique_ptr<PerfBtsRing> ring_;
};

}  // namespace backend
