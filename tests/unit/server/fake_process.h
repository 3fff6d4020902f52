// A backend::Process made of plain data, for driving server::Session without ptrace.
// The test sets threads, registers, memory, siginfo, libraries... and scripts the stops; the
// fake records every call it gets (resume plans, breakpoints, writes, signal sets...) so a
// test can assert on what the handlers asked the backend to do. Deterministic: no clock, no
// system call, nothing read from the machine.
#pragma once

#include <sys/types.h>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/process.h"

namespace fake {

// Branch tracing as plain data: which threads record, the blocks a read returns, the history.
class FakeBranchTracer : public backend::BranchTracer {
 public:
  backend::Result<void> enable(pid_t tid, backend::TraceFormat format) override;
  backend::Result<void> disable(pid_t tid) override;
  bool enabled(pid_t tid) const override { return enabled_.count(tid) != 0; }
  void set_buffer_size(uint64_t bytes, backend::TraceFormat format) override {
    (format == backend::TraceFormat::Pt ? pt_buffer_sizes : buffer_sizes).push_back(bytes);
  }
  std::optional<backend::TraceFormat> format(pid_t tid) const override {
    auto it = formats.find(tid);
    if (it == formats.end() || !enabled(tid)) return std::nullopt;
    return it->second;
  }
  uint64_t buffer_size(pid_t) const override { return ring_size; }
  void set_pt_options(const backend::PtOptions& o) override { pt_requested = o; }
  backend::PtOptions requested_pt_options() const override { return pt_requested; }
  backend::PtOptions pt_options(pid_t) const override { return pt_on; }
  backend::Result<std::vector<backend::TraceBlock>> read(pid_t tid, backend::TraceRead kind) override;
  std::vector<backend::Branch> history(pid_t tid, size_t n) const override;
  std::string source_name() const override { return "fake"; }
  uint64_t history_origin(pid_t) const override { return 0; }
  backend::Result<void> start_coverage(backend::BranchSink*, const std::vector<pid_t>&) override {
    return backend::Error{EOPNOTSUPP, "no coverage in the fake"};
  }
  void stop_coverage() override {}
  bool coverage_active() const override { return false; }

  // ---- set by the test ----
  std::optional<backend::Error> enable_error;     // enable() fails with it
  std::optional<backend::Error> read_error;       // read() fails with it
  std::vector<backend::TraceBlock> blocks;        // what read() returns
  std::map<pid_t, std::vector<backend::Branch>> branches;  // history(), oldest first
  uint64_t ring_size = 0x10000;
  backend::PtOptions pt_on;                       // what pt_options() says a recording has
  // ---- recorded ----
  std::vector<uint64_t> buffer_sizes;             // every set_buffer_size() for BTS
  std::vector<uint64_t> pt_buffer_sizes;          // ... and for PT
  backend::PtOptions pt_requested;                // the last set_pt_options()
  std::map<pid_t, backend::TraceFormat> formats;  // the format each enable() asked for
  std::vector<std::pair<pid_t, backend::TraceRead>> reads;

 private:
  std::set<pid_t> enabled_;
};

// Stop events for FakeProcess::stop_with (set other fields on the result).
backend::StopEvent stop_event(backend::StopKind kind, pid_t pid, pid_t tid, int signo);
backend::StopEvent signal_stop(pid_t pid, pid_t tid, int signo);
backend::StopEvent exit_event(pid_t pid, int status);
backend::StopEvent killed_event(pid_t pid, int signo);

using Journal = std::vector<std::string>;
inline size_t count(const Journal& journal, std::string_view call) {
  size_t n = 0;
  for (const auto& c : journal) n += c == call;
  return n;
}

struct BreakpointCall {
  bool insert = true;
  backend::BreakpointKind kind = backend::BreakpointKind::Software;
  uint64_t addr = 0, len = 0;
  bool operator==(const BreakpointCall&) const = default;
};

struct MemoryWrite {
  uint64_t addr = 0;
  std::vector<uint8_t> data;
};

class FakeProcess : public backend::Process {
 public:
  // A stopped process with threads `tids` (main first; empty: just the main thread pid),
  // registers all zero and valid, stopped with signal 0 in its main thread.
  // xcr0 picks the register layout (default: x87, SSE, AVX).
  explicit FakeProcess(pid_t pid, std::vector<pid_t> tids = {}, uint64_t xcr0 = 0x7);

  // ---- scripting ----
  void add_thread(pid_t tid, std::string name = "", int core = -1);
  void remove_thread(pid_t tid);
  backend::RegisterFile& regs(pid_t tid) { return threads_.at(tid).regs; }
  void set_reg(pid_t tid, int regno, uint64_t value) { regs(tid).set_u64(layout_, regno, value); }
  // Readable and writable bytes at addr (ranges must not overlap).
  void map_memory(uint64_t addr, std::vector<uint8_t> bytes) { memory_[addr] = std::move(bytes); }
  std::vector<uint8_t> memory_at(uint64_t addr, size_t n) const;  // what is there now (0 where unmapped)
  // The stop the process is in now ('?', the stop the server reports at add_process).
  void set_last_stop(backend::StopEvent e) { last_stop_ = std::move(e); }
  // The next stop: poll_events() returns it once the process runs (after resume/step_branch).
  // An Exited/Killed stop also ends the process.
  void stop_with(backend::StopEvent e) { pending_.push_back(std::move(e)); }
  size_t events_waiting() const { return pending_.size(); }  // not yet taken by poll_events
  // A fork child take_fork_children() hands over at the next poll that returns an event.
  void add_fork_child(std::unique_ptr<FakeProcess> child) { children_.push_back(std::move(child)); }

  // Data the information calls return (errors by assigning a backend::Error).
  bool attached = false;
  int slots = 4;
  backend::Result<std::vector<uint8_t>> auxv_result = std::vector<uint8_t>{};
  backend::Result<std::string> exe_result = std::string("/bin/fake");
  backend::Result<std::vector<backend::MemoryRegion>> map_result = std::vector<backend::MemoryRegion>{};
  backend::Result<std::vector<backend::LibraryInfo>> libraries_result = std::vector<backend::LibraryInfo>{};
  uint64_t main_lm = 0;
  std::map<pid_t, std::vector<uint8_t>> siginfo_of;  // per thread; a missing one is ESRCH
  // Failures to script: the next calls of that kind fail with it.
  std::optional<backend::Error> resume_error, breakpoint_error, register_read_error, register_write_error,
      step_branch_error, detach_error;
  bool exit_pending = false;  // exit_unreported()
  FakeBranchTracer fake_tracer;

  // ---- recorded calls ----
  // The name of every call, in order (const ones excluded). Shared, so that a test can keep
  // reading it after the server destroyed the process (k, D, vKill, an exit).
  std::shared_ptr<Journal> journal = std::make_shared<Journal>();
  const Journal& calls() const { return *journal; }
  std::vector<backend::ResumePlan> resumes;
  std::vector<std::pair<pid_t, uint32_t>> step_branches;
  std::vector<BreakpointCall> breakpoint_calls;
  // set_breakpoint_program calls (Z0/Z1 with conditions/commands, or a Z again).
  struct ProgramCall {
    backend::BreakpointKind kind{};
    uint64_t addr = 0;
    backend::BreakpointProgram program;
  };
  std::vector<ProgramCall> program_calls;
  // Client code breakpoints inserted and not removed (has_client_breakpoint).
  std::set<std::pair<backend::BreakpointKind, uint64_t>> client_breakpoints;
  // What take_console_output() hands over next (dprintf output the "engine" produced).
  std::string console_output;
  std::optional<backend::Error> program_error;  // set_breakpoint_program fails with it
  std::vector<MemoryWrite> memory_writes;
  std::vector<std::pair<pid_t, backend::RegisterFile>> register_writes;
  std::vector<std::pair<pid_t, backend::RegisterSet>> register_reads;
  std::vector<std::set<int>> pass_signals, program_signals;
  std::vector<std::pair<bool, std::set<int>>> catch_syscalls;
  std::vector<std::pair<bool, bool>> fork_reporting;
  std::vector<std::pair<pid_t, std::vector<uint8_t>>> siginfo_writes;
  std::optional<backend::ProcessSettings> configured;
  size_t count(std::string_view call) const { return fake::count(*journal, call); }

  // ---- backend::Process ----
  pid_t pid() const override { return pid_; }
  bool was_attached() const override { return attached; }
  bool alive() const override { return alive_; }
  bool exit_unreported() const override { return exit_pending; }
  std::vector<pid_t> threads() const override { return order_; }
  bool has_thread(pid_t tid) const override { return threads_.count(tid) != 0; }
  std::string thread_name(pid_t tid) const override;
  int thread_core(pid_t tid) const override;
  backend::StopEvent last_stop() const override { return last_stop_; }

  backend::Result<void> resume(const backend::ResumePlan& plan) override;
  void interrupt() override;
  std::optional<backend::StopEvent> poll_events() override;
  bool running() const override { return running_; }
  backend::Result<void> step_branch(pid_t tid, uint32_t count) override;
  // Non-stop as plain data: resume() marks threads resumed (a Stop action queues a signal-0
  // stop for a resumed thread), poll_events() hands the scripted stops out one by one and
  // marks their threads stopped; interrupt() queues SIGINT for the first resumed thread.
  backend::Result<void> set_non_stop(bool on) override;
  bool non_stop() const override { return non_stop_; }
  std::vector<backend::StopEvent> stopped_threads() const override;
  bool thread_running(pid_t tid) const override { return non_stop_ ? resumed_.count(tid) != 0 : running_; }
  void set_thread_events(bool on) override { thread_events.push_back(on); }
  void hold_attach_stops() override {
    if (non_stop_) resumed_.insert(order_.begin(), order_.end());
  }
  std::vector<bool> thread_events;                       // every set_thread_events()
  void set_thread_options(pid_t tid, backend::ThreadOptions options) override {
    if (has_thread(tid)) options_[tid] = options;
  }
  backend::ThreadOptions thread_options(pid_t tid) const override {
    auto it = options_.find(tid);
    return it != options_.end() ? it->second : backend::ThreadOptions{};
  }
  const std::set<pid_t>& resumed_threads() const { return resumed_; }
  backend::Result<void> detach() override;
  backend::Result<void> kill() override;

  void set_pass_signals(std::set<int> signals) override;
  void set_program_signals(std::set<int> signals) override;
  void set_catch_syscalls(bool on, std::set<int> syscalls) override;
  backend::Result<std::vector<uint8_t>> siginfo(pid_t tid) override;
  backend::Result<void> set_siginfo(pid_t tid, std::span<const uint8_t> info) override;

  const backend::RegisterLayout& register_layout() const override { return layout_; }
  backend::Result<backend::RegisterFile> read_registers(pid_t tid, backend::RegisterSet set) override;
  backend::Result<void> write_registers(pid_t tid, const backend::RegisterFile& regs) override;

  backend::Result<size_t> read_memory(uint64_t addr, std::span<uint8_t> out) override;
  backend::Result<size_t> write_memory(uint64_t addr, std::span<const uint8_t> data) override;

  backend::Result<void> insert_breakpoint(backend::BreakpointKind kind, uint64_t addr, uint64_t len) override;
  backend::Result<void> remove_breakpoint(backend::BreakpointKind kind, uint64_t addr, uint64_t len) override;
  bool has_client_breakpoint(backend::BreakpointKind kind, uint64_t addr) const override {
    return client_breakpoints.count({kind, addr}) != 0;
  }
  backend::Result<void> set_breakpoint_program(backend::BreakpointKind kind, uint64_t addr,
                                               backend::BreakpointProgram program) override;
  std::string take_console_output() override { return std::exchange(console_output, {}); }
  int hardware_slots() const override { return slots; }

  backend::Result<std::vector<uint8_t>> auxv() override;
  backend::Result<std::string> exe_path() override;
  backend::Result<std::vector<backend::MemoryRegion>> memory_map() override;
  backend::Result<std::vector<backend::LibraryInfo>> libraries(uint64_t* main_lm_out) override;

  void set_fork_reporting(bool fork, bool vfork) override;
  std::vector<std::unique_ptr<backend::Process>> take_fork_children() override;
  void pause() override;

  backend::BranchTracer& tracer() override { return fake_tracer; }
  void configure(const backend::ProcessSettings& settings) override;
  const backend::ProcessSettings& settings() const override { return settings_; }

 private:
  struct Thread {
    std::string name;
    int core = -1;
    backend::RegisterFile regs;
  };
  // The byte at addr, if mapped.
  uint8_t* byte_at(uint64_t addr);

  pid_t pid_;
  backend::RegisterLayout layout_;
  std::map<pid_t, Thread> threads_;
  std::map<pid_t, backend::ThreadOptions> options_;  // set_thread_options()
  std::vector<pid_t> order_;  // threads, main first
  std::map<uint64_t, std::vector<uint8_t>> memory_;
  backend::StopEvent last_stop_;
  std::deque<backend::StopEvent> pending_;
  std::vector<std::unique_ptr<FakeProcess>> children_;
  bool alive_ = true;
  bool running_ = false;
  bool non_stop_ = false;
  std::set<pid_t> resumed_;                       // non-stop: threads running
  std::map<pid_t, backend::StopEvent> last_events_;  // non-stop: each thread's last stop
  backend::ProcessSettings settings_;
};

}  // namespace fake
