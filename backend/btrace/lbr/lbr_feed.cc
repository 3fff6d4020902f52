#include "backend/btrace/lbr/lbr_feed.h"

#include <unistd.h>

#include <cstring>
#include <utility>

namespace backend {

std::optional<perf_event_attr> taken_branch_counter_attr(const CpuId& cpu) {
  if (cpu.vendor != "GenuineIntel" || cpu.family != 6) return std::nullopt;
  // BR_INST_RETIRED.NEAR_TAKEN (event 0xc4, umask 0x20) on the Core models since Sandy Bridge
  // (the Atom line counts taken branches differently).
  switch (cpu.model) {
    case 0x2a: case 0x2d: case 0x3a: case 0x3e: case 0x3c: case 0x3f: case 0x45: case 0x46:
    case 0x3d: case 0x47: case 0x4f: case 0x56: case 0x4e: case 0x5e: case 0x55: case 0x8e:
    case 0x9e: case 0x66: case 0x6a: case 0x6c: case 0x7d: case 0x7e: case 0xa5: case 0xa6:
    case 0x8c: case 0x8d: case 0xa7:
      break;
    default:
      return std::nullopt;
  }
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_RAW;
  attr.config = 0x20c4;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return attr;
}

DeviceLbrFeed::DeviceLbrFeed(LbrDevice device) : device_(std::move(device)) {
  if (auto in = device_.info()) {
    depth_ = in->depth;
    simulated_ = in->simulated;
  }
}

DeviceLbrFeed::~DeviceLbrFeed() {
  for (pid_t tid : armed_) (void)device_.detach(tid);
}

Result<void> DeviceLbrFeed::arm(pid_t tid) {
  if (armed_.count(tid)) return {};
  if (auto r = device_.attach(tid); !r) return r.error();
  armed_.insert(tid);
  // The counter is what makes stitching exact; without it windows are fitted to the code.
  if (simulated_) {
    counter_missing_ = "simulated LBR";
  } else if (auto attr = taken_branch_counter_attr(read_cpu_id())) {
    if (auto ev = PerfEvent::open(*attr, tid)) counters_.emplace(tid, std::move(*ev));
    else counter_missing_ = std::string("taken-branch counter: ") + std::strerror(ev.error().code);
  } else {
    counter_missing_ = "no taken-branch counter known for this CPU model";
  }
  return {};
}

void DeviceLbrFeed::release(pid_t tid) {
  counters_.erase(tid);
  if (!armed_.erase(tid)) return;
  // ESRCH (the thread is gone) is fine: the module freed it at its exit.
  (void)device_.detach(tid);
}

Result<LbrWindow> DeviceLbrFeed::window(pid_t tid, uint64_t) {
  auto s = device_.snapshot(tid);
  if (!s) return s.error();
  LbrWindow w;
  w.sequence = s->seq;
  w.ip = s->ip;
  w.depth = depth_;
  w.simulated = s->simulated;
  w.from_trap = s->from_trap;
  w.conflict = (s->flags & (1u << 4)) != 0;  // MSRH_SNAP_CONFLICT
  for (uint32_t i = s->count; i-- > 0;) w.oldest_first.push_back(Branch{s->entries[i].from, s->entries[i].to});
  if (auto it = counters_.find(tid); it != counters_.end()) {
    uint64_t count = 0;
    if (::read(it->second.fd(), &count, sizeof count) == static_cast<ssize_t>(sizeof count)) w.taken_total = count;
  }
  return w;
}

std::string DeviceLbrFeed::name() const {
  if (simulated_) return "msr_helper (simulate_lbr: TEST ONLY)";
  std::string n = "msr_helper, LBR depth " + std::to_string(depth_);
  if (!counter_missing_.empty()) n += "; windows fitted to the code (" + counter_missing_ + ")";
  return n;
}

std::string lbr_unavailable_reason(const std::string& path, const Error& open_error, const CpuId& cpu) {
  if (open_error.code != ENOENT) return "msr_helper: not usable (" + open_error.message + ")";
  std::string missing = path + ": " + std::strerror(ENOENT);
  std::string cpu_reason = lbr_cpu_reason(cpu);
  if (!cpu_reason.empty()) return "msr_helper: not available: " + cpu_reason + " (" + missing + ")";
  if (cpu.hypervisor)
    return "msr_helper: not loaded (" + missing + "); in a VM it loads only where the hypervisor "
           "really gives the guest LBR (see `dmesg | grep msr_helper` after insmod)";
  return "msr_helper: not loaded (" + missing + "); see kmod-helper/README.md";
}

std::optional<bool> straight_line_reaches(BlockCache& code, uint64_t from, uint64_t to) {
  uint64_t at = from;
  for (int i = 0; i < 64; ++i) {
    auto block = code.block_at(at);
    if (!block) return std::nullopt;
    if (to >= at && to <= block->end.addr) return true;
    const FlowInsn& e = block->end;
    // Conditional branches may fall through, and a system call comes back after itself.
    if (e.kind != FlowKind::CondJump && e.kind != FlowKind::Loop && e.kind != FlowKind::Syscall) return false;
    at = e.addr + e.len;
  }
  return false;
}

LbrStitch stitch_lbr_window(std::span<const Branch> recent, const LbrWindow& window, const LbrStopPlace* where) {
  const auto& w = window.oldest_first;
  LbrStitch out;
  if (w.empty()) return out;
  auto same = [](const Branch& a, const Branch& b) { return a.from == b.from && a.to == b.to; };
  if (where && where->new_branches) {
    // Counted: exactly this many are new. More than the window holds: the rest were lost.
    uint64_t fresh = *where->new_branches;
    if (fresh >= w.size()) {
      out.gap = fresh > w.size();
      return out;
    }
    out.skip = w.size() - fresh;
    // The old part must be what the history ends with; if not, the stack lost entries (another
    // LBR user, a reset): keep the new ones after a gap.
    bool match = out.skip <= recent.size();
    for (size_t i = 0; i < out.skip && match; ++i) match = same(w[i], recent[recent.size() - out.skip + i]);
    if (!match) out.gap = !recent.empty() || w.size() >= window.depth;
    return out;
  }
  // Does taking w[k..] as the new branches fit the code? Unknown code does not refute it.
  auto fits = [&](size_t k) {
    if (!where || !where->straight_line) return true;
    auto ok = [](std::optional<bool> v) { return !v || *v; };
    if (k == w.size()) {
      if (window.from_trap && where->pc == where->previous_pc) return false;  // it ran: a branch brought it back
      return ok(where->straight_line(where->previous_pc, where->pc));
    }
    return ok(where->straight_line(where->previous_pc, w[k].from)) && ok(where->straight_line(w.back().to, where->pc));
  };
  for (size_t k = std::min(recent.size(), w.size()); k > 0; --k) {
    bool match = true;
    for (size_t i = 0; i < k && match; ++i) match = same(w[i], recent[recent.size() - k + i]);
    if (match && fits(k)) {
      out.skip = k;
      return out;
    }
  }
  out.gap = recent.empty() ? (window.depth != 0 && w.size() >= window.depth) : true;
  return out;
}

}  // namespace backend
