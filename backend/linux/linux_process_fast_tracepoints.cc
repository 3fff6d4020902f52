// LinuxProcess: fast tracepoints (ftrace) on jump pads (backend/trace/fast_pad.h). A fast site
// is an int3 (collected with a stop, like any tracepoint) whenever the process is stopped; at a
// resume where every thread continues (nothing steps, no syscall catching, no branch recording,
// no emulated watchpoints, all-stop) its first bytes become a jmp to its pad, and each hit is
// collected inside the program. At the next stop every thread is moved out of the pads, the
// pads' frames go to the experiment, and the sites are int3s again, so everything the client
// sees of a stopped program is the original code.
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>

#include "backend/ptrace/popf_by_hand.h"
#include "backend/ptrace/remote_syscall.h"
#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_info.h"
#include "backend/trace/fast_pad.h"

namespace backend {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kCodeArea = 1 << 20;
constexpr uint64_t kMaxDataArea = 64ull << 20;

}  // namespace

Result<void> LinuxProcess::map_fast_areas(pid_t tid, uint64_t near) {
  auto maps = read_memory_map(pid_);
  if (!maps) return maps.error();
  auto at = patch::free_range_below_clear(*maps, near, near + 1, kCodeArea);
  if (!at) return Error{ENOMEM, "no free address range within jump reach of the tracepoint"};
  auto code = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                    {*at, kCodeArea, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | patch::kMapFixedNoReplace,
                                     static_cast<uint64_t>(-1), 0});
  if (!code) return code.error();
  if (*code < 0 || static_cast<uint64_t>(*code) != *at) return Error{ENOMEM, "the pad area could not be mapped near the code"};
  uint64_t data_size = std::min<uint64_t>(kMaxDataArea, (experiment_->buffer().size() + 2 * kPage) & ~(kPage - 1));
  auto data = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                    {0, data_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                     static_cast<uint64_t>(-1), 0});
  if (!data) return data.error();
  if (*data < 0) return Error{static_cast<int>(-*data), "the frame area could not be mapped"};
  fast_.code = *at;
  fast_.code_used = 0;
  fast_.data = static_cast<uint64_t>(*data);
  fast_.data_size = data_size;
  fast_.drained = sizeof(trace::DataHeader);
  trace::DataHeader h;
  h.head = sizeof(trace::DataHeader);
  h.limit = data_size;
  auto w = mem_.write(fast_.data, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&h), sizeof h));
  if (!w) return w.error();
  return {};
}

void LinuxProcess::prepare_fast_sites() {
  if (!experiment_ || !experiment_->running() || non_stop_ || phase_ != Phase::Stopped) return;
  pid_t runner = 0;
  for (const auto& [tid, t] : threads_)
    if (!t.zombie && !t.running) runner = runner ? runner : tid;
  if (!runner) return;
  for (const auto& tp : experiment_->tracepoints()) {
    if (!tp.fast || !tp.enabled || fast_sites_.count(tp.addr) || fast_refused_.count(tp.addr)) continue;
    auto refuse = [&](const std::string& why) {
      log("fast tracepoint {} at {:#x}: collected with a stop per hit: {}", tp.number, tp.addr, why);
      fast_refused_[tp.addr] = why;
    };
    if (auto why = trace::fast_unsupported(tp)) { refuse(*why); continue; }
    if (!fast_.code) {
      if (auto r = map_fast_areas(runner, tp.addr); !r) { refuse(r.error().message); continue; }
    }
    trace::FastPadSpec spec;
    spec.site = tp.addr;
    spec.code.resize(16);
    auto n = read_memory(tp.addr, spec.code);  // the original code (our int3s hidden)
    if (!n || *n < 8) { refuse("cannot read the code at the site"); continue; }
    spec.code.resize(*n);
    spec.pad_addr = fast_.code + fast_.code_used;
    spec.data_addr = fast_.data;
    spec.pid = pid_;
    spec.tracepoint = &tp;
    auto pad = trace::build_fast_pad(spec);
    if (!pad) { refuse(pad.error().message); continue; }
    if (fast_.code_used + pad->code.size() > kCodeArea) { refuse("the pad area is full"); continue; }
    if (auto w = mem_.write(spec.pad_addr, pad->code); !w) { refuse(w.error().message); continue; }
    fast_.code_used = (fast_.code_used + pad->code.size() + 15) & ~uint64_t{15};
    fast_sites_[tp.addr] = FastSite{tp.number, spec.pad_addr, std::move(*pad), false};
    log("fast tracepoint {} at {:#x}: pad at {:#x}", tp.number, tp.addr, spec.pad_addr);
  }
}

bool LinuxProcess::fast_jumps_allowed(const std::map<pid_t, ResumeAction>& actions) const {
  if (!experiment_ || !experiment_->running() || non_stop_ || catch_syscalls_ || interceptor_ || watch_stepping() ||
      tracer_->coverage_active())
    return false;
  for (const auto& [tid, t] : threads_) {
    if (tracer_->enabled(tid)) return false;  // a recorded history must not see the pads
    auto it = actions.find(tid);
    if (it != actions.end() && it->second.kind != ResumeKind::Continue) return false;
  }
  return true;
}

void LinuxProcess::arm_fast_sites(bool jumps) {
  for (auto& [addr, site] : fast_sites_) {
    bool want = jumps && tracepoint_sites_.count(addr) && !breakpoints_.has_client(addr) &&
                !breakpoints_.has(addr, BreakpointOwner::Internal);
    // A thread resting on the site (a step ended there and collected) steps over its int3.
    for (const auto& [tid, t] : threads_) want = want && (t.zombie || get_pc(tid) != addr);
    if (want == site.jumped) continue;
    if (want) {
      // The int3 goes (its original byte back), then the jump over the original bytes.
      (void)breakpoints_.remove(mem_, addr, BreakpointOwner::Tracepoint);
      if (auto w = mem_.write(addr, site.pad.jump); !w) {
        (void)breakpoints_.insert(mem_, addr, BreakpointOwner::Tracepoint);
        continue;
      }
      code_cache_.invalidate(addr, site.pad.jump.size());
      site.jumped = true;
    } else {
      (void)mem_.write(addr, site.pad.original);
      code_cache_.invalidate(addr, site.pad.original.size());
      site.jumped = false;
      if (tracepoint_sites_.count(addr)) (void)breakpoints_.insert(mem_, addr, BreakpointOwner::Tracepoint);
    }
  }
}

bool LinuxProcess::in_fast_pad(uint64_t pc) const {
  return fast_.code && pc >= fast_.code && pc < fast_.code + fast_.code_used;
}

// Where a thread may wait inside a pad: its reservation (nothing reserved yet). A thread that
// meets a full area's int3 while being stepped out is sent back there.
bool LinuxProcess::at_fast_retry(LinuxThread& t) {
  uint64_t pc = get_pc(t.tid);
  for (const auto& [addr, s] : fast_sites_) {
    if (pc == s.pad_addr + s.pad.retry) return true;
    if (pc == s.pad_addr + s.pad.full_trap + 1) {
      set_pc(t.tid, s.pad_addr + s.pad.retry);
      return true;
    }
  }
  return false;
}

void LinuxProcess::leave_fast_pads(pid_t except) {
  for (auto& [tid, t] : threads_) {
    if (t.running || t.zombie || tid == except) continue;
    // A pad is straight-line code but for its reservation loop: a bounded number of steps.
    for (int steps = 0; steps < 4096 && in_fast_pad(get_pc(tid)) && !at_fast_retry(t); ++steps) {
      user_regs_struct regs{};
      if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) == 0 && popf_by_hand(tid, mem_, regs)) {
        t.stop_regs.reset();
        continue;  // a pad's popfq is never single-stepped
      }
      t.stop_regs.reset();  // it runs
      if (::ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr) != 0) break;
      int status = 0;
      if (::waitpid(tid, &status, __WALL) != tid || !WIFSTOPPED(status)) {
        log("thread {}: gone while leaving a tracepoint pad", tid);
        break;
      }
      int sig = WSTOPSIG(status);
      if (sig == SIGSTOP && t.sigstop_expected) t.sigstop_expected = false;  // ours, from stopping it
      else if (sig != SIGTRAP && !t.deliver_signal && !t.pending) t.deliver_signal = sig;  // at the next resume
    }
  }
}

void LinuxProcess::drain_fast_frames(bool reset) {
  if (!fast_.data || !experiment_) return;
  trace::DataHeader h;
  auto n = mem_.read(fast_.data, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&h), sizeof h));
  if (!n || *n != sizeof h) return;
  std::vector<uint8_t> frame;
  while (fast_.drained < h.head && fast_.drained < fast_.data_size) {
    trace::FastFrameHeader fh;
    auto r = mem_.read(fast_.data + fast_.drained, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&fh), sizeof fh));
    if (!r || *r != sizeof fh || fh.tracepoint == 0 || fh.reserved_size < sizeof fh) break;  // not committed yet
    frame.resize(std::min<uint32_t>(fh.used_size, fh.reserved_size));
    r = mem_.read(fast_.data + fast_.drained, frame);
    if (!r || *r != frame.size()) break;
    fast_.drained += fh.reserved_size;
    // The registers into a full register block (those a pad does not keep are zero).
    trace::FrameBuilder fb(fh.tracepoint);
    size_t regs_at = sizeof fh, blocks_at = regs_at + trace::kFastRegisters * 8;
    if (frame.size() < blocks_at) continue;
    if (fh.flags & trace::kFrameRegisters) {
      std::vector<uint8_t> block(layout_.total_bytes);
      for (size_t i = 0; i < trace::kFastRegisters && i < layout_.regs.size(); ++i) {
        size_t size = std::min<size_t>(8, static_cast<size_t>(layout_.regs[i].bitsize / 8));
        std::copy_n(frame.begin() + static_cast<long>(regs_at + 8 * i), size,
                    block.begin() + static_cast<long>(layout_.regs[i].offset));
      }
      fb.add_registers(block);
    }
    fb.add_raw_blocks(std::span<const uint8_t>(frame).subspan(blocks_at));
    uint64_t site = 0;
    for (const auto& [addr, s] : fast_sites_)
      if (s.number == fh.tracepoint) site = addr;
    if (experiment_->add_collected(fh.tracepoint, site, fb.finish(), trace::now_usec())) sync_tracepoints();
  }
  if (h.lost) {
    uint64_t zero = 0;
    (void)mem_.write(fast_.data + offsetof(trace::DataHeader, lost),
                     std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&zero), sizeof zero));
    experiment_->stop(trace::StopReason::BufferFull, trace::now_usec());
    sync_tracepoints();
  }
  if (reset && fast_.drained >= h.head) {
    uint64_t head = sizeof(trace::DataHeader);
    (void)mem_.write(fast_.data, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&head), sizeof head));
    fast_.drained = head;
  }
}

void LinuxProcess::fast_area_full(LinuxThread& t, uint64_t trap) {
  uint64_t retry = 0;
  for (const auto& [addr, s] : fast_sites_)
    if (s.pad_addr + s.pad.full_trap == trap) retry = s.pad_addr + s.pad.retry;
  if (!retry) {  // not one of ours after all
    t.last_signal = SIGTRAP;
    return report(t, make_event(StopKind::Signal, t.tid, SIGTRAP));
  }
  set_pc(t.tid, retry);
  if (stopping()) return;  // the stop drains the area; the thread reserves again at the resume
  // Every thread stopped and out of the pads (t stays at its retry), the area drained and
  // emptied, then all go on as they were.
  pass_client_breakpoint(t, retry, [this, &t] {
    leave_fast_pads(t.tid);
    drain_fast_frames(true);
    if (!experiment_->running()) arm_fast_sites(false);  // full or passed: no more jumps to the pads
  });
}

void LinuxProcess::drain_tracepoints() {
  if (!alive_ || !fast_.data) return;
  bool stopped = phase_ == Phase::Stopped && !non_stop_;
  if (stopped) leave_fast_pads();
  drain_fast_frames(stopped);
}

void LinuxProcess::settle_fast_sites() {
  if (fast_sites_.empty() || !alive_) return;
  leave_fast_pads();
  drain_fast_frames(true);
  arm_fast_sites(false);
}

void LinuxProcess::forget_fast_sites() {
  fast_sites_.clear();
  fast_refused_.clear();
  fast_ = FastAreas{};
}

void LinuxProcess::restore_fast_sites_into(const ProcMemory& child) const {
  for (const auto& [addr, site] : fast_sites_)
    if (site.jumped) (void)child.write(addr, site.pad.original);
}

std::string LinuxProcess::tracepoint_mechanism(uint64_t addr) const {
  if (fast_sites_.count(addr))
    return "jump pad (collected in the program) while it continues; int3 while stepping or recording branches";
  if (auto it = fast_refused_.find(addr); it != fast_refused_.end()) return "int3, a stop per hit: " + it->second;
  return "int3, a stop per hit";
}

}  // namespace backend
