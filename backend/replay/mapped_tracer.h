// The branch tracer of whichever replay runs now, seen with the client's thread ids
// (replay_process.h): every call goes to the current replay's tracer with the id translated.
// The threads the client records are remembered, so a new replay records them again.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/btrace/branch_tracer.h"

namespace backend::replay {

class MappedTracer final : public BranchTracer {
 public:
  MappedTracer(std::function<BranchTracer&()> current, std::function<pid_t(pid_t)> to_real)
      : current_(std::move(current)), to_real_(std::move(to_real)) {}

  // The client's recordings, started again in the current replay's tracer.
  void reapply() {
    for (auto& [tid, format] : recorded_) (void)current_().enable(to_real_(tid), format);
  }

  void configure(const TraceSetup& setup) override { current_().configure(setup); }
  Result<void> enable(pid_t tid, TraceFormat format) override {
    auto r = current_().enable(to_real_(tid), format);
    if (r) recorded_[tid] = format;
    return r;
  }
  Result<void> disable(pid_t tid) override {
    recorded_.erase(tid);
    return current_().disable(to_real_(tid));
  }
  bool enabled(pid_t tid) const override { return current_().enabled(to_real_(tid)); }
  std::optional<TraceFormat> format(pid_t tid) const override { return current_().format(to_real_(tid)); }
  void set_buffer_size(uint64_t bytes, TraceFormat format) override { current_().set_buffer_size(bytes, format); }
  uint64_t buffer_size(pid_t tid) const override { return current_().buffer_size(to_real_(tid)); }
  void set_pt_options(const PtOptions& o) override { current_().set_pt_options(o); }
  PtOptions requested_pt_options() const override { return current_().requested_pt_options(); }
  PtOptions pt_options(pid_t tid) const override { return current_().pt_options(to_real_(tid)); }
  Result<std::vector<TraceBlock>> read(pid_t tid, TraceRead kind) override { return current_().read(to_real_(tid), kind); }
  Result<PtData> read_pt(pid_t tid, TraceRead kind) override { return current_().read_pt(to_real_(tid), kind); }
  std::vector<Branch> history(pid_t tid, size_t n) const override { return current_().history(to_real_(tid), n); }
  std::string source_name() const override { return current_().source_name(); }
  std::vector<std::string> explain() const override { return current_().explain(); }
  uint64_t history_origin(pid_t tid) const override { return current_().history_origin(to_real_(tid)); }
  // The replay counts its branches through the coverage sink already: one sink at a time.
  Result<void> start_coverage(BranchSink*, const std::vector<pid_t>&) override {
    return Error{EBUSY, "A replay's branch tracer counts branches for the replay; coverage is not available."};
  }
  void stop_coverage() override {}
  bool coverage_active() const override { return false; }

 private:
  std::function<BranchTracer&()> current_;
  std::function<pid_t(pid_t)> to_real_;
  std::map<pid_t, TraceFormat> recorded_;
};

}  // namespace backend::replay
