#include "backend/btrace/patch_tracer.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "backend/btrace/patch_inject.h"
#include "backend/proc_info.h"

namespace backend {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kRingBytes = 1 << 20;        // 256 Ki direct branches between drains
constexpr uint32_t kTableSlots = 1 << 17;       // instrumented block starts (half used at most)
constexpr uint64_t kMinCodeArea = 1 << 20;
constexpr uint64_t kMaxCodeArea = 64 << 20;
constexpr long kMapFixedNoReplace = 0x100000;   // MAP_FIXED_NOREPLACE (Linux 4.17)
constexpr uint64_t kKeepClear = uint64_t{1} << 30;  // left free below a module for the loader

bool failed(int64_t r) { return r < 0 && r > -4096; }

uint64_t pc_of(pid_t tid) {
  errno = 0;
  long v = ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

}  // namespace

PatchTracer::PatchTracer(ProcMemory& mem, SoftwareBreakpoints& breakpoints, BlockCache& code,
                         std::unique_ptr<TraceManager>& tracer)
    : mem_(mem), breakpoints_(breakpoints), code_(code), tracer_(tracer), pid_(mem.pid()) {}

PatchTracer::~PatchTracer() = default;

PatchTracer::Region* PatchTracer::region_of(uint64_t addr) {
  for (auto& r : regions_)
    if (addr >= r.lo && addr < r.hi) return &r;
  return nullptr;
}

const PatchTracer::Region* PatchTracer::region_of(uint64_t addr) const {
  for (const auto& r : regions_)
    if (addr >= r.lo && addr < r.hi) return &r;
  return nullptr;
}

bool PatchTracer::enters_patched(uint64_t target) const { return installed_ && region_of(target) != nullptr; }

void PatchTracer::disable(std::string why, LinuxThread* t) {
  if (disabled_.empty()) disabled_ = std::move(why);
  suspend(t);
}

// ---------------------------------------------------------------- setting up

// A module whose code is patched: an executable mapping of a file (the program, ld.so, libc,
// dlopen'ed libraries); not [vdso] and not anonymous code.
static bool patchable_mapping(const MemoryRegion& m) { return m.exec && !m.name.empty() && m.name[0] == '/'; }

// The modules as mapped now: new ones become regions (their stub area is mapped on first use);
// a region whose mapping went away (dlclose) is dropped with everything planned from its bytes,
// nothing written there (other code may live there now).
bool PatchTracer::sync_regions() {
  auto maps = read_memory_map(pid_);
  if (!maps) return false;
  std::vector<Region> now;
  for (const auto& m : *maps) {
    if (!patchable_mapping(m)) continue;
    if (!now.empty() && now.back().hi == m.start && now.back().name == m.name) now.back().hi = m.end;
    else now.push_back(Region{m.start, m.end, 0, 0, 0, m.name});
  }
  bool dropped = false;
  for (const auto& r : regions_) {
    bool kept = std::any_of(now.begin(), now.end(),
                            [&](const Region& n) { return n.lo == r.lo && n.hi == r.hi && n.name == r.name; });
    if (kept) continue;
    dropped = true;
    for (auto& [a, s] : sites_)
      if (a >= r.lo && a < r.hi) {
        if (s.installed == Installed::Int3) (void)breakpoints_.remove(mem_, s.block.end.addr, BreakpointOwner::Internal);
        if (s.installed == Installed::Patch) ranges_.erase(s.begin);
        s.installed = Installed::None;
      }
  }
  for (auto& n : now)
    for (const auto& r : regions_)
      if (n.lo == r.lo && n.hi == r.hi && n.name == r.name) n = r;  // keeps its stub area
  regions_ = std::move(now);
  if (dropped) forget_plans();
  return true;
}

Result<void> PatchTracer::setup(pid_t tid) {
  if (!sync_regions()) return Error{EIO, "cannot read the process's memory map"};
  if (regions_.empty()) return Error{ENOENT, "no executable mapping of a file"};
  // The data area: [head][ring][guard][table]; anywhere (stubs address it absolutely).
  uint64_t table_bytes = uint64_t{kTableSlots} * 8;
  uint64_t ring_bytes = tracer_->patch_ring_bytes() ? (tracer_->patch_ring_bytes() + kPage - 1) & ~(kPage - 1) : kRingBytes;
  data_size_ = kPage + ring_bytes + kPage + table_bytes;
  // A hint well below every module (not where the next library would go); only a hint.
  uint64_t lowest = UINT64_MAX;
  for (const auto& reg : regions_) lowest = std::min(lowest, reg.lo);
  uint64_t hint = lowest > 4 * kKeepClear ? (lowest - 3 * kKeepClear) & ~(kPage - 1) : 0;
  auto r = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                 {hint, data_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                  static_cast<uint64_t>(-1), 0});
  if (!r) return r.error();
  if (failed(*r)) return Error{static_cast<int>(-*r), "mmap in the program failed"};
  data_ = static_cast<uint64_t>(*r);
  head_addr_ = data_;
  ring_begin_ = data_ + kPage;
  ring_end_ = ring_begin_ + ring_bytes;
  table_addr_ = ring_end_ + kPage;
  table_mask_ = kTableSlots - 1;
  auto g = patch::inject_syscall(pid_, tid, mem_, SYS_mprotect, {ring_end_, kPage, PROT_NONE, 0, 0, 0});
  if (!g || *g != 0) return Error{EIO, "mprotect of the ring's guard page failed"};
  uint8_t head[8];
  std::memcpy(head, &ring_begin_, 8);
  if (auto w = mem_.write(head_addr_, head); !w || *w != 8) return Error{EIO, "cannot write the ring head"};
  table_.assign(kTableSlots, 0);
  table_used_ = 0;
  ready_ = true;
  return {};
}

Result<void> PatchTracer::map_code_area(pid_t tid, Region& r) {
  auto maps = read_memory_map(pid_);
  if (!maps) return maps.error();
  std::vector<std::pair<uint64_t, uint64_t>> used;
  for (const auto& m : *maps) used.emplace_back(m.start, m.end);
  std::sort(used.begin(), used.end());
  uint64_t size = std::clamp<uint64_t>(((r.hi - r.lo) * 4 + kMinCodeArea) & ~(kPage - 1), kMinCodeArea, kMaxCodeArea);
  // Well below the module first (1 GiB): ld.so and mmap place new mappings right below the
  // lowest ones, and a stub area there would move the libraries loaded after it.
  auto away = used;
  if (r.lo > kKeepClear) away.emplace_back(r.lo - kKeepClear, r.lo);
  std::sort(away.begin(), away.end());
  auto at = patch::free_range_near(away, r.lo, r.hi, size);
  if (!at) at = patch::free_range_near(used, r.lo, r.hi, size);
  if (!at) return Error{ENOMEM, "no free address range within rel32 reach of the program's code"};
  auto m = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                 {*at, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | kMapFixedNoReplace,
                                  static_cast<uint64_t>(-1), 0});
  if (!m) return m.error();
  if (failed(*m)) return Error{static_cast<int>(-*m), "mmap of the stub area failed"};
  if (static_cast<uint64_t>(*m) != *at) {  // an old kernel ignored MAP_FIXED_NOREPLACE
    (void)patch::inject_syscall(pid_, tid, mem_, SYS_munmap, {static_cast<uint64_t>(*m), size, 0, 0, 0, 0});
    return Error{ENOMEM, "the stub area could not be placed near the code"};
  }
  r.code_begin = r.code_next = *at;
  r.code_end = *at + size;
  return {};
}

// ---------------------------------------------------------------- running

bool PatchTracer::prepare_run(LinuxThread& t, bool watch_stepping) {
  if (!disabled_.empty()) return false;
  if (!tracer_->patch_traced(t.tid) || watch_stepping || vfork_pending_ || t.tid == in_syscall_tid_) {
    if (installed_ && t.tid == owner_) suspend(&t);
    return false;
  }
  if (owner_ == 0) {
    owner_ = t.tid;
    if (list_tasks(pid_).size() > 1) {
      disable("more than one thread (block patching handles single-threaded programs)", &t);
      return false;
    }
  }
  if (t.tid != owner_) {
    disable("more than one thread (block patching handles single-threaded programs)", nullptr);
    return false;
  }
  if (!ready_) {
    if (auto r = setup(t.tid); !r) {
      disable(r.error().message, &t);
      return false;
    }
  }
  if (!installed_) {
    // Once per free run: modules loaded or unloaded since the last one (dlopen/dlclose).
    (void)sync_regions();
    install_all();
  }
  uint64_t pc = pc_of(t.tid);
  Region* r = region_of(pc);
  if (!r) return false;
  instrument(t.tid, pc);
  return true;
}

void PatchTracer::table_insert(uint64_t target) {
  if (!ready_ || target == 0 || table_used_ * 2 >= table_.size()) return;
  for (uint32_t i = patch::hash_slot(target, table_mask_);; i = (i + 1) & table_mask_) {
    if (table_[i] == target) return;
    if (table_[i] != 0) continue;
    table_[i] = target;
    ++table_used_;
    uint8_t bytes[8];
    std::memcpy(bytes, &target, 8);
    (void)mem_.write(table_addr_ + uint64_t{i} * 8, bytes);
    return;
  }
}

// Every block reachable from pc through direct edges inside the region gets its end planned
// (a patch, or an int3 where no patch fits); a block start inside a patch moves that patch.
void PatchTracer::instrument(pid_t tid, uint64_t pc) {
  std::vector<uint64_t> work{pc};
  std::vector<uint64_t> dirty, fresh;
  while (!work.empty()) {
    uint64_t b = work.back();
    work.pop_back();
    if (visited_.count(b) || !region_of(b)) continue;
    auto block = code_.block_at(b);
    if (!block) continue;  // an edge to it stays an int3 (its site sees it unvisited)
    visited_.insert(b);
    fresh.push_back(b);
    const FlowInsn& f = block->end;
    Site& s = sites_[f.addr];
    if (!s.planned || b > s.latest_start) {
      s.latest_start = std::max(s.latest_start, b);
      if (s.latest_start == b) s.block = *block;
      s.planned = false;
      dirty.push_back(f.addr);
    }
    uint64_t next = f.addr + f.len;
    switch (f.kind) {
      case FlowKind::CondJump:
      case FlowKind::Loop:
        if (f.direct_target) work.push_back(*f.direct_target);
        if (f.len) work.push_back(next);
        break;
      case FlowKind::Jump:
        if (f.direct_target) work.push_back(*f.direct_target);
        break;
      case FlowKind::Call:
        if (f.direct_target) work.push_back(*f.direct_target);
        if (f.len) work.push_back(next);  // where its ret comes back to
        break;
      default:
        break;
    }
  }
  std::sort(dirty.begin(), dirty.end());
  dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
  for (uint64_t a : dirty) {
    Site& s = sites_[a];
    plan_site(tid, a, s);
    install(s);
  }
  // Block starts go into the table only once the ends they lead to are planned: a stub that
  // finds a target there jumps to it.
  for (uint64_t b : fresh) table_insert(b);
}

void PatchTracer::plan_site(pid_t tid, uint64_t flow_addr, Site& s) {
  uninstall(s);
  s.planned = true;
  s.patchable = false;
  const FlowInsn& f = s.block.end;
  if (f.len == 0 || f.addr != flow_addr) return;
  uint64_t next = f.addr + f.len;
  auto known = [&](uint64_t a) { return visited_.count(a) != 0; };
  uint64_t target = 0;
  switch (f.kind) {
    case FlowKind::CondJump:
    case FlowKind::Loop:
      if (!f.direct_target || !known(*f.direct_target) || !known(next)) return;
      target = *f.direct_target;
      break;
    case FlowKind::Jump:
    case FlowKind::Call:
      if (!f.direct_target || !known(*f.direct_target)) return;
      target = *f.direct_target;
      break;
    case FlowKind::Return:
    case FlowKind::IndirectJump:
    case FlowKind::IndirectCall:
      break;
    default:
      return;
  }
  std::vector<uint8_t> bytes(next - s.latest_start);
  if (bytes.size() > 64 * 1024) bytes.erase(bytes.begin(), bytes.end() - 64 * 1024);
  uint64_t from = next - bytes.size();
  size_t got = code_.reader()(from, bytes);
  if (got != bytes.size()) return;
  // Decode the tail of the block: back off far enough to cover 5 bytes before the end, but
  // from an instruction boundary, i.e. from the block start (kept short for long blocks).
  auto insns = patch::decode_all(bytes, from);
  if (!insns || insns->empty() || insns->back().addr != f.addr || insns->back().len != f.len) return;
  if ((f.kind == FlowKind::Return || f.kind == FlowKind::IndirectJump || f.kind == FlowKind::IndirectCall) &&
      !patch::dynamic_supported(insns->back(), f.kind))
    return;
  auto k = patch::choose_displacement(*insns, s.latest_start);
  if (!k) return;
  Region* r = region_of(f.addr);
  if (!r) return;
  if (!r->code_begin && (r->area_failed || !map_code_area(tid, *r))) {
    r->area_failed = true;  // its block ends stay int3 sites
    return;
  }
  patch::StubSpec spec;
  spec.kind = f.kind;
  spec.displaced.assign(insns->begin() + static_cast<std::ptrdiff_t>(*k), insns->end() - 1);
  spec.flow = insns->back();
  spec.target = target;
  spec.edge_id = static_cast<uint32_t>(edges_.size());
  spec.head_addr = head_addr_;
  spec.table_addr = table_addr_;
  spec.table_mask = table_mask_;
  auto stub = patch::build_stub(spec, r->code_next);
  if (!stub || r->code_next + stub->code.size() > r->code_end) return;
  if (auto w = mem_.write(r->code_next, stub->code); !w || *w != stub->code.size()) return;
  bool dynamic = f.kind == FlowKind::Return || f.kind == FlowKind::IndirectJump || f.kind == FlowKind::IndirectCall;
  edges_.push_back(Edge{f.addr, target, f.len, dynamic && stub->cache ? r->code_next : 0});
  uint64_t begin = (*insns)[*k].addr;
  auto jmp = patch::jmp_rel32(begin, r->code_next);
  if (!jmp) return;
  StubInfo info{f.addr, static_cast<uint32_t>(stub->code.size()), stub->exact, stub->miss_int3, stub->ring_stores,
                stub->cache, 0, f.len};
  stubs_[r->code_next] = std::move(info);
  r->code_next += (stub->code.size() + 15) & ~size_t{15};
  s.begin = begin;
  s.end = next;
  s.original.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin - from), bytes.end());
  s.patched = *jmp;
  s.patched.resize(s.end - s.begin, 0xcc);  // bytes after the jmp: never executed
  s.patchable = true;
}

void PatchTracer::install(Site& s) {
  if (!installed_ || !s.planned || s.installed != Installed::None) return;
  auto flow = s.block.end.addr;
  bool conflict = false;
  if (s.patchable)
    for (uint64_t a = s.begin; a < s.end && !conflict; ++a) conflict = breakpoints_.contains(a);
  if (s.patchable && !conflict) {
    if (auto w = mem_.write(s.begin, s.patched); w && *w == s.patched.size()) {
      s.installed = Installed::Patch;
      ranges_[s.begin] = flow;
      return;
    }
  }
  if (breakpoints_.insert(mem_, flow, BreakpointOwner::Internal)) {
    s.installed = Installed::Int3;
  }
}

void PatchTracer::uninstall(Site& s) {
  if (s.installed == Installed::Patch) {
    (void)mem_.write(s.begin, s.original);
    ranges_.erase(s.begin);
  } else if (s.installed == Installed::Int3) {
    (void)breakpoints_.remove(mem_, s.block.end.addr, BreakpointOwner::Internal);
  }
  s.installed = Installed::None;
}

void PatchTracer::install_all() {
  installed_ = true;
  ++stats_.installs;
  for (auto& [addr, s] : sites_) install(s);
}

void PatchTracer::suspend(LinuxThread* t) {
  if (!installed_) return;
  if (owner_) {
    normalize(owner_);
    drain(t && t->tid == owner_ ? t : nullptr);
  }
  (void)sync_regions();  // a module unloaded while it ran: its bytes are not ours to restore
  stats_.patched_sites = stats_.int3_sites = 0;
  for (auto& [addr, s] : sites_) {
    stats_.patched_sites += s.installed == Installed::Patch;
    stats_.int3_sites += s.installed == Installed::Int3;
    uninstall(s);
  }
  installed_ = false;
}

void PatchTracer::thread_created(LinuxThread& t) {
  disable("more than one thread (block patching handles single-threaded programs)", t.tid == owner_ ? &t : nullptr);
}

// ---------------------------------------------------------------- stops

const PatchTracer::StubInfo* PatchTracer::stub_at(uint64_t pc, uint64_t* base) const {
  auto it = stubs_.upper_bound(pc);
  if (it == stubs_.begin()) return nullptr;
  --it;
  if (pc >= it->first + it->second.len) return nullptr;
  *base = it->first;
  return &it->second;
}

size_t PatchTracer::drain(LinuxThread* t) {
  if (!ready_ || !owner_) return 0;
  uint64_t head = 0;
  auto n = mem_.read(head_addr_, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&head), 8));
  if (!n || *n != 8 || head <= ring_begin_ || head > ring_end_) return 0;
  drain_buf_.resize(head - ring_begin_);
  auto got = mem_.read(ring_begin_, drain_buf_);
  if (!got) return 0;
  size_t count = 0;
  Branch last;
  batch_.clear();
  for (size_t i = 0; i + 4 <= *got;) {
    uint32_t word;
    std::memcpy(&word, drain_buf_.data() + i, 4);
    i += 4;
    uint32_t id = word & ~patch::kDynamicEntry;
    if (id >= edges_.size()) break;  // cannot happen: stubs only write ids we made
    const Edge& e = edges_[id];
    uint64_t to = e.to;
    if (word & patch::kDynamicEntry) {
      if (i + 8 > *got) break;
      std::memcpy(&to, drain_buf_.data() + i, 8);
      i += 8;
      if (e.stub) {  // the site's latest target: its inline cache moves there after the drain
        if (last_dynamic_.size() < edges_.size()) last_dynamic_.resize(edges_.size(), 0);
        uint32_t& at = last_dynamic_[id];
        if (at) cache_moves_[at - 1].second = to;
        else {
          cache_moves_.emplace_back(e.stub, to);
          cache_move_ids_.push_back(id);
          at = static_cast<uint32_t>(cache_moves_.size());
        }
      }
    }
    if (to == e.from + e.len) continue;  // to the next instruction: straight-line in a trace
    last = Branch{e.from, to};
    batch_.push_back(last);
    ++count;
  }
  tracer_->record_many(owner_, batch_);
  uint8_t reset[8];
  std::memcpy(reset, &ring_begin_, 8);
  (void)mem_.write(head_addr_, reset);
  update_caches();
  stats_.drained += count;
  if (count && t) {
    t->cursor.block_start = last.to;
    t->cursor.last_flow = last.from;
    t->cursor.last_flow_taken = true;
  }
  return count;
}

// Each dynamic site that missed its inline cache since the last drain caches its latest
// target, when that target is instrumented (a hit jumps there directly). Never the stub the
// thread stands in (it may be between reading the target and the id).
void PatchTracer::update_caches() {
  if (cache_moves_.empty()) return;
  uint64_t pc = pc_of(owner_);
  for (const auto& [base, target] : cache_moves_) {
    auto it = stubs_.find(base);
    if (it == stubs_.end() || !it->second.cache || it->second.cached == target) continue;
    StubInfo& info = it->second;
    if (pc >= base && pc < base + info.len) continue;
    if (!visited_.count(target)) continue;
    auto [e, fresh] = cache_edges_.try_emplace({info.flow, target}, static_cast<uint32_t>(edges_.size()));
    if (fresh) edges_.push_back(Edge{info.flow, target, info.flow_len, 0});
    uint8_t slot[12];
    std::memcpy(slot, &target, 8);
    std::memcpy(slot + 8, &e->second, 4);
    if (auto w = mem_.write(base + *info.cache, slot); w && *w == sizeof slot) info.cached = target;
  }
  for (uint32_t id : cache_move_ids_) last_dynamic_[id] = 0;
  cache_move_ids_.clear();
  cache_moves_.clear();
}

void PatchTracer::clear_caches() {
  uint8_t zeros[patch::kCacheBytes] = {};
  for (auto& [base, info] : stubs_)
    if (info.cache && info.cached) {
      (void)mem_.write(base + *info.cache, zeros);
      info.cached = 0;
    }
}

// A thread stopped inside a stub goes back to the original address it stands for where nothing
// of the control-flow instruction has happened yet; elsewhere it is stepped to the stub's end.
void PatchTracer::normalize(pid_t tid) {
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return;
  uint64_t base = 0;
  const StubInfo* info = stub_at(regs.rip, &base);
  if (!info) return;
  for (const auto& [off, addr] : info->exact)
    if (regs.rip == base + off) {
      regs.rip = addr;
      ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs);
      return;
    }
  ++stats_.step_outs;
  std::vector<int> signals;
  for (int steps = 0; steps < 512; ++steps) {
    if (::ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr) != 0) break;
    int status = 0;
    while (::waitpid(tid, &status, __WALL) < 0 && errno == EINTR) {}
    if (!WIFSTOPPED(status)) return;
    int sig = WSTOPSIG(status);
    if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) break;
    if (sig == SIGSEGV) {
      siginfo_t si{};
      ::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
      auto addr = reinterpret_cast<uint64_t>(si.si_addr);
      if (addr >= ring_end_ && addr < ring_end_ + kPage) {  // the ring filled up on the way out
        drain(nullptr);
        regs.rax = ring_begin_;
        ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs);
        ++stats_.ring_full;
        continue;
      }
    }
    if (sig != SIGTRAP) {
      signals.push_back(sig);
      continue;
    }
    if (info->miss_int3 && regs.rip - 1 == base + *info->miss_int3) {
      regs.rip = info->flow;  // the engine executes it at the next run
      ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs);
      break;
    }
    if (regs.rip < base || regs.rip >= base + info->len) break;
  }
  for (int sig : signals) ::syscall(SYS_tgkill, pid_, tid, sig);
}

PatchTracer::StopKind PatchTracer::on_stop(LinuxThread& t, int status, uint64_t* flow_addr) {
  // A ptrace event or syscall stop is inside a system call whose result is not in rax yet: an
  // mmap injected there would step the thread out of that call (into its next event, unseen)
  // and put the stale rax back. The next run from such a stop goes without patches.
  if (WIFSTOPPED(status)) {
    int event = status >> 16;
    if (event != 0 || WSTOPSIG(status) == (SIGTRAP | 0x80)) in_syscall_tid_ = t.tid;
    else if (in_syscall_tid_ == t.tid) in_syscall_tid_ = 0;
    // A vfork child runs in this memory until it exits or execs (its parent's vforkdone): no
    // patch may go back in meanwhile.
    if (WSTOPSIG(status) == SIGTRAP && event == PTRACE_EVENT_VFORK) vfork_pending_ = true;
    if (WSTOPSIG(status) == SIGTRAP && event == PTRACE_EVENT_VFORK_DONE) vfork_pending_ = false;
  }
  if (!installed_ || t.tid != owner_ || !WIFSTOPPED(status)) return StopKind::None;
  drain(&t);
  int sig = WSTOPSIG(status);
  if ((status >> 16) != 0 || sig == (SIGTRAP | 0x80) || sig == SIGSTOP) return StopKind::None;
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0) return StopKind::None;
  uint64_t base = 0;
  if (sig == SIGTRAP) {
    const StubInfo* info = stub_at(regs.rip - 1, &base);
    if (info && info->miss_int3 && regs.rip - 1 == base + *info->miss_int3) {
      regs.rip = info->flow;
      ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      *flow_addr = info->flow;
      ++stats_.misses;
      return StopKind::Miss;
    }
    return StopKind::None;
  }
  if (sig == SIGSEGV) {
    siginfo_t si{};
    ::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si);
    auto addr = reinterpret_cast<uint64_t>(si.si_addr);
    const StubInfo* info = stub_at(regs.rip, &base);
    if (info && addr >= ring_end_ && addr < ring_end_ + kPage &&
        std::find(info->ring_stores.begin(), info->ring_stores.end(), regs.rip - base) != info->ring_stores.end()) {
      regs.rax = ring_begin_;  // drained above: the store starts the ring again
      ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      ++stats_.ring_full;
      return StopKind::Consumed;
    }
  }
  // A signal for the program: it is seen at an original address.
  normalize(t.tid);
  drain(&t);
  return StopKind::None;
}

// ---------------------------------------------------------------- memory

void PatchTracer::restore_into(const ProcMemory& child) const {
  for (const auto& [addr, s] : sites_)
    if (s.installed == Installed::Patch) (void)child.write(s.begin, s.original);
}

void PatchTracer::unshadow(uint64_t addr, std::span<uint8_t> buf) const {
  if (ranges_.empty() || buf.empty()) return;
  uint64_t end = addr + buf.size();
  auto it = ranges_.upper_bound(addr);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    const Site& s = sites_.at(it->second);
    for (uint64_t a = std::max(s.begin, addr); a < std::min(s.end, end); ++a) buf[a - addr] = s.original[a - s.begin];
  }
}

void PatchTracer::invalidate(uint64_t addr, uint64_t len) {
  bool touches = false;
  for (const auto& r : regions_) touches = touches || (addr < r.hi && addr + len > r.lo);
  if (!touches) return;
  forget_plans();
}

// Plans made from the old bytes are dropped (stubs stay allocated; the table and the inline
// caches are emptied so no stub trusts a target planned from them).
void PatchTracer::forget_plans() {
  for (auto& [a, s] : sites_) uninstall(s);
  sites_.clear();
  visited_.clear();
  ranges_.clear();
  clear_caches();
  if (ready_) {
    std::vector<uint8_t> zeros(table_.size() * 8, 0);
    (void)mem_.write(table_addr_, zeros);
    std::fill(table_.begin(), table_.end(), 0);
    table_used_ = 0;
  }
}

}  // namespace backend
