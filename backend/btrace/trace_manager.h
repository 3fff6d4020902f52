// The BranchTracer the server talks to. Per thread it picks a source when GDB enables
// recording: for `record btrace bts`, perf BTS where the kernel gives it (Intel bare metal),
// the msr_helper LBR module when asked for, otherwise the software source, whose branches the
// process engine records while it runs the thread block by block; for `record btrace pt`,
// Intel PT through perf where the PMU exists.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>

#include "backend/btrace/branch_ring.h"
#include "backend/btrace/lbr/lbr_feed.h"
#include "backend/btrace/perf/perf_bts.h"
#include "backend/btrace/perf/perf_pt.h"
#include "backend/btrace/branch_tracer.h"
#include "backend/btrace/trace_feeds.h"

namespace backend {

class TraceManager : public BranchTracer {
 public:
  using PcReader = std::function<uint64_t(pid_t tid)>;
  static constexpr uint64_t kDefaultBufferSize = 64 * 1024;   // GDB's default BTS buffer
  static constexpr uint64_t kDefaultPtBufferSize = 16 * 1024;  // GDB's default PT buffer

  TraceManager(TraceSource preferred, PcReader current_pc);
  ~TraceManager() override;

  // BranchTracer
  void configure(const TraceSetup& setup) override;
  Result<void> enable(pid_t tid, TraceFormat format = TraceFormat::Bts) override;
  Result<void> disable(pid_t tid) override;
  bool enabled(pid_t tid) const override;
  std::optional<TraceFormat> format(pid_t tid) const override;
  void set_buffer_size(uint64_t bytes, TraceFormat format = TraceFormat::Bts) override;
  uint64_t buffer_size(pid_t tid) const override;
  void set_pt_options(const PtOptions& options) override { pt_requested_ = options; }
  PtOptions requested_pt_options() const override { return pt_requested_; }
  PtOptions pt_options(pid_t tid) const override;
  Result<std::vector<TraceBlock>> read(pid_t tid, TraceRead kind) override;
  Result<PtData> read_pt(pid_t tid, TraceRead kind) override;
  std::vector<Branch> history(pid_t tid, size_t n) const override;
  std::string source_name() const override;
  std::vector<std::string> explain() const override;
  uint64_t history_origin(pid_t tid) const override;
  Result<void> start_coverage(BranchSink* sink, const std::vector<pid_t>& threads) override;
  void stop_coverage() override;
  bool coverage_active() const override { return sink_ != nullptr; }
  void set_coverage_patching(bool on) override { coverage_patching_ = on; }
  void set_syscall_buffer(SyscallBufferSink* sink) override { syscall_buffer_ = sink; }
  SyscallBufferSink* syscall_buffer() const { return coverage_patched() ? syscall_buffer_ : nullptr; }
  void set_syscall_buffer_room(bool on) override { syscall_buffer_room_ = on; }
  bool syscall_buffer_room() const { return coverage_patched() && (syscall_buffer_ || syscall_buffer_room_); }

  // ---- for the process engine ----
  // Threads whose branches the engine must record itself (software source, and every thread
  // traced for coverage whatever the client's source).
  bool software_traced(pid_t tid) const;
  // Client-recorded software threads of --btrace-source=patch (and coverage threads when
  // set_coverage_patching() asked for it): the engine may run them through patched code (their
  // branches come from the inferior's ring, then from the engine as usual).
  bool patch_traced(pid_t tid) const;
  void record(pid_t tid, uint64_t from, uint64_t to);
  // A signal delivered at `arrived.to` entered its handler `to`; `from`: the last instruction
  // run before it (0: none known). Where nothing ran since the newest branch (`arrived`) or
  // since recording began, the history shows that branch (or the origin) going to the handler
  // instead of an empty block (BranchRing::retarget_newest). Counts and coverage are
  // record(from, to)'s, whatever the history does.
  void signal_entry(pid_t tid, uint64_t from, std::optional<Branch> arrived, uint64_t to);
  // Many branches of one thread, oldest first (block patching drains its ring with one call):
  // see BranchRing::push_entries. The ids are the caller's; forget_fixed_ids() when they are
  // numbered anew (a new block-patching tracer).
  void record_entries(pid_t tid, std::span<const uint32_t> entries, std::span<const Branch> explicit_branches,
                      const std::function<Branch(uint32_t)>& fixed);
  void forget_fixed_ids();
  // How many taken branches one drain of tid's ring brought (record_entries() gets only the
  // newest kept): a counting coverage sink gets them all at once.
  void record_count(pid_t tid, uint64_t n, Branch last);
  // How many of a batch's newest branches record_entries() keeps at most for tid (its ring's
  // capacity; every one while a coverage sink sees them): a drainer builds no more than that.
  size_t branches_kept(pid_t tid) const;
  // The thread stopped: LBR-backed threads take their snapshot now; while coverage runs, a
  // thread not traced yet (created since) is traced from here.
  void thread_stopped(pid_t tid);
  // A thread exited: its trace is freed (gdbserver does the same).
  void thread_exited(pid_t tid);
  // A new thread appeared (clone of `parent`), stopped: it is traced from here on when its
  // parent is recorded for the client (with the parent's format; GDB's enable of it later
  // adopts that) or while coverage runs, so the engine must run it traced.
  void thread_created(pid_t tid, pid_t parent);
  // --btrace-source=patch: what block patching did so far (a line of explain()).
  void set_patch_status(std::string line) { patch_status_ = std::move(line); }
  uint64_t patch_ring_bytes() const { return setup_.feeds ? setup_.feeds->patch_ring_bytes() : 0; }
  std::unique_ptr<BranchRing> make_ring(uint64_t bytes) const;
  const std::string& plan_cache_dir() const { return setup_.plan_cache_dir; }

 private:
  enum class Kind { Software, PerfBts, Lbr, Pt };
  struct ThreadTrace {
    Kind kind = Kind::Software;
    bool client = false;                     // enable()d: GDB reads its history
    bool inherited = false;                  // client: traced as its parent's new thread, not enable()d yet
    bool older_than_enable = false;          // adopted by enable(): the next delta read is refused
    bool coverage = false;                   // traced for the coverage sink
    bool patch = false;                      // Software, recorded through patched code where it can
    std::unique_ptr<BranchRing> ring;        // Software and Lbr
    std::unique_ptr<PerfBtsSource> perf;     // PerfBts
    std::unique_ptr<PerfPtSource> pt;        // Pt
    PtOptions pt_on;                         // Pt: the optional packets it records
    // Software, served as PT (setup_.synthesize_pt): the size GDB asked for, and what the last
    // read gave (branches, pc), so that a `new` read with nothing new says so.
    bool synth_pt = false;
    uint64_t pt_size = 0;
    uint64_t pt_read_total = UINT64_MAX, pt_read_pc = 0;
    uint64_t lbr_sequence = 0;
    std::optional<uint64_t> lbr_taken;      // Lbr: the counter at the last window (0 when armed)
    uint64_t last_stop_pc = 0;               // Lbr: where the history known so far ends
  };
  static const char* name_of(Kind kind);
  static bool is_pt(const ThreadTrace& t) { return t.kind == Kind::Pt || t.synth_pt; }
  Result<void> enable_bts(pid_t tid, ThreadTrace& trace);
  Result<void> enable_pt(pid_t tid, ThreadTrace& trace);
  void enable_software(pid_t tid, ThreadTrace& trace, uint64_t ring_bytes);
  Result<PtData> read_synthesized_pt(pid_t tid, ThreadTrace& trace, TraceRead kind);
  void release(pid_t tid, ThreadTrace& trace);
  Result<void> refuse_first_delta(ThreadTrace& trace, TraceRead kind);
  void stitch(ThreadTrace& trace, const LbrWindow& window, uint64_t pc);

  TraceSource preferred_;
  PcReader current_pc_;
  TraceSetup setup_;
  std::unique_ptr<BlockCache> code_;  // over setup_.code, for LBR stitching
  uint64_t buffer_size_ = kDefaultBufferSize;
  uint64_t pt_buffer_size_ = kDefaultPtBufferSize;
  PtOptions pt_requested_;
  std::map<pid_t, ThreadTrace> threads_;
  BranchSink* sink_ = nullptr;
  Kind last_kind_ = Kind::Software;
  std::string bts_refused_;  // auto: why perf BTS was not used (the last enable's error)
  std::string lbr_error_;    // the last failure to read a window
  std::string patch_status_;
  bool coverage_patching_ = false;
  SyscallBufferSink* syscall_buffer_ = nullptr;
  bool syscall_buffer_room_ = false;
  bool coverage_patched() const {
    return coverage_patching_ && (preferred_ == TraceSource::Patch || preferred_ == TraceSource::Auto);
  }
};

}  // namespace backend
