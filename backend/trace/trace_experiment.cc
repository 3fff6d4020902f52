#include "backend/trace/trace_experiment.h"

#include <time.h>

#include <cerrno>

#include "backend/points/agent_expr.h"

namespace backend::trace {

namespace {

// Memory an expression asks for is kept up to this much per request (a runaway `trace` of a
// garbage length would otherwise fill the buffer with one block).
constexpr uint64_t kMaxCollect = 64 * 1024;

}  // namespace

uint64_t now_usec() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

TraceExperiment::TraceExperiment() { init(); }

void TraceExperiment::init() {
  tracepoints_.clear();
  variables_.clear();
  read_only_.clear();
  buffer_.clear();
  running_ = false;
  selected_.reset();
  TraceVariable ts;
  ts.number = kTimestampVariable;
  ts.builtin = true;
  ts.name = "trace_timestamp";
  variables_[ts.number] = ts;
}

Tracepoint* TraceExperiment::find_mut(uint32_t number, uint64_t addr) {
  for (auto& tp : tracepoints_)
    if (tp.number == number && tp.addr == addr) return &tp;
  return nullptr;
}

const Tracepoint* TraceExperiment::find(uint32_t number, uint64_t addr) const {
  for (const auto& tp : tracepoints_)
    if (tp.number == number && tp.addr == addr) return &tp;
  return nullptr;
}

Result<void> TraceExperiment::define(Tracepoint tp) {
  if (Tracepoint* old = find_mut(tp.number, tp.addr)) *old = std::move(tp);
  else tracepoints_.push_back(std::move(tp));
  return {};
}

Result<void> TraceExperiment::add_actions(uint32_t number, uint64_t addr, std::vector<ActionDef> actions) {
  Tracepoint* tp = find_mut(number, addr);
  if (!tp) return Error{ENOENT, "Tracepoint " + std::to_string(number) + " at this address is not defined."};
  for (auto& a : actions) {
    // GDB puts the 'S' on the first while-stepping packet only (gdbserver keeps it on).
    bool stepping = tp->stepping_started = tp->stepping_started || a.stepping;
    (stepping ? tp->step_actions : tp->actions).push_back(std::move(a.action));
    (stepping ? tp->step_action_texts : tp->action_texts).push_back(std::move(a.text));
  }
  return {};
}

Result<void> TraceExperiment::add_source(uint32_t number, uint64_t addr, std::string text) {
  Tracepoint* tp = find_mut(number, addr);
  if (!tp) return Error{ENOENT, "Tracepoint " + std::to_string(number) + " at this address is not defined."};
  tp->sources.push_back(std::move(text));
  return {};
}

void TraceExperiment::define_variable(TraceVariable v) {
  v.value = v.initial;
  v.has_value = true;
  variables_[v.number] = std::move(v);
}

bool TraceExperiment::read_only(uint64_t addr, uint64_t len) const {
  for (const auto& [start, end] : read_only_)
    if (addr >= start && addr + len <= end) return true;
  return false;
}

Result<void> TraceExperiment::set_enabled(uint32_t number, uint64_t addr, bool enabled) {
  Tracepoint* tp = find_mut(number, addr);
  if (!tp) return Error{ENOENT, "No tracepoint " + std::to_string(number) + " at that address."};
  tp->enabled = enabled;
  return {};
}

Result<void> TraceExperiment::start(uint64_t now_usec) {
  buffer_.clear();
  for (auto& tp : tracepoints_) {
    tp.hits = 0;
    tp.bytes_used = 0;
  }
  for (auto& [n, v] : variables_) v.value = v.initial;
  running_ = true;
  reason_ = StopReason::NotRun;
  stop_tracepoint_ = 0;
  stop_text_.clear();
  stop_notes_.clear();
  start_usec_ = now_usec;
  stop_usec_ = 0;
  selected_.reset();
  return {};
}

void TraceExperiment::stop(StopReason reason, uint64_t now_usec, uint32_t tracepoint, std::string text) {
  if (!running_) return;
  running_ = false;
  reason_ = reason;
  stop_tracepoint_ = tracepoint;
  stop_text_ = std::move(text);
  stop_usec_ = now_usec;
}

std::set<uint64_t> TraceExperiment::addresses() const {
  std::set<uint64_t> out;
  if (!running_) return out;
  for (const auto& tp : tracepoints_)
    if (tp.enabled && !tp.is_static) out.insert(tp.addr);
  return out;
}

std::optional<int64_t> TraceExperiment::variable(uint32_t number, uint64_t now_usec) const {
  if (number == kTimestampVariable) return static_cast<int64_t>(now_usec);
  auto it = variables_.find(number);
  if (it == variables_.end() || !it->second.has_value) return std::nullopt;
  return it->second.value;
}

// What an expression at a hit reads: the stopped thread and the trace state variables.
agent::Context TraceExperiment::context(const HitSite& site) {
  agent::Context ctx;
  ctx.reg = site.reg;
  ctx.read = site.read;
  ctx.get_tsv = [this, now = site.now_usec](int n) { return variable(static_cast<uint32_t>(n), now); };
  ctx.set_tsv = [this](int n, int64_t v) {
    auto it = variables_.find(static_cast<uint32_t>(n));
    if (it == variables_.end()) return false;
    it->second.value = v;
    it->second.has_value = true;
    return true;
  };
  return ctx;
}

HitOutcome TraceExperiment::hit(uint64_t addr, const HitSite& site) {
  HitOutcome out;
  if (!running_) return out;
  agent::Context cond = context(site);
  std::optional<std::pair<uint32_t, StopReason>> stopping;
  for (auto& tp : tracepoints_) {
    if (!running_) break;
    if (tp.addr != addr || !tp.enabled || tp.is_static) continue;
    if (!tp.condition.empty()) {
      auto e = agent::evaluate(tp.condition, cond);
      if (e.outcome != agent::Outcome::True) continue;
    }
    ++tp.hits;
    out.collected = true;
    if (!collect(tp, tp.actions, site, addr)) {
      stopping = {tp.number, StopReason::BufferFull};
      break;
    }
    if (tp.step_count > 0 && !tp.step_actions.empty() && out.steps == 0) {
      out.step_tracepoint = tp.number;
      out.step_addr = tp.addr;
      out.steps = tp.step_count;
    }
    if (tp.pass_count > 0 && tp.hits >= tp.pass_count && !stopping) stopping = {tp.number, StopReason::PassCount};
  }
  if (stopping) {
    stop(stopping->second, site.now_usec, stopping->second == StopReason::PassCount ? stopping->first : 0);
    out.stop_tracing = true;
    out.steps = 0;
  }
  return out;
}

bool TraceExperiment::add_collected(uint32_t number, uint64_t addr, std::vector<uint8_t> frame, uint64_t now) {
  if (!running_) return false;
  Tracepoint* tp = find_mut(number, addr);
  if (!tp) return false;
  ++tp->hits;
  uint64_t blocks = frame.size() > 6 ? frame.size() - 6 : 0;
  if (!buffer_.add(std::move(frame))) {
    stop(StopReason::BufferFull, now);
    return true;
  }
  tp->bytes_used += blocks;
  if (tp->pass_count > 0 && tp->hits >= tp->pass_count) {
    stop(StopReason::PassCount, now, tp->number);
    return true;
  }
  return false;
}

bool TraceExperiment::step(uint32_t number, uint64_t addr, const HitSite& site) {
  if (!running_) return false;
  Tracepoint* tp = find_mut(number, addr);
  if (!tp) return false;
  if (!collect(*tp, tp->step_actions, site, addr)) {
    stop(StopReason::BufferFull, site.now_usec);
    return false;
  }
  return true;
}

bool TraceExperiment::collect(const Tracepoint& tp, std::span<const TraceAction> actions, const HitSite& site,
                              uint64_t /*frame_addr*/) {
  FrameBuilder frame(tp.number);
  bool registers_done = false;
  auto memory = [&](uint64_t addr, uint64_t len) {
    len = std::min(len, kMaxCollect);
    std::vector<uint8_t> bytes(len);
    if (len && site.read && site.read(addr, bytes)) frame.add_memory(addr, bytes);
    return true;  // unreadable memory is simply not in the frame (shown as unavailable)
  };
  agent::Context ctx = context(site);
  ctx.collect_memory = memory;
  ctx.collect_string = [&](uint64_t addr, uint64_t limit) {
    limit = std::min(limit, kMaxCollect);
    std::vector<uint8_t> bytes;
    uint8_t c = 0;
    while (bytes.size() < limit && site.read && site.read(addr + bytes.size(), std::span<uint8_t>(&c, 1))) {
      bytes.push_back(c);
      if (c == 0) break;
    }
    if (!bytes.empty()) frame.add_memory(addr, bytes);
    return true;
  };
  ctx.collect_variable = [&](int n) {
    auto v = variable(static_cast<uint32_t>(n), site.now_usec);
    if (!v) return false;
    frame.add_variable(static_cast<uint32_t>(n), *v);
    return true;
  };
  for (const auto& action : actions) {
    if (std::holds_alternative<CollectRegisters>(action)) {
      if (registers_done || !site.register_block) continue;
      if (auto block = site.register_block()) frame.add_registers(*block);
      registers_done = true;
    } else if (const auto* m = std::get_if<CollectMemory>(&action)) {
      uint64_t base = 0;
      if (m->basereg >= 0) {
        auto r = site.reg ? site.reg(m->basereg) : std::nullopt;
        if (!r) continue;
        base = *r;
      }
      memory(base + m->offset, m->len);
    } else if (const auto* x = std::get_if<CollectExpression>(&action)) {
      (void)agent::evaluate(x->bytecode, ctx);  // a fault keeps what was collected before it
    }
  }
  std::vector<uint8_t> bytes = frame.finish();
  uint64_t n = frame.size();  // qTP's usage: block bytes, without the frame header (gdbserver)
  if (!buffer_.add(std::move(bytes))) return false;
  if (Tracepoint* t = find_mut(tp.number, tp.addr)) t->bytes_used += n;
  return true;
}

Status TraceExperiment::status() const {
  Status s;
  s.running = running_;
  s.reason = reason_;
  s.stop_tracepoint = stop_tracepoint_;
  // GDB sends the tstop notes after QTStop: the notes now are the stop's.
  s.stop_text = reason_ == StopReason::Stopped ? stop_notes_ : stop_text_;
  s.frames = buffer_.frames();
  s.created = buffer_.created();
  s.free = buffer_.free();
  s.size = buffer_.size();
  s.circular = buffer_.circular();
  s.disconnected = disconnected_;
  s.start_usec = start_usec_;
  s.stop_usec = stop_usec_;
  s.user = user_;
  s.notes = notes_;
  return s;
}

uint64_t TraceExperiment::frame_pc(size_t n) const {
  FrameView f = buffer_.frame(n);
  if (auto regs = f.registers(block_size_); regs && pc_offset_ + 8 <= regs->size()) {
    uint64_t pc = 0;
    for (size_t i = 8; i-- > 0;) pc = (pc << 8) | (*regs)[pc_offset_ + i];
    return pc;
  }
  for (const auto& tp : tracepoints_)
    if (tp.number == f.tracepoint()) return tp.addr;
  return 0;
}

std::optional<std::vector<uint8_t>> TraceExperiment::frame_registers(size_t n) const {
  auto regs = buffer_.frame(n).registers(block_size_);
  if (!regs) return std::nullopt;
  return std::vector<uint8_t>(regs->begin(), regs->end());
}

std::optional<size_t> TraceExperiment::find_frame(FrameQuery q, uint64_t a, uint64_t b) const {
  size_t count = buffer_.frames();
  if (q == FrameQuery::Number) return a < count ? std::optional<size_t>(a) : std::nullopt;
  size_t from = selected_ ? *selected_ + 1 : 0;
  for (size_t n = from; n < count; ++n) {
    switch (q) {
      case FrameQuery::Pc:
        if (frame_pc(n) == a) return n;
        break;
      case FrameQuery::Tracepoint:
        if (buffer_.frame(n).tracepoint() == a) return n;
        break;
      case FrameQuery::Range: {
        uint64_t pc = frame_pc(n);
        if (pc >= a && pc <= b) return n;
        break;
      }
      case FrameQuery::Outside: {
        uint64_t pc = frame_pc(n);
        if (pc < a || pc > b) return n;
        break;
      }
      default: break;
    }
  }
  return std::nullopt;
}

}  // namespace backend::trace
