// TEST ONLY (branchstub-testfeeds --test-bts-ring=FILE, --test-pt-aux=FILE,
// --test-patch-ring=BYTES): BTS and PT read from files a test writes as the kernel would
// (tests/integration/hwfeeds.py), through the backend's TraceFeeds injection point. The readers
// are the real PerfBtsSource and PerfPtSource over a mapping of the file: nothing else differs
// from a live recording.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>

#include "backend/btrace/trace_feeds.h"

namespace test_support {

// `path` is laid out like the perf mmap: the header page, then the data area at
// data_offset/data_size. Kernel addresses follow the bit-63 rule (as with kallsyms hidden), so
// the file decides alone.
backend::Result<std::unique_ptr<backend::PerfBtsSource>> open_bts_ring_file(const std::string& path);
// `path` is laid out like the PT mapping: the user page first (aux_offset, aux_size, aux_head
// filled in by the test), the AUX area at aux_offset.
backend::Result<std::unique_ptr<backend::PerfPtSource>> open_pt_aux_file(const std::string& path);

class FileTraceFeeds final : public backend::TraceFeeds {
 public:
  // An empty path serves nothing of its kind (perf as usual); patch_ring 0: the default ring.
  FileTraceFeeds(std::string bts_ring, std::string pt_aux, uint64_t patch_ring, size_t history_piece = 0)
      : bts_ring_(std::move(bts_ring)), pt_aux_(std::move(pt_aux)), patch_ring_(patch_ring), history_piece_(history_piece) {}

  bool serves_bts() const override { return !bts_ring_.empty(); }
  backend::Result<std::unique_ptr<backend::PerfBtsSource>> open_bts(pid_t) override {
    return open_bts_ring_file(bts_ring_);
  }
  bool serves_pt() const override { return !pt_aux_.empty(); }
  backend::Result<std::unique_ptr<backend::PerfPtSource>> open_pt(pid_t) override { return open_pt_aux_file(pt_aux_); }
  uint64_t patch_ring_bytes() const override { return patch_ring_; }
  size_t history_piece_branches() const override { return history_piece_; }
  std::string status_line() const override;

 private:
  std::string bts_ring_, pt_aux_;
  uint64_t patch_ring_ = 0;
  size_t history_piece_ = 0;
};

}  // namespace test_support
