#include "backend/btrace/trace_manager.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "backend/btrace/pt_synth.h"

namespace backend {

namespace {

uint64_t page_size() {
  long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<uint64_t>(page) : 4096;
}

}  // namespace

TraceManager::TraceManager(TraceSource preferred, PcReader current_pc)
    : preferred_(preferred), current_pc_(std::move(current_pc)) {}

TraceManager::~TraceManager() {
  for (auto& [tid, trace] : threads_) release(tid, trace);
}

const char* TraceManager::name_of(Kind kind) {
  switch (kind) {
    case Kind::Software: return "software";
    case Kind::PerfBts: return "perf-bts";
    case Kind::Lbr: return "lbr";
    case Kind::Pt: return "pt";
  }
  return "software";
}

void TraceManager::configure(const TraceSetup& setup) {
  setup_ = setup;
  code_ = setup_.code ? std::make_unique<BlockCache>(setup_.code) : nullptr;
}

Result<void> TraceManager::enable(pid_t tid, TraceFormat format) {
  auto existing = threads_.find(tid);
  if (existing != threads_.end() && existing->second.client) {
    if (!existing->second.inherited) return Error{EALREADY, "Btrace already enabled."};
    if ((format == TraceFormat::Pt) == is_pt(existing->second)) {
      existing->second.inherited = false;  // GDB asks for what the thread has had since its start
      existing->second.older_than_enable = true;
      return {};
    }
    release(tid, existing->second);  // another format: started anew
  }
  ThreadTrace trace;
  auto r = format == TraceFormat::Pt ? enable_pt(tid, trace) : enable_bts(tid, trace);
  if (!r) return r;
  trace.client = true;
  // A thread traced for coverage stays traced for it (the engine keeps running it in software).
  trace.coverage = existing != threads_.end() && existing->second.coverage;
  last_kind_ = trace.kind;
  threads_[tid] = std::move(trace);
  return {};
}

Result<void> TraceManager::enable_pt(pid_t tid, ThreadTrace& trace) {
  bool feed = setup_.feeds && setup_.feeds->serves_pt();
  if (!feed && !setup_.pt && setup_.synthesize_pt && code_) {
    // As many branches as a PT buffer of that size holds at about 2 bytes each (a TNT bit per
    // conditional branch, 7 bytes per return or indirect branch).
    enable_software(tid, trace, pt_buffer_size_ / 2 * BranchRing::kBytesPerBranch);
    trace.synth_pt = true;
    trace.pt_size = bts_buffer_bytes(pt_buffer_size_, page_size());  // as perf maps an AUX area
    return {};
  }
  if (!feed && !setup_.pt)
    return Error{ENODEV, setup_.pt_unavailable.empty() ? "Intel PT is not available here." : setup_.pt_unavailable};
  // The options GDB 15+ set, as far as this PMU has them (a feed has no PMU of its own).
  auto config = pt_config(pt_requested_, read_pt_features());
  if (!config) return config.error();
  auto pt = feed ? setup_.feeds->open_pt(tid) : PerfPtSource::open(tid, pt_buffer_size_, config->config);
  if (!pt) return pt.error();
  trace.kind = Kind::Pt;
  trace.pt = std::move(*pt);
  trace.pt_on = feed ? PtOptions{} : config->on;
  return {};
}

PtOptions TraceManager::pt_options(pid_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? PtOptions{} : it->second.pt_on;
}

Result<void> TraceManager::enable_bts(pid_t tid, ThreadTrace& trace) {
  if (preferred_ == TraceSource::PerfBts || preferred_ == TraceSource::Auto) {
    auto perf = setup_.feeds && setup_.feeds->serves_bts() ? setup_.feeds->open_bts(tid)
                                                           : PerfBtsSource::open(tid, buffer_size_);
    if (perf) {
      trace.kind = Kind::PerfBts;
      trace.perf = std::move(*perf);
      bts_refused_.clear();
      return {};
    }
    if (preferred_ == TraceSource::PerfBts) return perf.error();  // asked for BTS: say why not
    bts_refused_ = perf.error().message;  // auto: kept for `monitor btrace status`
  }
  uint64_t pc = current_pc_ ? current_pc_(tid) : 0;
  if (preferred_ == TraceSource::Lbr) {
    if (!setup_.lbr)
      return Error{ENODEV, "Failed to start recording: " +
                               (setup_.lbr_unavailable.empty() ? std::string("the msr_helper module is not loaded")
                                                               : setup_.lbr_unavailable) +
                               "; see 'branchstub --probe'."};
    if (auto armed = setup_.lbr->arm(tid); !armed)
      return Error{armed.error().code, "Failed to start recording: " + armed.error().message};
    trace.kind = Kind::Lbr;
    trace.last_stop_pc = pc;
  } else {
    enable_software(tid, trace, bts_buffer_bytes(buffer_size_, page_size()));
    return {};
  }
  trace.ring = make_ring(bts_buffer_bytes(buffer_size_, page_size()));
  trace.ring->set_origin(pc);
  return {};
}

void TraceManager::enable_software(pid_t tid, ThreadTrace& trace, uint64_t ring_bytes) {
  trace.kind = Kind::Software;
  // Block patching wherever the stop-per-block source would run: same history, 100-1,000x
  // faster (issue 11's bars, docs/benchmarks.md); --btrace-source=soft keeps the old way.
  trace.patch = preferred_ == TraceSource::Patch || preferred_ == TraceSource::Auto;
  trace.ring = make_ring(ring_bytes);
  trace.ring->set_origin(current_pc_ ? current_pc_(tid) : 0);
}

std::unique_ptr<BranchRing> TraceManager::make_ring(uint64_t bytes) const {
  size_t piece = setup_.feeds ? setup_.feeds->history_piece_branches() : 0;
  return std::make_unique<BranchRing>(bytes, piece ? piece : BranchRing::kPieceBranches);
}

void TraceManager::release(pid_t tid, ThreadTrace& trace) {
  if (trace.kind == Kind::Lbr && setup_.lbr) setup_.lbr->release(tid);
}

Result<void> TraceManager::disable(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return Error{ENOENT, "Branch tracing not enabled."};
  release(tid, it->second);
  if (!it->second.coverage) {
    threads_.erase(it);  // closes a perf event (disabled first)
    return {};
  }
  ThreadTrace coverage_only;  // the history goes; coverage tracing goes on
  coverage_only.coverage = true;
  coverage_only.patch = coverage_patched();
  it->second = std::move(coverage_only);
  return {};
}

bool TraceManager::enabled(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.client;
}

std::optional<TraceFormat> TraceManager::format(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return std::nullopt;
  return is_pt(it->second) ? TraceFormat::Pt : TraceFormat::Bts;
}

void TraceManager::set_buffer_size(uint64_t bytes, TraceFormat format) {
  if (format == TraceFormat::Pt) pt_buffer_size_ = bytes == 0 ? kDefaultPtBufferSize : bytes;
  else buffer_size_ = bytes == 0 ? kDefaultBufferSize : bytes;
}

uint64_t TraceManager::buffer_size(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return buffer_size_;
  if (it->second.perf) return it->second.perf->size_bytes();
  if (it->second.pt) return it->second.pt->size_bytes();
  if (it->second.synth_pt) return it->second.pt_size;
  return it->second.ring->size_bytes();
}

Result<std::vector<TraceBlock>> TraceManager::read(pid_t tid, TraceRead kind) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return Error{ENOENT, "Btrace not enabled."};
  if (is_pt(it->second)) return Error{ENOTSUP, "Unsupported Trace Format."};
  if (auto refused = refuse_first_delta(it->second, kind); !refused) return refused.error();
  uint64_t pc = current_pc_ ? current_pc_(tid) : 0;
  if (it->second.perf) return it->second.perf->read(kind, pc);
  // LBR windows are stitched into the ring as they come (gaps marked), so `delta` works as for
  // the software source.
  return it->second.ring->read(kind, pc);
}

// An adopted thread's first read: GDB put the pc where it enabled recording into its own
// trace and asks for the delta since; the thread's history is older than that. A delta that
// cannot be given (as after an overflow) makes GDB read `new` and drop its start: it gets the
// whole history instead of one stitched after that pc.
Result<void> TraceManager::refuse_first_delta(ThreadTrace& trace, TraceRead kind) {
  if (!std::exchange(trace.older_than_enable, false) || kind != TraceRead::Delta) return {};
  return Error{EOVERFLOW, "Overflow."};
}

Result<PtData> TraceManager::read_pt(pid_t tid, TraceRead kind) {
  auto it = threads_.find(tid);
  if (it == threads_.end() || !it->second.client) return Error{ENOENT, "Btrace not enabled."};
  if (!is_pt(it->second)) return Error{ENOTSUP, "Unsupported Trace Format."};
  if (auto refused = refuse_first_delta(it->second, kind); !refused) return refused.error();
  if (it->second.synth_pt) return read_synthesized_pt(tid, it->second, kind);
  auto r = it->second.pt->read(kind);
  if (!r) return r.error();
  return PtData{std::move(r->raw), r->unchanged};
}

// As a PT AUX buffer reads (PtAuxRing): no delta; `new` is everything when anything changed.
Result<PtData> TraceManager::read_synthesized_pt(pid_t tid, ThreadTrace& trace, TraceRead kind) {
  if (kind == TraceRead::Delta) return Error{ENOTSUP, "Generic Error."};
  uint64_t pc = current_pc_ ? current_pc_(tid) : 0;
  const BranchRing& ring = *trace.ring;
  if (kind == TraceRead::New && ring.total() == trace.pt_read_total && pc == trace.pt_read_pc)
    return PtData{{}, true, true};
  trace.pt_read_total = ring.total();
  trace.pt_read_pc = pc;
  std::vector<Branch> branches = ring.newest(ring.capacity());
  std::span<const Branch> path(branches);
  uint64_t start = ring.origin();  // 0 once the oldest branches were overwritten
  if (!start && !path.empty()) {
    start = path.front().to;  // the block before it is not known whole
    path = path.subspan(1);
  }
  code_->clear();  // the code as it is now (a library loaded since, a client's write)
  return PtData{synthesize_pt(path, start, pc, *code_), false, true};
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
      case TraceSource::Patch: return "patch";
      case TraceSource::Auto: return "auto (perf-bts where it works, else patch)";
    }
  }
  if ((preferred_ == TraceSource::Patch || preferred_ == TraceSource::Auto) && last_kind_ == Kind::Software)
    return "patch";
  return name_of(last_kind_);
}

std::vector<std::string> TraceManager::explain() const {
  std::vector<std::string> out;
  if (std::string fed = setup_.feeds ? setup_.feeds->status_line() : ""; !fed.empty()) out.push_back(fed);
  bool any = !threads_.empty();
  bool uses_bts = any && last_kind_ == Kind::PerfBts, uses_soft = any && last_kind_ == Kind::Software;
  bool uses_lbr = any && last_kind_ == Kind::Lbr;
  // perf BTS
  switch (preferred_) {
    case TraceSource::Auto:
      if (uses_bts) out.push_back("perf-bts: used (auto tries it first).");
      else if (!bts_refused_.empty()) out.push_back("perf-bts: not used: " + bts_refused_);
      else out.push_back("perf-bts: tried first by auto when recording starts.");
      break;
    case TraceSource::PerfBts:
      out.push_back(uses_bts ? "perf-bts: used (--btrace-source=bts)." : "perf-bts: chosen with --btrace-source=bts.");
      break;
    default:
      out.push_back("perf-bts: not used: --btrace-source chose another source.");
  }
  // LBR
  if (uses_lbr) {
    out.push_back("lbr: used (" + (setup_.lbr ? setup_.lbr->name() : std::string("msr_helper")) +
                  "): the last 16-32 branches at each stop, gaps where windows do not overlap" +
                  (lbr_error_.empty() ? "." : "; last error: " + lbr_error_));
  } else if (!setup_.lbr) {
    out.push_back("lbr: not available: " + (setup_.lbr_unavailable.empty() ? std::string("msr_helper not loaded")
                                                                             : setup_.lbr_unavailable));
  } else {
    out.push_back("lbr: available (" + setup_.lbr->name() +
                  ") but only with --btrace-source=lbr: it keeps a window of branches per stop, not every branch.");
  }
  // PT
  if (any && last_kind_ == Kind::Pt) out.push_back("pt: used (record btrace pt).");
  else if (setup_.pt || (setup_.feeds && setup_.feeds->serves_pt())) out.push_back("pt: available: GDB's 'record btrace pt' uses it.");
  else if (setup_.synthesize_pt)
    out.push_back("pt: no hardware (" + (setup_.pt_unavailable.empty() ? std::string("no intel_pt PMU") : setup_.pt_unavailable) +
                  "); 'record btrace pt' gets the software history written as a PT stream (--synthesize-pt).");
  else out.push_back("pt: not available: " + (setup_.pt_unavailable.empty() ? std::string("no intel_pt PMU") : setup_.pt_unavailable));
  // software
  if (uses_soft && preferred_ != TraceSource::Software)
    out.push_back(std::string("software: used with block patching (") +
                  (preferred_ == TraceSource::Auto ? "auto falls back to it" : "--btrace-source=patch") +
                  "): block ends record into a ring in the program, the rest stops per block.");
  else if (uses_soft) out.push_back("software: used (--btrace-source=soft): every block end stops.");
  else out.push_back("software: always available; used when nothing better is (with block patching unless --btrace-source=soft).");
  if (preferred_ != TraceSource::Software && !patch_status_.empty()) out.push_back(patch_status_);
  // What the kept history costs (a whole run kept is tens of millions of branches).
  uint64_t kept = 0, bytes = 0, rings = 0;
  for (const auto& [tid, trace] : threads_) {
    if (!trace.ring) continue;
    ++rings;
    kept += std::min<uint64_t>(trace.ring->total(), trace.ring->capacity());
    bytes += trace.ring->stored_bytes();
  }
  if (rings && kept)
    out.push_back(fmt::format("history: {} branches kept in {} KiB ({:.2f} bytes a branch, {} thread{})", kept,
                              (bytes + 1023) / 1024, static_cast<double>(bytes) / static_cast<double>(kept), rings,
                              rings == 1 ? "" : "s"));
  return out;
}

bool TraceManager::patch_traced(pid_t tid) const {
  auto it = threads_.find(tid);
  return it != threads_.end() && it->second.kind == Kind::Software && it->second.patch &&
         (it->second.client || it->second.coverage);
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
  if (it->second.coverage && sink_) {
    if (sink_->counts_only()) sink_->counted(tid, 1, Branch{from, to});
    else sink_->branch(tid, from, to);
  }
}

void TraceManager::signal_entry(pid_t tid, uint64_t from, std::optional<Branch> arrived, uint64_t to) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  ThreadTrace& t = it->second;
  bool history = t.ring && t.kind == Kind::Software;
  if (history && arrived && t.ring->retarget_newest(*arrived, to)) history = false;
  if (!from) return;
  if (history) t.ring->push(from, to);
  if (t.coverage && sink_) {
    if (sink_->counts_only()) sink_->counted(tid, 1, Branch{from, to});
    else sink_->branch(tid, from, to);
  }
}

size_t TraceManager::branches_kept(pid_t tid) const {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return 0;
  const ThreadTrace& t = it->second;
  if (t.coverage && sink_ && !sink_->counts_only()) return SIZE_MAX;
  return t.ring && t.kind == Kind::Software ? t.ring->capacity() : 0;
}

void TraceManager::record_entries(pid_t tid, std::span<const uint32_t> entries,
                                  std::span<const Branch> explicit_branches,
                                  const std::function<Branch(uint32_t)>& fixed) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  ThreadTrace& t = it->second;
  if (t.ring && t.kind == Kind::Software) t.ring->push_entries(entries, explicit_branches, fixed);
  if (t.coverage && sink_ && !sink_->counts_only())
    for (uint32_t e : entries) {
      Branch b = (e & BranchRing::kExplicit) ? explicit_branches[e & ~BranchRing::kExplicit] : fixed(e);
      sink_->branch(tid, b.from, b.to);
    }
}

void TraceManager::record_count(pid_t tid, uint64_t n, Branch last) {
  auto it = threads_.find(tid);
  if (n && it != threads_.end() && it->second.coverage && sink_ && sink_->counts_only()) sink_->counted(tid, n, last);
}

void TraceManager::forget_fixed_ids() {
  for (auto& [tid, t] : threads_)
    if (t.ring) t.ring->forget_fixed();
}

void TraceManager::stitch(ThreadTrace& trace, const LbrWindow& window, uint64_t pc) {
  // The history since its last gap, as far back as a window can reach.
  size_t reach = std::max<size_t>(window.oldest_first.size(), window.depth);
  auto recent = trace.ring->newest(reach);
  for (size_t i = recent.size(); i-- > 0;)
    if (is_gap(recent[i])) {
      recent.erase(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      break;
    }
  LbrStopPlace where{trace.last_stop_pc, pc, std::nullopt, {}};
  if (window.taken_total) {
    where.new_branches = *window.taken_total - trace.lbr_taken.value_or(0);
    trace.lbr_taken = window.taken_total;
  }
  if (code_) {
    code_->clear();  // code may have changed since the last stop; a few blocks are cheap to decode
    where.straight_line = [this](uint64_t from, uint64_t to) { return straight_line_reaches(*code_, from, to); };
  }
  LbrStitch s = stitch_lbr_window(recent, window, &where);
  if (s.gap) trace.ring->push(trace.last_stop_pc, 0);  // gap_after(last_stop_pc)
  for (size_t i = s.skip; i < window.oldest_first.size(); ++i)
    trace.ring->push(window.oldest_first[i].from, window.oldest_first[i].to);
}

void TraceManager::thread_stopped(pid_t tid) {
  // A thread created while the process ran is traced for coverage from its first stop on
  // (from its first instruction where the engine calls thread_created()).
  if (sink_ && !threads_.count(tid)) thread_created(tid, 0);
  auto it = threads_.find(tid);
  if (it == threads_.end() || it->second.kind != Kind::Lbr || !setup_.lbr) return;
  ThreadTrace& trace = it->second;
  uint64_t pc = current_pc_ ? current_pc_(tid) : 0;
  auto window = setup_.lbr->window(tid, pc);
  if (!window) {
    lbr_error_ = window.error().message;
  } else if (window->sequence != 0 && window->sequence != trace.lbr_sequence) {
    trace.lbr_sequence = window->sequence;
    stitch(trace, *window, pc);
  }
  trace.last_stop_pc = pc;
}

void TraceManager::thread_exited(pid_t tid) {
  auto it = threads_.find(tid);
  if (it == threads_.end()) return;
  release(tid, it->second);
  if (it->second.coverage && sink_) sink_->thread_ended(tid, 0);
  threads_.erase(it);
}

void TraceManager::thread_created(pid_t tid, pid_t parent) {
  if (threads_.count(tid)) return;
  ThreadTrace trace;
  // A thread of a recorded thread is recorded from its first instruction, as GDB's native
  // target records it (GDB enables a new thread only when it learns of it, at the next stop:
  // over a remote connection, everything the thread did before would be missing). GDB's own
  // enable then adopts it (enable() above).
  auto p = threads_.find(parent);
  if (p != threads_.end() && p->second.client) {
    auto on = is_pt(p->second) ? enable_pt(tid, trace) : enable_bts(tid, trace);
    if (on) {
      trace.client = true;
      trace.inherited = true;
    } else {
      trace = ThreadTrace{};
    }
  }
  if (sink_) {  // coverage traces new threads from their first instruction
    trace.coverage = true;
    if (!trace.client) trace.patch = coverage_patched();
  }
  if (!trace.client && !trace.coverage) return;
  threads_.emplace(tid, std::move(trace));
  if (sink_) sink_->thread_started(tid, current_pc_ ? current_pc_(tid) : 0);
}

Result<void> TraceManager::start_coverage(BranchSink* sink, const std::vector<pid_t>& threads) {
  if (!sink) return Error{EINVAL, "No coverage sink."};
  if (sink_) return Error{EALREADY, "Coverage is already being recorded."};
  sink_ = sink;
  for (pid_t tid : threads) {
    bool fresh = !threads_.count(tid);
    ThreadTrace& trace = threads_[tid];  // a new entry is a coverage-only software thread
    trace.coverage = true;
    if (fresh) trace.patch = coverage_patched();
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
