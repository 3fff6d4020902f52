// Tracepoints (QT*/qT* packets, qXfer:traceframe-info): definitions go to the server's
// experiment, which the primary process collects for while it runs; with a frame selected
// (tfind), g/p/m read that frame instead of the live program (registers_memory.cc asks here).
#include <algorithm>

#include <fmt/format.h>

#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

using backend::trace::TraceExperiment;
using backend::trace::now_usec;

TraceExperiment& experiment(Session& s) { return s.server().trace_experiment(); }

// The process that collects: the primary one, given the experiment (once per process).
backend::Process* collector(Session& s) {
  auto* p = s.server().process();
  if (p && p->alive()) (void)p->set_trace_experiment(&experiment(s));
  return p && p->alive() ? p : nullptr;
}

void sync(Session& s) {
  if (auto* p = collector(s)) p->sync_tracepoints();
}

// Frames the program collected itself (fast tracepoints) into the experiment first.
TraceExperiment& drained(Session& s) {
  if (auto* p = collector(s)) p->drain_tracepoints();
  return experiment(s);
}

backend::trace::TraceAction to_action(const TraceActionSpec& a) {
  using namespace backend::trace;
  switch (a.kind) {
    case TraceActionSpec::Kind::Registers: return CollectRegisters{a.mask};
    case TraceActionSpec::Kind::Memory: return CollectMemory{a.basereg, a.offset, a.len};
    case TraceActionSpec::Kind::Expression: break;
  }
  return CollectExpression{a.bytecode};
}

reply::TraceStatus::Reason to_reply(backend::trace::StopReason r, bool running) {
  using R = reply::TraceStatus::Reason;
  if (running) return R::Running;
  switch (r) {
    case backend::trace::StopReason::NotRun: return R::NotRun;
    case backend::trace::StopReason::Stopped: return R::Stopped;
    case backend::trace::StopReason::PassCount: return R::PassCount;
    case backend::trace::StopReason::BufferFull: return R::BufferFull;
    case backend::trace::StopReason::Disconnected: return R::Disconnected;
    case backend::trace::StopReason::Error: return R::Error;
  }
  return R::NotRun;
}

Reply next_upload(Session& s) {
  auto& lines = s.trace_upload();
  if (lines.empty()) return reply::TraceUpload{};
  std::string line = std::move(lines.front());
  lines.erase(lines.begin());
  return reply::TraceUpload{std::move(line)};
}

}  // namespace

Reply handle(Session& s, const TraceInit&) {
  experiment(s).init();
  sync(s);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceDefine& d) {
  backend::trace::Tracepoint tp;
  tp.fast = d.fast_size.has_value();
  tp.fast_size = d.fast_size.value_or(0);
  tp.number = d.number;
  tp.addr = d.addr;
  tp.enabled = d.enabled;
  tp.step_count = d.step_count;
  tp.pass_count = d.pass_count;
  tp.is_static = d.is_static;
  tp.condition = d.condition;
  if (auto r = experiment(s).define(std::move(tp)); !r) return error_reply(r.error());
  if (experiment(s).running()) sync(s);  // InstallInTrace
  return reply::Ok{};
}

Reply handle(Session& s, const TraceDefineActions& d) {
  std::vector<TraceExperiment::ActionDef> actions;
  for (const auto& a : d.actions) actions.push_back({to_action(a), a.text, a.stepping});
  if (auto r = experiment(s).add_actions(d.number, d.addr, std::move(actions)); !r) return error_reply(r.error());
  return reply::Ok{};
}

Reply handle(Session& s, const TraceDefineSource& d) {
  if (auto r = experiment(s).add_source(d.number, d.addr, d.raw); !r) return error_reply(r.error());
  return reply::Ok{};
}

Reply handle(Session& s, const TraceDefineVariable& d) {
  backend::trace::TraceVariable v;
  v.number = d.number;
  v.initial = d.initial;
  v.builtin = d.builtin;
  v.name = d.name;
  experiment(s).define_variable(std::move(v));
  return reply::Ok{};
}

Reply handle(Session& s, const TraceReadOnlyRegions& r) {
  for (const auto& [start, end] : r.ranges) experiment(s).add_read_only(start, end);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceStart&) {
  auto* p = collector(s);
  if (!p) return no_process();
  if (auto r = experiment(s).start(now_usec()); !r) return error_reply(r.error());
  p->sync_tracepoints();
  return reply::Ok{};
}

Reply handle(Session& s, const TraceStop&) {
  drained(s).stop(backend::trace::StopReason::Stopped, now_usec());
  sync(s);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceStatusQuery&) {
  auto st = drained(s).status();
  reply::TraceStatus r;
  r.running = st.running;
  r.reason = to_reply(st.reason, st.running);
  r.stop_tracepoint = st.stop_tracepoint;
  r.stop_text = st.stop_text;
  r.frames = st.frames;
  r.created = st.created;
  r.free = st.free;
  r.size = st.size;
  r.circular = st.circular;
  r.disconnected = st.disconnected;
  r.start_usec = st.start_usec;
  r.stop_usec = st.stop_usec;
  r.user = st.user;
  r.notes = st.notes;
  return r;
}

Reply handle(Session& s, const TracepointStatusQuery& q) {
  const auto* tp = drained(s).find(q.number, q.addr);
  if (!tp) return reply::Unsupported{};
  return reply::TracepointHits{tp->hits, tp->bytes_used};
}

Reply handle(Session& s, const TraceVariableQuery& q) {
  auto& e = experiment(s);
  if (auto frame = e.selected()) {  // the value the frame collected last, else unknown
    std::optional<int64_t> value;
    for (const auto& [n, v] : e.frame(*frame).variables(e.register_block_size()))
      if (n == q.number) value = v;
    return reply::TraceVariableValue{value};
  }
  auto st = e.status();
  if (!st.running && st.reason == backend::trace::StopReason::NotRun) return reply::TraceVariableValue{};
  return reply::TraceVariableValue{e.variable(q.number, now_usec()).value_or(0)};
}

Reply handle(Session& s, const TraceFrameSelect& f) {
  auto& e = drained(s);
  using K = TraceFrameSelect::Kind;
  using Q = backend::trace::FrameQuery;
  if (f.kind == K::Number && f.number < 0) {
    e.select(std::nullopt);
    return reply::Ok{};
  }
  std::optional<size_t> found;
  switch (f.kind) {
    case K::Number: found = e.find_frame(Q::Number, static_cast<uint64_t>(f.number)); break;
    case K::Pc: found = e.find_frame(Q::Pc, f.a); break;
    case K::Tracepoint: found = e.find_frame(Q::Tracepoint, f.a); break;
    case K::Range: found = e.find_frame(Q::Range, f.a, f.b); break;
    case K::Outside: found = e.find_frame(Q::Outside, f.a, f.b); break;
  }
  if (!found) return reply::TraceFrameFound{};
  e.select(found);
  return reply::TraceFrameFound{*found, e.frame(*found).tracepoint()};
}

Reply handle(Session& s, const TraceBufferCircular& b) {
  experiment(s).buffer().set_circular(b.on);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceBufferSize& b) {
  if (experiment(s).running()) return error_reply(EBUSY, "Cannot change the buffer size while tracing.");
  experiment(s).buffer().set_size(b.size.value_or(backend::trace::TraceBuffer::kDefaultSize));
  return reply::Ok{};
}

Reply handle(Session& s, const TraceDisconnected& d) {
  experiment(s).set_disconnected(d.on);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceNotes& n) {
  if (n.user) experiment(s).set_user(*n.user);
  if (n.notes) experiment(s).set_notes(*n.notes);
  if (n.tstop) experiment(s).set_stop_notes(*n.tstop);
  return reply::Ok{};
}

Reply handle(Session& s, const TraceUploadPoints& u) {
  if (u.first) {
    auto& lines = s.trace_upload();
    lines.clear();
    for (const auto& tp : experiment(s).tracepoints()) {
      protocol::TracepointUpload up;
      up.number = tp.number;
      up.addr = tp.addr;
      up.enabled = tp.enabled;
      up.step_count = tp.step_count;
      up.pass_count = tp.pass_count;
      if (tp.fast) up.fast_size = tp.fast_size;
      up.is_static = tp.is_static;
      up.condition = tp.condition;
      up.actions = tp.action_texts;
      up.step_actions = tp.step_action_texts;
      up.sources = tp.sources;
      for (auto& line : protocol::tracepoint_upload_lines(up)) lines.push_back(std::move(line));
    }
  }
  return next_upload(s);
}

Reply handle(Session& s, const TraceUploadVariables& u) {
  if (u.first) {
    auto& lines = s.trace_upload();
    lines.clear();
    // Newest first, as gdbserver keeps them (GDB numbers them in the order they were made).
    const auto& vars = experiment(s).variables();
    for (auto it = vars.rbegin(); it != vars.rend(); ++it)
      lines.push_back(protocol::variable_upload_line(it->first, it->second.initial, it->second.builtin, it->second.name));
  }
  return next_upload(s);
}

Reply handle(Session& s, const TraceBufferRead& r) {
  constexpr uint64_t kMaxChunk = 0x4000;  // what fits a packet in hex
  return reply::TraceBufferData{drained(s).buffer().raw(r.offset, std::min(r.len, kMaxChunk))};
}

Reply handle(Session& s, const TraceEnable& e) {
  if (auto r = experiment(s).set_enabled(e.number, e.addr, e.enable); !r) return error_reply(r.error());
  if (experiment(s).running()) sync(s);
  return reply::Ok{};
}

std::string tracepoints_text(Session& s) {
  auto* p = collector(s);
  if (p) p->drain_tracepoints();
  auto& e = experiment(s);
  if (e.tracepoints().empty()) return "No tracepoints downloaded (they are sent at tstart).\n";
  std::string out = e.running() ? "The trace is running.\n" : "The trace is not running.\n";
  for (const auto& tp : e.tracepoints())
    out += fmt::format("  {} at {:#x}: {} hit{}, {}{}\n", tp.number, tp.addr, tp.hits, tp.hits == 1 ? "" : "s",
                       tp.enabled ? "" : "disabled, ",
                       p ? p->tracepoint_mechanism(tp.addr) : std::string("no process"));
  return out;
}

// x86-64 pads replace one instruction of at least a jmp's 5 bytes (as gdbserver's agent).
Reply handle(Session&, const TraceMinFastInsnLen&) { return reply::HexNumber{5}; }

// ---- reads while a frame is selected ----

std::optional<size_t> selected_trace_frame(Session& s) {
  if (!s.server().capabilities().has(protocol::Capability::Tracepoints)) return std::nullopt;
  return experiment(s).selected();
}

Reply trace_frame_registers(Session& s, std::optional<int> regno) {
  auto* p = s.process();
  if (!p) return no_process();
  auto& e = experiment(s);
  size_t frame = *e.selected();
  const auto& layout = p->register_layout();
  auto block = e.frame_registers(frame);
  auto value = [&](const backend::RegisterInfo& info) {
    size_t size = static_cast<size_t>(info.bitsize / 8);
    if (block && info.offset + size <= block->size())
      return reply::RegisterValue{std::vector<uint8_t>(block->begin() + static_cast<long>(info.offset),
                                                       block->begin() + static_cast<long>(info.offset + size)),
                                  true};
    if (info.regnum == backend::RegisterLayout::kRip) {  // no registers collected: the pc is known
      uint64_t pc = e.frame_pc(frame);
      std::vector<uint8_t> bytes(size);
      for (size_t i = 0; i < size && i < 8; ++i) bytes[i] = static_cast<uint8_t>(pc >> (8 * i));
      return reply::RegisterValue{std::move(bytes), true};
    }
    return reply::RegisterValue{std::vector<uint8_t>(size), false};
  };
  if (regno) {
    if (*regno < 0 || *regno >= static_cast<int>(layout.regs.size())) return error_reply(EINVAL, "No such register.");
    return reply::Registers{{value(layout.regs[static_cast<size_t>(*regno)])}};
  }
  reply::Registers out;
  for (const auto& info : layout.regs) out.values.push_back(value(info));
  return out;
}

Reply trace_frame_memory(Session& s, const ReadMemory& m) {
  auto& e = experiment(s);
  size_t frame = *e.selected();
  std::vector<uint8_t> buffer(std::min<uint64_t>(m.length, 0x40000));
  size_t n = e.frame(frame).read(m.addr, buffer, e.register_block_size());
  if (n == 0 && !buffer.empty() && e.read_only(m.addr, buffer.size())) {
    // Read-only sections (QTro) are the same now as then: read from the program.
    if (auto* p = s.process()) {
      auto r = p->read_memory(m.addr, buffer);
      if (r) n = *r;
    }
  }
  if (n == 0 && !buffer.empty()) return error_reply(EIO, "Memory not collected.", ErrorForm::Code);
  buffer.resize(n);
  if (m.binary) return reply::BinaryMemory{std::move(buffer)};
  return reply::Hex{std::move(buffer)};
}

std::optional<std::string> traceframe_info_document(Session& s, Reply& error_out) {
  auto& e = experiment(s);
  if (!e.selected()) {
    error_out = error_reply(EINVAL, "No trace frame selected.");
    return std::nullopt;
  }
  auto view = e.frame(*e.selected());
  protocol::TraceframeInfo info;
  for (const auto& b : view.memory(e.register_block_size())) info.memory.emplace_back(b.addr, b.bytes.size());
  for (const auto& [n, v] : view.variables(e.register_block_size())) info.variables.push_back(n);
  return protocol::traceframe_info_xml(info);
}

}  // namespace server
