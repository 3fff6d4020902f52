#include "server/coverage_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "backend/coverage/drcov.h"
#include "backend/coverage/graphs.h"
#include "backend/coverage/lcov.h"

namespace server {

namespace {

backend::Result<void> write_file(const std::string& path, const std::string& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return backend::errno_error(fmt::format("Cannot write {}", path));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      return backend::errno_error(fmt::format("Cannot write {}", path), e);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return {};
}

const char* format_name(CoverageFormat f) {
  switch (f) {
    case CoverageFormat::Drcov2: return "drcov (version 2)";
    case CoverageFormat::Drcov3: return "drcov (version 3)";
    case CoverageFormat::Lcov: return "lcov";
  }
  return "?";
}

}  // namespace

std::optional<CoverageFormat> coverage_format(const std::string& path, const std::string& forced) {
  if (forced == "drcov") return CoverageFormat::Drcov2;
  if (forced == "drcov3") return CoverageFormat::Drcov3;
  if (forced == "lcov") return CoverageFormat::Lcov;
  if (!forced.empty()) return std::nullopt;
  if (path.ends_with(".info")) return CoverageFormat::Lcov;
  return CoverageFormat::Drcov2;
}

CoverageRun::CoverageRun(backend::Process& p) : pid_(p.pid()), process_(&p) { make_recorder(); }

void CoverageRun::make_recorder() {
  auto read_code = [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
    if (!process_ || !process_->alive()) return 0;
    auto n = process_->read_memory(addr, out);  // through our breakpoints: the original bytes
    return n ? *n : 0;
  };
  auto memory_map = [this]() -> backend::Result<std::vector<backend::MemoryRegion>> {
    if (!process_ || !process_->alive()) return backend::Error{ESRCH, "The process is gone."};
    return process_->memory_map();
  };
  recorder_ = std::make_unique<backend::CoverageRecorder>(read_code, memory_map);
  functions_ = std::make_unique<backend::FunctionIndex>(memory_map);
  if (tree_) {
    tree_ = std::make_unique<backend::CallTree>([this](uint64_t addr) { return functions_->function_of(addr); });
    recorder_->set_call_tree(tree_.get());
  }
}

CoverageRun::~CoverageRun() {
  if (recording_ && process_) process_->tracer().stop_coverage();
}

void CoverageRun::keep_call_tree() {
  if (tree_) return;
  tree_ = std::make_unique<backend::CallTree>([this](uint64_t addr) { return functions_->function_of(addr); });
  recorder_->set_call_tree(tree_.get());
}

backend::Result<void> CoverageRun::start() {
  if (!process_ || !process_->alive()) return backend::Error{ESRCH, "The process is not being debugged."};
  if (recording_) return backend::Error{EALREADY, "Coverage is already being recorded."};
  if (auto r = process_->tracer().start_coverage(recorder_.get(), process_->threads()); !r) return r;
  recording_ = true;
  return {};
}

void CoverageRun::stop() {
  if (!recording_) return;
  if (process_ && process_->alive()) process_->tracer().stop_coverage();
  recording_ = false;
}

void CoverageRun::process_gone() {
  // A dead process's tracer ended every thread at the exit; a live one (detached, or about to
  // be destroyed) must forget the sink now.
  if (recording_ && process_ && process_->alive()) process_->tracer().stop_coverage();
  recording_ = false;
  process_ = nullptr;
  recorder_->detach();
  functions_->detach();
}

void CoverageRun::exec_happened() {
  // The old image's code and symbols are gone: the recording starts over with the new image
  // (what ran before the exec is dropped, as a new drcov log would be started).
  if (!process_ || !recording_) return;
  process_->tracer().stop_coverage();
  recording_ = false;
  make_recorder();
  (void)start();
}

std::vector<std::pair<pid_t, uint64_t>> CoverageRun::open_threads() const {
  std::vector<std::pair<pid_t, uint64_t>> out;
  if (!process_ || !process_->alive() || !recording_ || process_->running()) return out;
  for (pid_t tid : process_->threads())
    if (auto regs = process_->read_registers(tid, backend::RegisterSet::General))
      out.emplace_back(tid, regs->pc(process_->register_layout()));
  return out;
}

backend::Result<std::string> CoverageRun::save(const std::string& path, CoverageFormat format) {
  auto snap = recorder_->snapshot(open_threads());
  std::string bytes, note;
  if (format == CoverageFormat::Lcov) {
    std::vector<std::string> no_lines;
    bytes = backend::format_lcov(snap, &no_lines);
    if (!no_lines.empty()) note = fmt::format(" ({} module(s) without line information left out)", no_lines.size());
  } else {
    size_t skipped = 0;
    bytes = backend::format_drcov(snap, format == CoverageFormat::Drcov3 ? 3 : 2, &skipped);
    if (skipped) note = fmt::format(" ({} block(s) outside every module left out)", skipped);
  }
  if (auto w = write_file(path, bytes); !w) return w.error();
  uint64_t executions = 0;
  for (const auto& b : snap.blocks) executions += b.count;
  std::string out = fmt::format("Wrote {} coverage to {}: {} blocks in {} modules, {} block executions, {} branches{}.\n",
                                format_name(format), path, snap.blocks.size(), snap.modules.size(), executions,
                                snap.branches, note);
  for (size_t m = 0; m < snap.modules.size(); ++m) {
    size_t n = std::count_if(snap.blocks.begin(), snap.blocks.end(), [&](const auto& b) { return b.module == static_cast<int>(m); });
    if (n == 0) continue;
    const auto& mod = snap.modules[m];
    out += fmt::format("  {:#x}-{:#x} {} build-id {} ({} blocks)\n", mod.base, mod.end, mod.path,
                       mod.build_id.empty() ? "none" : mod.build_id, n);
  }
  return out;
}

backend::Result<std::string> CoverageRun::save_flame_graph(const std::string& path, const std::string& title) {
  if (!tree_) return backend::Error{EINVAL, "No call tree was recorded."};
  std::string svg = backend::flame_graph_svg(*tree_, [this](uint64_t f) { return functions_->describe(f); }, title);
  if (auto w = write_file(path, svg); !w) return w.error();
  return fmt::format("Wrote a flame graph of {} instructions to {}.\n", tree_->total(backend::CallTree::kRoot), path);
}

backend::Result<std::string> CoverageRun::save_cfg(const std::string& function, const std::string& path) {
  auto range = functions_->range_of(function);
  if (!range) return backend::Error{ENOENT, fmt::format("No function named {}.", function)};
  auto snap = recorder_->snapshot(open_threads());
  auto cfg = backend::build_cfg(function, range->first, range->second,
                                [this](uint64_t addr, std::span<uint8_t> out) { return recorder_->read_code(addr, out); }, snap);
  if (!cfg) return cfg.error();
  if (auto r = backend::render_dot(backend::cfg_dot(*cfg), path); !r) return r.error();
  size_t executed = std::count_if(cfg->blocks.begin(), cfg->blocks.end(), [](const auto& b) { return b.executed(); });
  return fmt::format("Wrote the control-flow graph of {} ({} of {} blocks executed, {} edges) to {}.\n", function,
                     executed, cfg->blocks.size(), cfg->edges.size(), path);
}

std::string CoverageRun::status() const {
  return fmt::format("Coverage of process {}: {}; {} branches, {} distinct blocks so far.\n", pid_,
                     recording_ ? "recording" : "stopped", recorder_->branch_count(), recorder_->block_count());
}

backend::Result<std::string> save_history_flame_graph(backend::Process& p, pid_t tid, const std::string& path) {
  auto& tracer = p.tracer();
  if (!tracer.enabled(tid)) return backend::Error{ENOENT, fmt::format("Thread {} is not being recorded.", tid)};
  uint64_t origin = tracer.history_origin(tid);
  auto branches = tracer.history(tid, SIZE_MAX / 2);
  if (branches.empty()) return backend::Error{ENOENT, "No branches recorded yet."};
  auto regs = p.read_registers(tid, backend::RegisterSet::General);
  if (!regs) return regs.error();
  uint64_t pc = regs->pc(p.register_layout());
  // Replay the history through a recorder of its own: the same blocks, instruction counts and
  // call tree as a live recording would give.
  auto read_code = [&p](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = p.read_memory(addr, out);
    return n ? *n : 0;
  };
  auto memory_map = [&p]() { return p.memory_map(); };
  backend::CoverageRecorder replay(read_code, memory_map);
  backend::FunctionIndex functions(memory_map);
  backend::CallTree tree([&functions](uint64_t addr) { return functions.function_of(addr); });
  replay.set_call_tree(&tree);
  // Without the origin (the ring overwrote it) the history starts at the oldest branch target.
  if (origin) replay.thread_started(tid, origin);
  for (const auto& b : branches) replay.branch(tid, b.from, b.to);
  replay.thread_ended(tid, pc);
  std::string title = fmt::format("Thread {}: {} recorded instructions{}", tid, tree.total(backend::CallTree::kRoot),
                                  origin ? "" : " (the oldest part of the history was overwritten)");
  std::string svg = backend::flame_graph_svg(tree, [&functions](uint64_t f) { return functions.describe(f); }, title);
  if (auto w = write_file(path, svg); !w) return w.error();
  return fmt::format("Wrote a flame graph of {} instructions ({} branches) to {}.\n", tree.total(backend::CallTree::kRoot),
                     branches.size(), path);
}

}  // namespace server
