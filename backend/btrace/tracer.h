// The branch-trace front the server talks to: enable/disable per thread, configure, read.
// Sources behind it: perf BTS, LBR (msr_helper), software (block stepping in the process engine).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/btrace/branch_ring.h"
#include "backend/error.h"

namespace backend {

enum class TraceSource { Auto, PerfBts, Lbr, Software };

class BranchTracer {
 public:
  virtual ~BranchTracer() = default;
  // Errors carry the text GDB shows after "E." (e.g. "Btrace already enabled.").
  virtual Result<void> enable(pid_t tid) = 0;
  virtual Result<void> disable(pid_t tid) = 0;
  virtual bool enabled(pid_t tid) const = 0;
  virtual void set_buffer_size(uint64_t bytes) = 0;          // Qbtrace-conf:bts:size
  virtual uint64_t buffer_size(pid_t tid) const = 0;         // actual size of tid's ring
  virtual Result<std::vector<TraceBlock>> read(pid_t tid, TraceRead kind) = 0;
  virtual std::vector<Branch> history(pid_t tid, size_t n) const = 0;  // newest n, oldest first
  virtual std::string source_name() const = 0;               // "software", "perf-bts", "lbr"
};

}  // namespace backend
