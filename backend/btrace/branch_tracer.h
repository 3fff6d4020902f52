// The branch-trace front the server talks to: enable/disable per thread, configure, read.
// Sources behind it: perf BTS, Intel PT, LBR (msr_helper), software (block stepping in the
// process engine).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/btrace/branch_ring.h"
#include "backend/btrace/perf/pt_features.h"
#include "backend/x86/block_cache.h"
#include "backend/error.h"

namespace backend {

class LbrFeed;
class TraceFeeds;

// Patch: the software source with hot block ends patched to record into a ring in the
// inferior (backend/btrace/patch/patch_tracer.h); what auto uses where perf BTS does not open.
enum class TraceSource { Auto, PerfBts, Lbr, Software, Patch };
// The format GDB asked for: Qbtrace:bts (blocks) or Qbtrace:pt (a raw Intel PT stream).
enum class TraceFormat { Bts, Pt };

// What the server knows about the machine, handed to every process's tracer (the server finds
// it out once; a tracer never probes).
struct TraceSetup {
  std::shared_ptr<LbrFeed> lbr;  // the server's one LBR feed; null: none (lbr_unavailable says why)
  std::string lbr_unavailable;
  // The process's code as the CPU sees it (our breakpoints hidden): LBR windows are fitted to
  // it when they are stitched. Set per process.
  CodeReader code;
  bool pt = false;               // Intel PT can be recorded here
  std::string pt_unavailable;    // why not
  // BTS and PT from elsewhere than perf events, and the patch ring's size: only the test build
  // of the server sets it (backend/btrace/trace_feeds.h); null: the hardware, as always.
  std::shared_ptr<TraceFeeds> feeds;
  // Where the block-patching source keeps its plans between runs (patch/plan_cache.h); "": none.
  std::string plan_cache_dir;
  // `record btrace pt` where no PT hardware is: the software history served as the PT stream a
  // CPU would have written (pt_synth.h; --synthesize-pt).
  bool synthesize_pt = false;
};

struct PtData {
  std::vector<uint8_t> raw;  // the AUX buffer, oldest byte first
  bool unchanged = false;    // `new` read with nothing new: GDB keeps what it has
  bool synthesized = false;  // written from a software history (no CPU's errata apply)
};

// Receives the taken branches of the threads traced for coverage (backend/coverage): where each
// thread's first block begins, every taken branch, and where tracing of a thread ends. Nothing
// is kept by the tracer for it: the sink counts what it needs.
class BranchSink {
 public:
  virtual ~BranchSink() = default;
  virtual void thread_started(pid_t tid, uint64_t pc) = 0;        // its first block begins at pc
  virtual void branch(pid_t tid, uint64_t from, uint64_t to) = 0;  // from = the branch instruction
  // Tracing of tid ends with the thread stopped at pc (pc not executed); 0 = the thread is gone
  // (it exited: where exactly is not known to the tracer).
  virtual void thread_ended(pid_t tid, uint64_t pc) = 0;
  // A sink that only counts (replay's branch count) gets n branches at once through counted()
  // instead of branch() per branch: block patching drains millions without building them.
  // `last` is the newest of them (reverse execution starts from it).
  virtual bool counts_only() const { return false; }
  virtual void counted(pid_t /*tid*/, uint64_t /*n*/, Branch /*last*/) {}
};

// A system call a recorded thread made without stopping (block patching's system-call buffer,
// `branchstub record` only), handed over at the thread's next stop in its place among the
// branches: the branches taken before it are counted when the sink gets it. `data`: the bytes
// it wrote at its output argument (valid during the call).
struct BufferedSyscall {
  uint64_t nr = 0;
  uint64_t args[6] = {};
  int64_t result = 0;
  uint64_t pc = 0;  // the instruction after the program's `syscall`
  uint64_t data_addr = 0;  // where `data` was written in the program
  std::span<const uint8_t> data;
};
class SyscallBufferSink {
 public:
  virtual ~SyscallBufferSink() = default;
  virtual void buffered_syscall(pid_t tid, const BufferedSyscall& call) = 0;
};

class BranchTracer {
 public:
  virtual ~BranchTracer() = default;
  virtual void configure(const TraceSetup&) {}
  // Errors carry the text GDB shows after "E." (e.g. "Btrace already enabled.").
  virtual Result<void> enable(pid_t tid, TraceFormat format = TraceFormat::Bts) = 0;
  virtual Result<void> disable(pid_t tid) = 0;
  virtual bool enabled(pid_t tid) const = 0;
  virtual std::optional<TraceFormat> format(pid_t) const { return TraceFormat::Bts; }
  // Qbtrace-conf:<format>:size, for the next enable of that format.
  virtual void set_buffer_size(uint64_t bytes, TraceFormat format = TraceFormat::Bts) = 0;
  virtual uint64_t buffer_size(pid_t tid) const = 0;         // actual size of tid's buffer
  // Qbtrace-conf:pt:ptwrite / pt:event-tracing, for the next PT enable; and what tid's PT
  // recording actually has on (PTWRITE stays off where the PMU lacks it).
  virtual void set_pt_options(const PtOptions&) {}
  virtual PtOptions requested_pt_options() const { return {}; }
  virtual PtOptions pt_options(pid_t) const { return {}; }
  virtual Result<std::vector<TraceBlock>> read(pid_t tid, TraceRead kind) = 0;  // BTS format
  virtual Result<PtData> read_pt(pid_t, TraceRead) { return Error{ENOTSUP, "Unsupported Trace Format."}; }
  virtual std::vector<Branch> history(pid_t tid, size_t n) const = 0;  // newest n, oldest first
  virtual std::string source_name() const = 0;               // "software", "perf-bts", "lbr", "pt"
  // One line per source: which one recording uses and why each other one is not used.
  virtual std::vector<std::string> explain() const { return {}; }
  // The address recording of tid started at, while the history still holds its first branch
  // (0 otherwise): the start of the oldest block history() implies.
  virtual uint64_t history_origin(pid_t tid) const = 0;

  // Coverage: the software engine traces `threads` (and each thread created later, where the
  // engine reports new threads through TraceManager::thread_created) and hands every taken
  // branch to `sink`. No per-branch history is kept for them; a thread the client records
  // (enable()) keeps its history as before and feeds the sink too. One sink at a time.
  virtual Result<void> start_coverage(BranchSink* sink, const std::vector<pid_t>& threads) = 0;
  // Ends every coverage thread at its current pc (sink->thread_ended) and forgets the sink.
  virtual void stop_coverage() = 0;
  virtual bool coverage_active() const = 0;
  // Coverage threads started from now on run through block patching where the source allows
  // it (auto, patch): every branch still reaches the sink, from the program's ring at each
  // stop instead of a stop per block (record and replay count this way).
  virtual void set_coverage_patching(bool /*on*/) {}
  // Block patching runs the program's non-blocking calls without stops and hands them to
  // `sink` (nullptr: off). For a recording only: the thread then runs under PTRACE_CONT through
  // the patches, every other call stopping at an int3 before it (docs/record-replay.md).
  virtual void set_syscall_buffer(SyscallBufferSink* /*sink*/) {}
  // The patch rings keep the system-call buffer's room even without a sink: a replay of a
  // recording made with the buffer maps what the recording mapped.
  virtual void set_syscall_buffer_room(bool /*on*/) {}
};

}  // namespace backend
