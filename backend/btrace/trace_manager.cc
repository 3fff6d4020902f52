#include "backend/btrace/trace_manager.h"

#include <unistd.h>

#include <cerrno>

namespace backend {

namespace {
uint64_t page_size() {
  long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<uint64_t>(page) : 4096;
}
}  // namespace

TraceManager::TraceManager(TraceSource preferred, PcReader current_pc)
    : preferred_(preferred), current_pc_(std::move(current_pc)) {}

TraceManager::~TraceManager() = default;

const char* TraceManager::name_of(Kind kind) {
  switch (kind) {
    case Kind::Software: return "software";
    case Kind::PerfBts: return "perf-bts";
    case Kind::Lbr: return "lbr";
  }
  return "software";
}

Result<void> TraceManager::enable(pid_t tid) {
  auto existing = threads_.find(tid);
  if (existing != threads_.end() && existing->second.client) return Error{EALREADY, "Btrace already enabled."};
  ThreadTrace trace;
  if (preferred_ == TraceSource::PerfBts || preferred_ == TraceSource::Auto) {
    auto perf = PerfBtsSource::open(tid, buffer_size_);
    if (perf) {
      trace.kind = Kind::PerfBts;
      trace.perf = std::move(*perf);
    } else if (preferred_ == TraceSource::PerfBts) {
      return perf.error();  // asked for BTS explicitly: say why it does not work
    }
  }
  if (!trace.perf) {
    if (preferred_ == TraceSource::Lbr) {
      if (!lbr_reader_)
        return Error{ENODEV, "Failed to start recording: the msr_helper module is not loaded "
                             "(/dev/msr_helper missing); see 'branchstub --probe'."};
      trace.kind = Kind::Lbr;
    } else {
      trace.kind = Kind::Software;
    }
    trace.ring = std::make_unique<BranchRing>(bts_buffer_bytes(buffer_size_, page_size()));
    if (trace.kind == Kind::Software && current_pc_) trace.ring->set_origin(current_pc_(tid));
  }
  trace.client = true;
  // A thread traced for coverage stays traced for it (the engine keeps running it in software).
  trace.coverage = existing != threads_.end() && existing->second.coverage;
  last_kind_ = trace.kind;
  bool lbr = trace.kind == Kind::Lbr;
  threads_[tid] = std::move(trace);
  if (lbr) thread_stopped(tid);  // arms the module's LBR for this thread
  return {};
}

Result<void> TraceManager::disable(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return Error{ENOENT, "Branch tracing not enabled."};
  if (!it->second.coverage) {
    threads_.erase(it);
    return {};
  }
  ThreadTrace coverage_only;  // the history goes; coverage tracing goes on
  coverage_only.coverage = true;
  it->second = std::move(coverage_only);
  return {};
}

bool TraceManager::enabled(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.client;
}

void TraceManager::set_buffer_size(uint64_t bytes) { buffer_size_ = bytes == 0 ? kDefaultBufferSize : bytes; }

uint64_t TraceManager::buffer_size(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return buffer_size_;
  if (it->second.perf) return it->second.perf->size_bytes();
  return it->second.ring->size_bytes();
}

Result<std::vector<TraceBlock>> TraceManager::read(pid_t tid, TraceRead kind) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return Error{ENOENT, "Btrace not enabled."};
  uint64_t pc = current_pc_ ? current_pc_(tid) : 0;
  if (it->second.perf) return it->second.perf->read(kind, pc);
  // LBR windows are not contiguous with what GDB read before: a delta cannot be stitched, so
  // GDB is sent to a full `new` read (it does that silently after an overflow error).
  if (it->second.kind == Kind::Lbr && kind == TraceRead::Delta) return Error{EOVERFLOW, "Overflow."};
  return it->second.ring->read(kind, pc);
}

std::vector<Branch> TraceManager::history(pid_t tid, size_t n) const {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.ring) return {};
  return it->second.ring->newest(n);
}

uint64_t TraceManager::history_origin(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.ring || it->second.kind != Kind::Software) return 0;
  return it->second.ring->origin();
}

std::string TraceManager::source_name() const {
  if (threads_.empty()) {
    switch (preferred_) {
      case TraceSource::PerfBts: return "perf-bts";
      case TraceSource::Lbr: return "lbr";
      case TraceSource::Software: return "software";
      case TraceSource::Auto: return "auto (perf-bts where it works, else software)";
    }
  }
  return name_of(last_kind_);
}

bool TraceManager::software_traced(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && (it->second.kind == Kind::Software || it->second.coverage);
}

void TraceManager::record(pid_t tid, uint64_t from, uint64_t to) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  // LBR rings are filled from the module's snapshots, never from the engine.
  if (it->second.ring && it->second.kind == Kind::Software) it->second.ring->push(from, to);
  if (it->second.coverage && sink_) sink_->branch(tid, from, to);
}

void TraceManager::thread_stopped(pid_t tid) {
  // A thread created while the process ran is traced for coverage from its first stop on
  // (from its first instruction where the engine calls thread_created()).
  if (sink_ && !threads_.count(tid)) thread_created(tid);
  auto it = threads_.find(tid);
  if (it == threads_.end() || it->second.kind != Kind::Lbr || !lbr_reader_) return;
  uint64_t sequence = 0;
  auto branches = lbr_reader_(tid, &sequence);  // oldest first
  if (sequence == it->second.lbr_sequence) return;  // no new stop since the last snapshot
  it->second.lbr_sequence = sequence;
  // Consecutive snapshots overlap (a stop that took few branches repeats most of the window):
  // append only what follows the newest branch already recorded, if the snapshot holds it.
  size_t first_new = 0;
  auto last = it->second.ring->newest(1);
  if (!last.empty())
    for (size_t i = branches.size(); i-- > 0;)
      if (branches[i].from == last[0].from && branches[i].to == last[0].to) {
        first_new = i + 1;
        break;
      }
  for (size_t i = first_new; i < branches.size(); ++i) it->second.ring->push(branches[i].from, branches[i].to);
}

void TraceManager::thread_exited(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  if (it->second.coverage && sink_) sink_->thread_ended(tid, 0);
  threads_.erase(it);
}

void TraceManager::thread_created(pid_t tid) {
  if (!sink_ || threads_.count(tid)) return;
  ThreadTrace trace;
  trace.coverage = true;
  threads_.emplace(tid, std::move(trace));
  sink_->thread_started(tid, current_pc_ ? current_pc_(tid) : 0);
}

Result<void> TraceManager::start_coverage(BranchSink* sink, const std::vector<pid_t>& threads) {
  if (!sink) return Error{EINVAL, "No coverage sink."};
  if (sink_) return Error{EALREADY, "Coverage is already being recorded."};
  sink_ = sink;
  for (pid_t tid : threads) {
    ThreadTrace& trace = threads_[tid];  // a new entry is a coverage-only software thread
    trace.coverage = true;
    sink_->thread_started(tid, current_pc_ ? current_pc_(tid) : 0);
  }
  return {};
}

void TraceManager::stop_coverage() {
  if (!sink_) return;
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (!it->second.coverage) {
      ++it;
      continue;
    }
    sink_->thread_ended(it->first, current_pc_ ? current_pc_(it->first) : 0);
    it->second.coverage = false;
    it = it->second.client ? std::next(it) : threads_.erase(it);
  }
  sink_ = nullptr;
}

}  // namespace backend
