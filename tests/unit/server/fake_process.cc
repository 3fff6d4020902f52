#include "tests/unit/server/fake_process.h"

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace fake {

using backend::Error;
using backend::Result;

backend::StopEvent stop_event(backend::StopKind kind, pid_t pid, pid_t tid, int signo) {
  backend::StopEvent e;
  e.kind = kind;
  e.pid = pid;
  e.tid = tid;
  e.signo = signo;
  return e;
}

backend::StopEvent signal_stop(pid_t pid, pid_t tid, int signo) {
  return stop_event(backend::StopKind::Signal, pid, tid, signo);
}

backend::StopEvent exit_event(pid_t pid, int status) {
  backend::StopEvent e = stop_event(backend::StopKind::Exited, pid, pid, 0);
  e.exit_status = status;
  return e;
}

backend::StopEvent killed_event(pid_t pid, int signo) {
  return stop_event(backend::StopKind::Killed, pid, pid, signo);
}

// ---- FakeBranchTracer ----

Result<void> FakeBranchTracer::enable(pid_t tid, backend::TraceFormat format) {
  if (enable_error) return *enable_error;
  if (enabled_.count(tid)) return Error{EALREADY, "Btrace already enabled."};  // as TraceManager's
  enabled_.insert(tid);
  formats[tid] = format;
  return {};
}

Result<void> FakeBranchTracer::disable(pid_t tid) {
  if (!enabled_.erase(tid)) return Error{EINVAL, "not enabled"};
  return {};
}

Result<std::vector<backend::TraceBlock>> FakeBranchTracer::read(pid_t tid, backend::TraceRead kind) {
  reads.emplace_back(tid, kind);
  if (read_error) return *read_error;
  return blocks;
}

std::vector<backend::Branch> FakeBranchTracer::history(pid_t tid, size_t n) const {
  auto it = branches.find(tid);
  if (it == branches.end()) return {};
  const auto& all = it->second;
  size_t skip = all.size() > n ? all.size() - n : 0;
  return std::vector<backend::Branch>(all.begin() + static_cast<long>(skip), all.end());
}

// ---- FakeProcess ----

FakeProcess::FakeProcess(pid_t pid, std::vector<pid_t> tids, uint64_t xcr0)
    : pid_(pid), layout_(backend::make_register_layout(xcr0)) {
  if (tids.empty()) tids.push_back(pid);
  for (pid_t tid : tids) add_thread(tid);
  last_stop_.kind = backend::StopKind::Signal;
  last_stop_.pid = pid;
  last_stop_.tid = tids.front();
  last_stop_.signo = 0;
}

void FakeProcess::add_thread(pid_t tid, std::string name, int core) {
  Thread t;
  t.name = std::move(name);
  t.core = core;
  t.regs.bytes.assign(layout_.total_bytes, 0);
  t.regs.valid.assign(layout_.regs.size(), true);
  if (!threads_.count(tid)) order_.push_back(tid);
  threads_[tid] = std::move(t);
}

void FakeProcess::remove_thread(pid_t tid) {
  threads_.erase(tid);
  order_.erase(std::remove(order_.begin(), order_.end(), tid), order_.end());
}

std::string FakeProcess::thread_name(pid_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? std::string() : it->second.name;
}

int FakeProcess::thread_core(pid_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? -1 : it->second.core;
}

Result<void> FakeProcess::resume(const backend::ResumePlan& plan) {
  journal->push_back("resume");
  if (resume_error) return *resume_error;
  if (!alive_) return Error{ESRCH, "process is gone"};
  resumes.push_back(plan);
  if (non_stop_) {
    for (pid_t tid : order_) {
      auto it = plan.threads.find(tid);
      std::optional<backend::ResumeAction> a = it != plan.threads.end() ? std::optional(it->second) : plan.others;
      if (!a) continue;
      if (a->kind != backend::ResumeKind::Stop) {
        resumed_.insert(tid);
      } else if (resumed_.count(tid)) {
        backend::StopEvent e;
        e.kind = backend::StopKind::Signal;
        e.pid = pid_;
        e.tid = tid;
        e.signo = 0;
        pending_.push_back(e);
      }
    }
  }
  running_ = true;
  return {};
}

backend::Result<void> FakeProcess::set_non_stop(bool on) {
  journal->push_back("set_non_stop");
  if (on && running_) return Error{EBUSY, "running"};
  if (!on) {  // as the real one: everything stops
    resumed_.clear();
    running_ = false;
  }
  non_stop_ = on;
  return {};
}

std::vector<backend::StopEvent> FakeProcess::stopped_threads() const {
  if (!alive_ || !non_stop_) return running_ && alive_ ? std::vector<backend::StopEvent>{} : std::vector{last_stop_};
  std::vector<backend::StopEvent> out;
  for (pid_t tid : order_) {
    if (resumed_.count(tid)) continue;
    auto it = last_events_.find(tid);
    if (it != last_events_.end()) {
      out.push_back(it->second);
    } else if (tid == last_stop_.tid) {
      out.push_back(last_stop_);
    } else {
      backend::StopEvent e;
      e.kind = backend::StopKind::Signal;
      e.pid = pid_;
      e.tid = tid;
      out.push_back(e);
    }
  }
  return out;
}

void FakeProcess::interrupt() {
  journal->push_back("interrupt");
  if (non_stop_) {
    if (!resumed_.empty()) {
      backend::StopEvent e;
      e.kind = backend::StopKind::Signal;
      e.pid = pid_;
      e.tid = *resumed_.begin();
      e.signo = SIGINT;
      pending_.push_back(e);
    }
    return;
  }
  // As the real backend: a running process stops with SIGINT (in its main thread here).
  if (running_ && pending_.empty()) {
    backend::StopEvent e;
    e.kind = backend::StopKind::Signal;
    e.pid = pid_;
    e.tid = order_.empty() ? pid_ : order_.front();
    e.signo = SIGINT;
    pending_.push_back(e);
  }
}

std::optional<backend::StopEvent> FakeProcess::poll_events() {
  journal->push_back("poll_events");
  if (!running_ || pending_.empty()) return std::nullopt;
  backend::StopEvent e = pending_.front();
  pending_.pop_front();
  running_ = false;
  if (non_stop_) {
    resumed_.erase(e.tid);
    last_events_[e.tid] = e;
    running_ = !resumed_.empty() || !pending_.empty();
  }
  last_stop_ = e;
  if (e.kind == backend::StopKind::Exited || e.kind == backend::StopKind::Killed) {
    alive_ = false;
    threads_.clear();
    order_.clear();
  }
  return e;
}

Result<void> FakeProcess::step_branch(pid_t tid, uint32_t count) {
  journal->push_back("step_branch");
  if (step_branch_error) return *step_branch_error;
  step_branches.emplace_back(tid, count);
  running_ = true;
  return {};
}

Result<void> FakeProcess::detach() {
  journal->push_back("detach");
  if (detach_error) return *detach_error;
  alive_ = false;
  running_ = false;
  return {};
}

Result<void> FakeProcess::kill() {
  journal->push_back("kill");
  alive_ = false;
  running_ = false;
  threads_.clear();
  order_.clear();
  return {};
}

void FakeProcess::set_pass_signals(std::set<int> signals) {
  journal->push_back("set_pass_signals");
  pass_signals.push_back(std::move(signals));
}

void FakeProcess::set_program_signals(std::set<int> signals) {
  journal->push_back("set_program_signals");
  program_signals.push_back(std::move(signals));
}

void FakeProcess::set_catch_syscalls(bool on, std::set<int> syscalls) {
  journal->push_back("set_catch_syscalls");
  catch_syscalls.emplace_back(on, std::move(syscalls));
}

Result<std::vector<uint8_t>> FakeProcess::siginfo(pid_t tid) {
  journal->push_back("siginfo");
  auto it = siginfo_of.find(tid);
  if (it == siginfo_of.end()) return Error{ESRCH, "no siginfo"};
  return it->second;
}

Result<void> FakeProcess::set_siginfo(pid_t tid, std::span<const uint8_t> info) {
  journal->push_back("set_siginfo");
  if (!siginfo_of.count(tid)) return Error{ESRCH, "no siginfo"};
  siginfo_writes.emplace_back(tid, std::vector<uint8_t>(info.begin(), info.end()));
  siginfo_of[tid].assign(info.begin(), info.end());
  return {};
}

Result<backend::RegisterFile> FakeProcess::read_registers(pid_t tid, backend::RegisterSet set) {
  journal->push_back("read_registers");
  register_reads.emplace_back(tid, set);
  if (register_read_error) return *register_read_error;
  auto it = threads_.find(tid);
  if (it == threads_.end()) return Error{ESRCH, "no such thread"};
  backend::RegisterFile f = it->second.regs;
  // As the real backend: a General read leaves every other register invalid.
  if (set == backend::RegisterSet::General)
    for (size_t r = 0; r < f.valid.size(); ++r)
      if (!backend::is_general_register(static_cast<int>(r))) f.valid[r] = false;
  return f;
}

Result<void> FakeProcess::write_registers(pid_t tid, const backend::RegisterFile& regs) {
  journal->push_back("write_registers");
  if (register_write_error) return *register_write_error;
  auto it = threads_.find(tid);
  if (it == threads_.end()) return Error{ESRCH, "no such thread"};
  register_writes.emplace_back(tid, regs);
  it->second.regs = regs;
  return {};
}

uint8_t* FakeProcess::byte_at(uint64_t addr) {
  auto it = memory_.upper_bound(addr);
  if (it == memory_.begin()) return nullptr;
  --it;
  if (addr - it->first >= it->second.size()) return nullptr;
  return &it->second[addr - it->first];
}

std::vector<uint8_t> FakeProcess::memory_at(uint64_t addr, size_t n) const {
  std::vector<uint8_t> out(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (auto* b = const_cast<FakeProcess*>(this)->byte_at(addr + i)) out[i] = *b;
  return out;
}

Result<size_t> FakeProcess::read_memory(uint64_t addr, std::span<uint8_t> out) {
  journal->push_back("read_memory");
  size_t n = 0;
  for (; n < out.size(); ++n) {
    uint8_t* b = byte_at(addr + n);
    if (!b) break;
    out[n] = *b;
  }
  if (n == 0 && !out.empty()) return Error{EIO, "unmapped"};
  return n;
}

Result<size_t> FakeProcess::write_memory(uint64_t addr, std::span<const uint8_t> data) {
  journal->push_back("write_memory");
  size_t n = 0;
  for (; n < data.size(); ++n) {
    uint8_t* b = byte_at(addr + n);
    if (!b) break;
    *b = data[n];
  }
  if (n == 0 && !data.empty()) return Error{EIO, "unmapped"};
  memory_writes.push_back(MemoryWrite{addr, std::vector<uint8_t>(data.begin(), data.begin() + static_cast<long>(n))});
  return n;
}

Result<void> FakeProcess::insert_breakpoint(backend::BreakpointKind kind, uint64_t addr, uint64_t len) {
  journal->push_back("insert_breakpoint");
  breakpoint_calls.push_back(BreakpointCall{true, kind, addr, len});
  if (breakpoint_error) return *breakpoint_error;
  if (kind == backend::BreakpointKind::Software || kind == backend::BreakpointKind::Hardware)
    client_breakpoints.insert({kind, addr});
  return {};
}

Result<void> FakeProcess::set_breakpoint_program(backend::BreakpointKind kind, uint64_t addr,
                                                 backend::BreakpointProgram program) {
  journal->push_back("set_breakpoint_program");
  program_calls.push_back(ProgramCall{kind, addr, std::move(program)});
  if (program_error) return *program_error;
  return {};
}

Result<void> FakeProcess::remove_breakpoint(backend::BreakpointKind kind, uint64_t addr, uint64_t len) {
  journal->push_back("remove_breakpoint");
  breakpoint_calls.push_back(BreakpointCall{false, kind, addr, len});
  if (breakpoint_error) return *breakpoint_error;
  client_breakpoints.erase({kind, addr});
  return {};
}

Result<std::vector<uint8_t>> FakeProcess::auxv() {
  journal->push_back("auxv");
  return auxv_result;
}

Result<std::string> FakeProcess::exe_path() {
  journal->push_back("exe_path");
  return exe_result;
}

Result<std::vector<backend::MemoryRegion>> FakeProcess::memory_map() {
  journal->push_back("memory_map");
  return map_result;
}

Result<std::vector<backend::LibraryInfo>> FakeProcess::libraries(uint64_t* main_lm_out) {
  journal->push_back("libraries");
  if (main_lm_out) *main_lm_out = main_lm;
  return libraries_result;
}

void FakeProcess::set_fork_reporting(bool fork, bool vfork) {
  journal->push_back("set_fork_reporting");
  fork_reporting.emplace_back(fork, vfork);
}

std::vector<std::unique_ptr<backend::Process>> FakeProcess::take_fork_children() {
  journal->push_back("take_fork_children");
  std::vector<std::unique_ptr<backend::Process>> out;
  for (auto& c : children_) out.push_back(std::move(c));
  children_.clear();
  return out;
}

void FakeProcess::pause() {
  journal->push_back("pause");
  running_ = false;
}

void FakeProcess::configure(const backend::ProcessSettings& settings) {
  journal->push_back("configure");
  settings_ = settings;
  configured = settings;
}

}  // namespace fake
