// A trace experiment (GDB's "tracepoints"): the tracepoints and trace state variables the client
// downloaded, whether the trace runs and why it stopped, the frames collected at hits, and the
// frame the client looks at (tfind). Pure: the stopped thread is reached through a HitSite the
// process fills, so the collection rules are tested without a process.
//
// Rules from gdbserver 13 (tracepoint.cc): at a hit, each enabled tracepoint at the address whose
// condition holds (a condition that fails to evaluate counts as false there) counts a hit and
// collects one frame; a tracepoint that reached its pass count stops the experiment after the
// hit, as does a full (linear) buffer. Frames are numbered by their place in the buffer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/error.h"
#include "backend/points/agent_expr.h"
#include "backend/trace/trace_buffer.h"
#include "backend/trace/tracepoint.h"

namespace backend::trace {

enum class StopReason { NotRun, Stopped, PassCount, BufferFull, Disconnected, Error };

struct Status {
  bool running = false;
  StopReason reason = StopReason::NotRun;
  uint32_t stop_tracepoint = 0;   // PassCount, Error: which tracepoint
  std::string stop_text;          // Stopped: the user's notes (tstop NOTES); Error: the message
  uint64_t frames = 0, created = 0, free = 0, size = 0;
  bool circular = false, disconnected = false;
  uint64_t start_usec = 0, stop_usec = 0;
  std::string user, notes;
};

// What a hit can see of the stopped thread.
struct HitSite {
  // The whole register file in the target description's order; nullopt: unreadable.
  std::function<std::optional<std::vector<uint8_t>>()> register_block;
  std::function<std::optional<uint64_t>(int regno)> reg;  // by tdesc number, up to 64 bits
  std::function<bool(uint64_t addr, std::span<uint8_t> out)> read;
  uint64_t now_usec = 0;
};

// What the process must do after a hit.
struct HitOutcome {
  bool collected = false;
  bool stop_tracing = false;      // a pass count was reached or the buffer filled: uninstall
  // while-stepping: step the thread this many instructions, calling step() after each.
  uint32_t step_tracepoint = 0;
  uint64_t step_addr = 0;
  uint64_t steps = 0;
};

enum class FrameQuery { Number, Pc, Tracepoint, Range, Outside };

class TraceExperiment {
 public:
  TraceExperiment();

  // The size of a register block ('R'): the register file of the target description.
  void set_register_block_size(size_t bytes) { block_size_ = bytes; }
  size_t register_block_size() const { return block_size_; }

  // ---- definitions ----
  // QTinit: no tracepoints, no frames, the variables back to the builtin ones; not running.
  void init();
  Result<void> define(Tracepoint tp);
  // Actions for tracepoint `number` at addr (QTDP:-…), each with its text as sent.
  struct ActionDef {
    TraceAction action;
    std::string text;
    bool stepping = false;  // a while-stepping action
  };
  Result<void> add_actions(uint32_t number, uint64_t addr, std::vector<ActionDef> actions);
  Result<void> add_source(uint32_t number, uint64_t addr, std::string text);
  void define_variable(TraceVariable v);
  void add_read_only(uint64_t start, uint64_t end) { read_only_.emplace_back(start, end); }
  bool read_only(uint64_t addr, uint64_t len) const;
  Result<void> set_enabled(uint32_t number, uint64_t addr, bool enabled);

  // ---- running ----
  Result<void> start(uint64_t now_usec);
  void stop(StopReason reason, uint64_t now_usec, uint32_t tracepoint = 0, std::string text = {});
  bool running() const { return running_; }
  // Where hits must be caught now: the enabled tracepoints' addresses while running.
  std::set<uint64_t> addresses() const;
  HitOutcome hit(uint64_t addr, const HitSite& site);
  // A frame collected elsewhere (a fast tracepoint's pad): counted as a hit of tracepoint
  // `number` at addr, stored, pass count and buffer checked. True when the experiment stopped.
  bool add_collected(uint32_t number, uint64_t addr, std::vector<uint8_t> frame, uint64_t now_usec);
  // One while-stepping step of tracepoint `number` (at addr) done: collect its step actions.
  // False: the experiment stopped meanwhile (stop stepping).
  bool step(uint32_t number, uint64_t addr, const HitSite& site);

  // ---- settings and status ----
  TraceBuffer& buffer() { return buffer_; }
  const TraceBuffer& buffer() const { return buffer_; }
  void set_disconnected(bool on) { disconnected_ = on; }
  bool disconnected() const { return disconnected_; }
  void set_user(std::string s) { user_ = std::move(s); }
  void set_notes(std::string s) { notes_ = std::move(s); }
  void set_stop_notes(std::string s) { stop_notes_ = std::move(s); }
  Status status() const;
  const std::vector<Tracepoint>& tracepoints() const { return tracepoints_; }
  const Tracepoint* find(uint32_t number, uint64_t addr) const;
  const std::map<uint32_t, TraceVariable>& variables() const { return variables_; }
  std::optional<int64_t> variable(uint32_t number, uint64_t now_usec) const;

  // ---- frames ----
  // The frame a QTFrame asks for: by number, or the next one after the selected frame whose pc
  // is a, whose tracepoint is a, or whose pc is inside (outside) [a, b]. nullopt: none.
  std::optional<size_t> find_frame(FrameQuery q, uint64_t a, uint64_t b = 0) const;
  void select(std::optional<size_t> frame) { selected_ = frame; }
  std::optional<size_t> selected() const { return selected_; }
  FrameView frame(size_t n) const { return buffer_.frame(n); }
  // The pc of a frame: its register block's, else its tracepoint's address.
  uint64_t frame_pc(size_t n) const;
  // The register block of a frame, or nullopt (then only the pc is known: frame_pc).
  std::optional<std::vector<uint8_t>> frame_registers(size_t n) const;
  void set_pc_offset(size_t byte_offset) { pc_offset_ = byte_offset; }

 private:
  bool collect(const Tracepoint& tp, std::span<const TraceAction> actions, const HitSite& site,
               uint64_t frame_addr);
  Tracepoint* find_mut(uint32_t number, uint64_t addr);
  agent::Context context(const HitSite& site);

  std::vector<Tracepoint> tracepoints_;
  std::map<uint32_t, TraceVariable> variables_;
  std::vector<std::pair<uint64_t, uint64_t>> read_only_;
  TraceBuffer buffer_;
  bool running_ = false;
  StopReason reason_ = StopReason::NotRun;
  uint32_t stop_tracepoint_ = 0;
  std::string stop_text_;
  uint64_t start_usec_ = 0, stop_usec_ = 0;
  bool disconnected_ = false;
  std::string user_, notes_, stop_notes_;
  std::optional<size_t> selected_;
  size_t block_size_ = 0;
  size_t pc_offset_ = 0;
};

// The builtin variable every experiment has: $trace_timestamp (now_usec()).
constexpr uint32_t kTimestampVariable = 1;
// Microseconds on the monotonic clock: trace start/stop times and $trace_timestamp, as
// gdbserver's (steady_clock).
uint64_t now_usec();

}  // namespace backend::trace
