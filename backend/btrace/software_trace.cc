#include "backend/btrace/software_trace.h"

#include <algorithm>

namespace backend {

Result<uint64_t> TraceController::stop_address_for(uint64_t pc) {
  reset();
  uint64_t at = pc;
  for (;;) {
    auto block = cache_.block_at(at);
    if (!block) {
      if (path_.empty()) return block.error();
      // The previous direct branch leads somewhere we cannot decode: stop on it instead.
      Branch last = pending_.back();
      pending_.pop_back();
      auto prev = cache_.block_at(path_.back().begin);
      if (!prev) return prev.error();
      stop_insn_ = prev->end;
      return last.from;
    }
    path_.push_back(Segment{at, block->end.addr});
    const FlowInsn& end = block->end;
    bool direct = (end.kind == FlowKind::Jump || end.kind == FlowKind::Call) && end.direct_target;
    if (direct) {
      uint64_t target = *end.direct_target;
      bool cycle = std::any_of(path_.begin(), path_.end(), [&](const Segment& s) {
        return target >= s.begin && target <= s.last;
      });
      if (!cycle && pending_.size() < kMaxDirectChain) {
        pending_.push_back(Branch{end.addr, target});
        at = target;
        continue;
      }
    }
    stop_insn_ = end;
    return end.addr;
  }
}

bool TraceController::commit(uint64_t stop_pc, SoftwareTraceThread& thread) {
  bool found = false;
  for (size_t k = path_.size(); k-- > 0;) {
    if (stop_pc >= path_[k].begin && stop_pc <= path_[k].last) {
      for (size_t i = 0; i < k; ++i) thread.record(pending_[i].from, pending_[i].to);
      found = true;
      break;
    }
  }
  pending_.clear();  // stop_insn_ stays: the engine emulates it next
  path_.clear();
  return found;
}

void TraceController::reset() {
  pending_.clear();
  path_.clear();
  stop_insn_ = FlowInsn{};
}

}  // namespace backend
