#include "backend/btrace/patch/patch_tracer.h"

#include <utility>

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

#include "backend/ptrace/remote_syscall.h"
#include "backend/x86/insn_length.h"
#include "backend/ptrace/proc_info.h"

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
    : mem_(mem), breakpoints_(breakpoints), code_(code), tracer_(tracer), pid_(mem.pid()) {
  if (tracer_) tracer_->forget_fixed_ids();  // edge ids start again from 0: histories must not reuse the old ones
}

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
    if (!now.empty() && now.back().hi == m.start && now.back().name == m.name) {
      now.back().hi = m.end;
      now.back().writable = now.back().writable || m.write;
    } else {
      now.push_back(Region{m.start, m.end, 0, 0, 0, m.name});
      now.back().writable = m.write;
    }
  }
  bool dropped = false;
  for (const auto& r : regions_) {
    bool kept = std::any_of(now.begin(), now.end(),
                            [&](const Region& n) { return n.lo == r.lo && n.hi == r.hi && n.name == r.name; });
    if (kept) continue;
    dropped = true;
    code_writes_.drop(r.lo, r.hi);
    for (auto& [a, s] : sites_)
      if (a >= r.lo && a < r.hi) {
        if (s.installed == Installed::Int3) (void)breakpoints_.remove(mem_, s.block.end.addr, BreakpointOwner::Internal);
        if (s.installed == Installed::Patch) ranges_.erase(s.begin);
        s.installed = Installed::None;
      }
  }
  for (auto& n : now)
    for (const auto& r : regions_)
      if (n.lo == r.lo && n.hi == r.hi && n.name == r.name) {
        bool writable = n.writable;
        n = r;  // keeps its stub area
        n.writable = writable || r.writable;
      }
  regions_ = std::move(now);
  // Copied pages of code no longer in a region (unmapped) or now writable go.
  for (auto it = code_pages_.begin(); it != code_pages_.end();) {
    const Region* r = region_of(it->first);
    it = r && !r->writable ? std::next(it) : code_pages_.erase(it);
  }
  if (dropped) forget_plans();
  return true;
}

Result<void> PatchTracer::setup(pid_t tid) {
  if (!sync_regions()) return Error{EIO, "cannot read the process's memory map"};
  if (regions_.empty()) return Error{ENOENT, "no executable mapping of a file"};
  // The data page: the scratch `syscall` of later injections (code only the server runs) and
  // the name the shared areas show in the program's maps. Then the table (stubs address it
  // absolutely: its targets, then where each leads), anywhere. Rings are mapped per thread
  // (ring_for), stub areas per module (map_code_area).
  uint64_t table_bytes = uint64_t{kTableSlots} * 8;
  ring_bytes_ = tracer_->patch_ring_bytes() ? (tracer_->patch_ring_bytes() + kPage - 1) & ~(kPage - 1) : kRingBytes;
  data_size_ = kPage;
  // A hint well below every module (not where the next library would go); only a hint.
  uint64_t lowest = UINT64_MAX;
  for (const auto& reg : regions_) lowest = std::min(lowest, reg.lo);
  uint64_t hint = lowest > 4 * kKeepClear ? (lowest - 3 * kKeepClear) & ~(kPage - 1) : 0;
  if (!flush_all()) return Error{EIO, "cannot write the program's code"};
  auto r = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                 {hint, data_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                  static_cast<uint64_t>(-1), 0});
  if (!r) return r.error();
  if (failed(*r)) return Error{static_cast<int>(-*r), "mmap in the program failed"};
  data_ = static_cast<uint64_t>(*r);
  scratch_ = data_;
  name_ = data_ + 64;
  static constexpr char kName[] = "branchstub-patch";
  if (auto w = mem_.write(name_, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kName), sizeof kName));
      !w || *w != sizeof kName)
    return Error{EIO, "cannot write the data page"};
  auto g = patch::inject_syscall(pid_, tid, mem_, SYS_mprotect, {scratch_, kPage, PROT_READ | PROT_EXEC, 0, 0, 0});
  if (!g || *g != 0) return Error{EIO, "mprotect of the scratch page failed"};
  table_size_ = 2 * table_bytes;
  if (auto t = map_shared(tid, hint + kPage, false, table_size_, PROT_READ | PROT_WRITE)) {
    table_addr_ = t->addr;
    writes_.add_area(table_addr_, table_addr_ + table_size_, true, std::move(t->view));
  } else {
    auto m = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                   {hint + kPage, table_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                                    static_cast<uint64_t>(-1), 0},
                                   scratch_);
    if (!m) return m.error();
    if (failed(*m)) return Error{static_cast<int>(-*m), "mmap in the program failed"};
    table_addr_ = static_cast<uint64_t>(*m);
    writes_.add_area(table_addr_, table_addr_ + table_size_, true);
  }
  table_mask_ = kTableSlots - 1;
  table_.assign(kTableSlots, 0);
  table_used_ = 0;
  ready_ = true;
  return {};
}

std::optional<patch::SharedMapping> PatchTracer::map_shared(pid_t tid, uint64_t addr, bool exact, uint64_t size, int prot) {
  // Under a seccomp filter memfd_create may be refused by killing the program or by a SIGSYS
  // its sandbox handles: never tried there (mmap is what such filters allow).
  if (int mode = read_seccomp_mode(pid_, tid); mode != 0) {
    ++stats_.private_areas;
    if (private_why_.empty()) private_why_ = mode > 0 ? "the program runs under seccomp" : "cannot read its seccomp mode";
    return std::nullopt;
  }
  auto m = patch::map_shared(pid_, tid, mem_, addr, exact, size, prot, scratch_, name_);
  if (m) {
    ++stats_.shared_areas;
    return std::move(*m);
  }
  ++stats_.private_areas;
  if (private_why_.empty()) private_why_ = m.error().message;
  return std::nullopt;
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
  if (!flush_all()) return Error{EIO, "cannot write the program's code"};
  if (auto shared = map_shared(tid, *at, true, size, PROT_READ | PROT_EXEC)) {
    r.code_begin = r.code_next = *at;
    r.code_end = *at + size;
    code_areas_.emplace_back(*at, *at + size);
    writes_.add_area(*at, *at + size, false, std::move(shared->view));
    return {};
  }
  auto m = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                 {*at, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | kMapFixedNoReplace,
                                  static_cast<uint64_t>(-1), 0},
                                 scratch_);
  if (!m) return m.error();
  if (failed(*m)) return Error{static_cast<int>(-*m), "mmap of the stub area failed"};
  if (static_cast<uint64_t>(*m) != *at) {  // an old kernel ignored MAP_FIXED_NOREPLACE
    (void)patch::inject_syscall(pid_, tid, mem_, SYS_munmap, {static_cast<uint64_t>(*m), size, 0, 0, 0, 0}, scratch_);
    return Error{ENOMEM, "the stub area could not be placed near the code"};
  }
  r.code_begin = r.code_next = *at;
  r.code_end = *at + size;
  code_areas_.emplace_back(*at, *at + size);
  writes_.add_area(*at, *at + size);
  return {};
}

// ---------------------------------------------------------------- running

// A thread's ring: its own, a spare one of a thread that exited, or a new mapping (the system
// call runs in tid, stopped, from the scratch page: other threads may be running).
PatchTracer::Ring* PatchTracer::ring_for(pid_t tid) {
  if (auto it = rings_.find(tid); it != rings_.end()) return &it->second;
  Ring r;
  if (!spare_.empty()) {
    r = spare_.back();
    spare_.pop_back();
  } else {
    uint64_t size = kPage + ring_bytes_ + kPage;
    if (!flush_all()) return nullptr;
    if (auto shared = map_shared(tid, 0, false, size, PROT_READ | PROT_WRITE)) {
      r.head_addr = shared->addr;
      r.view = shared->view.data();
      ring_views_.push_back(std::move(shared->view));
    } else {
      auto m = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                     {0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                                     scratch_);
      if (!m || failed(*m)) return nullptr;
      r.head_addr = static_cast<uint64_t>(*m);
    }
    r.begin = r.head_addr + kPage;
    r.end = r.begin + ring_bytes_;
    auto g = patch::inject_syscall(pid_, tid, mem_, SYS_mprotect, {r.end, kPage, PROT_NONE, 0, 0, 0}, scratch_);
    if (!g || *g != 0) return nullptr;
  }
  if (!set_head(r, r.begin)) return nullptr;
  r.gs_set = false;
  r.last.reset();
  return &rings_.emplace(tid, r).first->second;
}

uint64_t PatchTracer::head_of(const Ring& r) const {
  if (r.view) return __atomic_load_n(reinterpret_cast<const uint64_t*>(r.view), __ATOMIC_ACQUIRE);
  uint64_t head = 0;
  auto n = mem_.read(r.head_addr, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&head), 8));
  return n && *n == 8 ? head : 0;
}

bool PatchTracer::set_head(Ring& r, uint64_t head) {
  if (r.view) {
    __atomic_store_n(reinterpret_cast<uint64_t*>(r.view), head, __ATOMIC_RELEASE);
    return true;
  }
  uint8_t bytes[8];
  std::memcpy(bytes, &head, 8);
  auto w = mem_.write(r.head_addr, bytes);
  return w && *w == 8;
}

// Points tid's gs base at its ring's head (ours) or back to 0. A gs base that is neither 0 nor
// one of our heads (inherited by a new thread) belongs to the program: false.
bool PatchTracer::set_gs(pid_t tid, Ring& r, bool ours) {
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return false;
  if (ours && regs.gs_base != 0 && regs.gs_base != r.head_addr) {
    bool inherited = std::any_of(rings_.begin(), rings_.end(), [&](const auto& e) { return e.second.head_addr == regs.gs_base; });
    if (!inherited) return false;
  }
  regs.gs_base = ours ? r.head_addr : 0;
  if (::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0) return false;
  r.gs_set = ours;
  return true;
}

bool PatchTracer::all_stopped() const {
  for (pid_t tid : list_tasks(pid_)) {
    errno = 0;
    ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
    if (errno) return false;
  }
  return true;
}

// Traced threads never run a byte of code in a module that no free run instrumented: they trap
// before (int3 sites, stubs' misses, the engine's planner stops at patched modules).
bool PatchTracer::others_traced(pid_t self) const {
  for (pid_t tid : list_tasks(pid_))
    if (tid != self && !tracer_->patch_traced(tid)) return false;
  return true;
}

bool PatchTracer::prepare_run(LinuxThread& t, bool watch_stepping, bool non_stop) {
  WriteBatch batch(*this);
  if (!disabled_.empty()) return false;
  if (auto it = rings_.find(t.tid); it != rings_.end() && it->second.last) {
    t.cursor.block_start = it->second.last->to;
    t.cursor.last_flow = it->second.last->from;
    t.cursor.last_flow_taken = true;
    it->second.last.reset();
  }
  // Between a syscall's entry and exit stops nothing may be injected (a single step there
  // finishes the syscall): the engine runs it to its exit stop first.
  if (t.in_syscall) return false;
  if (!tracer_->patch_traced(t.tid) || watch_stepping || vfork_pending_ || t.tid == in_syscall_tid_) {
    if (installed_) suspend(&t);
    return false;
  }
  if (non_stop && list_tasks(pid_).size() > 1) {
    disable("more than one thread in non-stop mode (block patching handles threads in all-stop mode)", &t);
    return false;
  }
  // The patches (and the first mappings) go in while every thread is stopped: a thread stopped
  // in the middle of bytes a patch would cover gets its pc made a block start first.
  if (!ready_) {
    if (!all_stopped()) return false;
    if (auto r = setup(t.tid); !r) {
      disable(r.error().message, &t);
      return false;
    }
  }
  if (!installed_) {
    if (!all_stopped()) return false;
    // Once per free run: modules loaded or unloaded since the last one (dlopen/dlclose).
    (void)sync_regions();
    if (!install_all(t.tid)) return false;
  }
  Ring* ring = ring_for(t.tid);
  if (!ring) {
    disable("cannot map a ring for a thread", &t);
    return false;
  }
  if (!ring->gs_set && !set_gs(t.tid, *ring, true)) {
    disable("the program uses the gs base", &t);
    return false;
  }
  uint64_t pc = pc_of(t.tid);
  Region* r = region_of(pc);
  uint64_t base = 0;
  if (!r) return stub_at(pc, &base) != nullptr;  // put into a stub by install_all: it runs on
  concurrent_ = rings_.size() > 1;  // instrument() asks all_stopped() only when it writes code
  instrument(t.tid, pc);
  concurrent_ = false;
  return true;
}

void PatchTracer::table_insert(uint64_t target) {
  if (!ready_ || target == 0 || table_used_ * 2 >= table_.size()) return;
  for (uint32_t i = patch::hash_slot(target, table_mask_);; i = (i + 1) & table_mask_) {
    if (table_[i] == target) return;
    if (table_[i] != 0) continue;
    table_[i] = target;
    ++table_used_;
    table_set_destination(i, destination(target));  // first: a stub reads it once it finds the target
    uint8_t bytes[8];
    std::memcpy(bytes, &target, 8);
    area_write(table_addr_ + uint64_t{i} * 8, bytes);
    return;
  }
}

// Stub areas and the table: into the copy, and to the program now or at the next flush.
bool PatchTracer::area_write(uint64_t addr, std::span<const uint8_t> bytes) {
  if (writes_.write(mem_, addr, bytes, !batching_)) return true;
  auto w = mem_.write(addr, bytes);
  return w && *w == bytes.size();
}

void PatchTracer::code_write(uint64_t addr, std::span<const uint8_t> bytes) {
  if (batching_) code_writes_.write(addr, bytes);
  else (void)mem_.write(addr, bytes);
}

bool PatchTracer::flush_all() {
  if (!flush_writes()) return false;
  if (!code_writes_.pending() || code_writes_.flush(mem_)) return true;
  disable("cannot write the program's code", nullptr);
  return false;
}

bool PatchTracer::flush_writes() {
  if (!writes_.pending()) return true;
  if (writes_.flush(mem_)) return true;
  disable("cannot write the stub areas in the program", nullptr);
  return false;
}

PatchTracer::WriteBatch::WriteBatch(PatchTracer& p) : p_(p), was_(p.batching_) {
  // Gathered only while no other thread can run the code being built.
  p_.batching_ = p_.rings_.size() <= 1;
}

PatchTracer::WriteBatch::~WriteBatch() {
  (void)p_.flush_all();
  p_.batching_ = was_;
}

void PatchTracer::table_set_destination(uint32_t slot, uint64_t dest) {
  uint8_t bytes[8];
  std::memcpy(bytes, &dest, 8);
  area_write(table_addr_ + uint64_t{kTableSlots} * 8 + uint64_t{slot} * 8, bytes);
}

// A translation was made for target: a table hit on it goes there from now on.
void PatchTracer::table_redirect(uint64_t target) {
  if (!ready_ || target == 0) return;
  for (uint32_t i = patch::hash_slot(target, table_mask_); table_[i] != 0; i = (i + 1) & table_mask_)
    if (table_[i] == target) return table_set_destination(i, destination(target));
}

// Every block reachable from pc through direct edges inside the region gets its end planned
// (a patch, or an int3 where no patch fits); a block start inside a patch moves that patch.
// A jmp or call through a [rip+disp32] slot (a PLT entry's GOT slot, mostly): where the slot
// points now is where it most likely goes, so that is explored like a direct target (its stub
// still looks up every target it meets; a lazily bound slot leads to the PLT's own code first).
std::optional<uint64_t> PatchTracer::slot_target(const FlowInsn& f) const {
  auto slot = rip_indirect_slot(std::span<const uint8_t>(f.bytes, f.len), f.addr + f.len);
  if (!slot) return std::nullopt;
  uint64_t to = 0;
  auto n = mem_.read(*slot, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&to), 8));
  if (!n || *n != 8 || !region_of(to)) return std::nullopt;
  return to;
}

void PatchTracer::instrument(pid_t tid, uint64_t pc) {
  // Breadth first, kExploreDepth direct edges deep: most of what is reachable never runs
  // (planning all of libc from a program's entry costs more than the program). A stub's exit
  // to a block beyond goes to a frontier trap; when the thread gets there, exploration goes
  // on from there and the exit is linked to the block. 5 measured best on ls -l (3: more
  // frontier stops; 8 and 12: more planning of what never runs).
  constexpr unsigned kExploreDepth = 5;
  std::vector<std::pair<uint64_t, unsigned>> work{{pc, 0}};
  std::vector<uint64_t> dirty, fresh;
  for (size_t w = 0; w < work.size(); ++w) {
    auto [b, depth] = work[w];
    if (visited_.count(b) || !region_of(b)) continue;
    if (depth > kExploreDepth) continue;
    auto block = code_.block_at(b);
    if (!block) continue;  // an edge to it stays an int3 (its site sees it unvisited)
    visited_.insert(b);
    fresh.push_back(b);
    const FlowInsn& f = block->end;
    uint64_t next = f.addr + f.len;
    auto edge = [&](uint64_t to) { work.emplace_back(to, depth + 1); };
    if (f.kind == FlowKind::Syscall && syscall_runs_free(b, f)) {
      // No site: the syscall runs where it is and falls through into the next block, which
      // must be instrumented now, however deep (no stub exit leads there to hold a trap).
      work.emplace_back(next, depth);
      continue;
    }
    Site& s = sites_[f.addr];
    if (s.planned && s.patchable && b > s.latest_start && b <= s.begin) {
      s.latest_start = b;  // a start before the patched bytes: the same patch
      s.block = *block;
    } else if (!s.planned || b > s.latest_start) {
      s.latest_start = std::max(s.latest_start, b);
      if (s.latest_start == b) s.block = *block;
      s.planned = false;
      dirty.push_back(f.addr);
    }
    switch (f.kind) {
      case FlowKind::CondJump:
      case FlowKind::Loop:
        if (f.direct_target) edge(*f.direct_target);
        if (f.len) edge(next);
        break;
      case FlowKind::Jump:
        if (f.direct_target) edge(*f.direct_target);
        break;
      case FlowKind::Call:
      case FlowKind::IndirectCall:
        if (f.direct_target) edge(*f.direct_target);
        if (f.kind == FlowKind::IndirectCall)
          if (auto to = slot_target(f)) edge(*to);
        // Where its ret comes back to, as deep as the call: it runs whenever the call returns
        // (beyond the frontier, each such return would stop as an unknown ret target).
        if (f.len) work.emplace_back(next, depth);
        break;
      case FlowKind::IndirectJump:
        if (auto to = slot_target(f)) edge(*to);
        break;
      default:
        break;
    }
  }
  std::sort(dirty.begin(), dirty.end());
  dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());
  // Other threads running: a patch over code no thread can be running (a fresh site, every
  // other thread traced) goes in; a patch that moves comes out fenced and leaves an int3 (the
  // patch comes at the next free run that starts with every thread stopped).
  // Every stub first (gathered into a few writes), then the patches that lead to them.
  std::optional<bool> running, traced_all;
  std::vector<bool> int3_only(dirty.size());
  for (size_t i = 0; i < dirty.size(); ++i) {
    Site& s = sites_[dirty[i]];
    bool was_patch = s.installed == Installed::Patch;
    if (concurrent_ && !running) running = !all_stopped();
    bool others = concurrent_ && *running;
    if (others && !was_patch && !traced_all) traced_all = others_traced(tid);
    int3_only[i] = others && (was_patch || !*traced_all);
    if (was_patch && others) uninstall(s, true);
    plan_site(tid, dirty[i], s);
  }
  for (size_t i = 0; i < dirty.size(); ++i) install(sites_[dirty[i]], int3_only[i]);
  // Exits that led to a frontier trap (or the original) now lead to the block, or its
  // translation. Rewriting a live stub's rel32 while another thread may run it could tear:
  // then that waits for the next free run that starts with every thread stopped.
  relink_now_ = !concurrent_ || (running ? !*running : all_stopped());
  for (uint64_t b : fresh) relink(b);
  // Short blocks left to an int3 run from a translation when a stub leads to them.
  for (uint64_t b : fresh) {
    auto block = code_.block_at(b);
    if (!block) continue;
    auto it = sites_.find(block->end.addr);
    if (it != sites_.end() && it->second.planned && !it->second.patchable) translate(tid, b);
  }
  // Block starts go into the table only once the ends they lead to are planned: a stub that
  // finds a target there jumps to it.
  for (uint64_t b : fresh) table_insert(b);
  relink_now_ = true;
  open_frontiers();
}

// Exits that wait to be relinked (other threads run them) still lead to their frontier trap,
// which would stop every pass through them: the trap becomes a jmp to the block instead. Only
// once everything the block leads to is in memory; the rel32 before the opcode, each its own
// write, so that a thread running the slot meanwhile meets the int3 or the whole jmp (a thread
// that met the int3 is put at the target all the same).
void PatchTracer::open_frontiers() {
  if (frontier_jumps_.empty()) return;
  if (!flush_all()) return;
  for (uint64_t start : std::exchange(frontier_jumps_, {})) {
    uint64_t to = destination(start);
    for (auto [it, last] = frontier_.equal_range(start); it != last;) {
      uint64_t at = it->second;
      auto jmp = patch::jmp_rel32(at, to);
      if (!jmp) jmp = patch::jmp_rel32(at, start);
      if (!jmp || !writes_.write(mem_, at + 1, std::span<const uint8_t>(jmp->data() + 1, 4), true)) {
        ++it;  // stays a trap
        continue;
      }
      (void)writes_.write(mem_, at, std::span<const uint8_t>(jmp->data(), 1), true);
      it = frontier_.erase(it);  // no longer a trap: never linked to again (plans may be forgotten)
    }
  }
}

// A system call whose number the block sets (glibc's wrappers) runs in place, unstopped: it is
// not a branch in the history (the engine records one only when the pc moves: rt_sigreturn, or a
// handler entered at its exit, which a signal stop sees anyway). Calls that move the pc or make a
// ptrace event (clone, fork, exec, exit) keep their int3 for the engine, as does a call whose
// number comes from elsewhere (syscall(2)). Caught syscalls still stop: the thread runs free
// under PTRACE_SYSCALL then, in the original code.
bool PatchTracer::syscall_runs_free(uint64_t block_start, const FlowInsn& f) {
  uint64_t next = f.addr + f.len;
  if (f.len != 2 || next - block_start > 4096 || !region_of(next) || !code_.block_at(next)) return false;
  std::vector<uint8_t> bytes(next - block_start);
  if (code_.reader()(block_start, bytes) != bytes.size()) return false;
  auto insns = patch::decode_all(dis_, bytes, block_start);
  if (!insns || insns->empty() || insns->back().addr != f.addr) return false;
  auto nr = patch::syscall_number(*insns);
  if (!nr) return false;
  switch (*nr) {
    case SYS_rt_sigreturn: case SYS_clone: case SYS_fork: case SYS_vfork: case SYS_execve: case SYS_exit:
    case SYS_exit_group: case SYS_execveat: case SYS_clone3:
      return false;
    default:
      return true;
  }
}

// Direct exits of a stub about to be written at base: to a translation where the target has
// one, to a frontier trap where the target is not explored yet. false: no trap in reach (the
// stub must not be used: it would run unexplored code unseen).
bool PatchTracer::link_exits(uint64_t base, std::vector<uint8_t>& code,
                             const std::vector<std::pair<uint32_t, uint64_t>>& exits) {
  for (const auto& [off, target] : exits) {
    uint64_t to = destination(target);
    if (!visited_.count(target)) {
      auto trap = frontier_trap(base, target);
      if (!trap) return false;
      to = *trap;
    }
    auto rel = static_cast<int64_t>(to) - static_cast<int64_t>(base + off + 4);
    if (rel != static_cast<int32_t>(rel)) {
      if (to != target) return false;
      continue;  // the original target, as built
    }
    auto r32 = static_cast<int32_t>(rel);
    std::memcpy(code.data() + off, &r32, 4);
  }
  for (const auto& [off, target] : exits) exits_.emplace(target, std::make_pair(base, off));
  return true;
}

// An int3 in the stub area of the module whose stub at `near` leads to `target`, standing for
// target: reached, the thread is put at target and exploration goes on from there.
std::optional<uint64_t> PatchTracer::frontier_trap(uint64_t near, uint64_t target) {
  for (auto [it, last] = frontier_.equal_range(target); it != last; ++it) {
    auto d = static_cast<int64_t>(it->second) - static_cast<int64_t>(near);
    if (d > -(int64_t{1} << 30) && d < (int64_t{1} << 30)) return it->second;  // in rel32 reach
  }
  Region* r = nullptr;
  for (auto& reg : regions_)
    if (reg.code_begin && near >= reg.code_begin && near < reg.code_end) r = &reg;
  if (!r || r->code_next + 16 > r->code_end) return std::nullopt;
  uint64_t at = r->code_next;
  const uint8_t int3 = 0xcc;
  if (!area_write(at, std::span<const uint8_t>(&int3, 1))) return std::nullopt;
  r->code_next += 16;
  StubInfo info;
  info.flow = target;
  info.len = 1;
  info.exact = {{0u, target}};
  info.frontier = true;
  stubs_[at] = std::move(info);
  frontier_.emplace(target, at);
  return at;
}

// `start` was just explored: every exit that leads to it goes there (or to its translation).
void PatchTracer::relink(uint64_t start) {
  if (!relink_now_) {
    pending_relinks_.push_back(start);
    if (frontier_.count(start)) frontier_jumps_.push_back(start);
    return;
  }
  uint64_t to = destination(start);
  if (to != start) table_redirect(start);  // a translation: table hits go there too
  for (auto [it, last] = exits_.equal_range(start); it != last; ++it) {
    auto [base, off] = it->second;
    auto rel = static_cast<int64_t>(to) - static_cast<int64_t>(base + off + 4);
    if (rel != static_cast<int32_t>(rel)) rel = static_cast<int64_t>(start) - static_cast<int64_t>(base + off + 4);
    if (rel != static_cast<int32_t>(rel)) continue;  // stays on its trap
    auto r32 = static_cast<int32_t>(rel);
    area_write(base + off, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&r32), 4));
  }
}

// Where a stub's inline cache sends a hit on target.
uint64_t PatchTracer::destination(uint64_t target) const {
  auto t = translations_.find(target);
  return t == translations_.end() ? target : t->second.gate;
}

// What a stub for f needs: its direct target (0 for ret/indirect kinds) and whether the kind is
// dynamic; nullopt when f cannot be patched or a direct exit leaves the patched modules (an
// exit to a block not explored yet goes to a frontier trap: see link_exits).
std::optional<std::pair<uint64_t, bool>> PatchTracer::stub_target(const FlowInsn& f) const {
  auto known = [&](uint64_t a) { return region_of(a) != nullptr; };
  switch (f.kind) {
    case FlowKind::CondJump:
    case FlowKind::Loop:
      if (!f.direct_target || !known(*f.direct_target) || !known(f.addr + f.len)) return std::nullopt;
      return std::pair{*f.direct_target, false};
    case FlowKind::Jump:
    case FlowKind::Call:
      if (!f.direct_target || !known(*f.direct_target)) return std::nullopt;
      return std::pair{*f.direct_target, false};
    case FlowKind::Return:
    case FlowKind::IndirectJump:
    case FlowKind::IndirectCall:
      return std::pair{uint64_t{0}, true};
    default:
      return std::nullopt;
  }
}

void PatchTracer::translate(pid_t tid, uint64_t start) {
  if (translations_.count(start)) return;
  auto block = code_.block_at(start);
  if (!block) return;
  const FlowInsn& f = block->end;
  uint64_t next = f.addr + f.len;
  if (f.len == 0 || next - start > 256) return;
  auto exit = stub_target(f);
  if (!exit) return;
  auto [target, dynamic] = *exit;
  std::vector<uint8_t> bytes(next - start);
  if (code_.reader()(start, bytes) != bytes.size()) return;
  auto insns = patch::decode_all(dis_, bytes, start);
  if (!insns || insns->empty() || insns->back().addr != f.addr || insns->back().len != f.len) return;
  if (dynamic && !patch::dynamic_supported(insns->back(), f.kind)) return;
  Region* r = region_of(start);
  if (!r) return;
  if (!r->code_begin && (r->area_failed || !map_code_area(tid, *r))) {
    r->area_failed = true;
    return;
  }
  patch::StubSpec spec;
  spec.kind = f.kind;
  spec.displaced.assign(insns->begin(), insns->end() - 1);
  spec.flow = insns->back();
  spec.target = target;
  spec.edge_id = static_cast<uint32_t>(edges_.size());
  spec.table_addr = table_addr_;
  spec.table_mask = table_mask_;
  const uint64_t gate = r->code_next;
  auto stub = patch::build_stub(spec, gate + patch::kJmpLen);
  if (!stub || gate + patch::kJmpLen + stub->code.size() > r->code_end) return;
  // Offsets from the gate: it stands for the block start, as the first displaced copy does.
  auto shift = [](uint32_t o) { return static_cast<uint32_t>(o + patch::kJmpLen); };
  for (auto& e : stub->exact) e.first = shift(e.first);
  for (auto& o : stub->ring_stores) o = shift(o);
  for (auto& e : stub->exits) e.first = shift(e.first);
  if (stub->miss_int3) stub->miss_int3 = shift(*stub->miss_int3);
  if (stub->cache) stub->cache = shift(*stub->cache);
  std::vector<uint8_t> code = {0x0f, 0x1f, 0x44, 0x00, 0x00};  // the gate, open: nop5
  code.insert(code.end(), stub->code.begin(), stub->code.end());
  // Its space first (frontier traps go after it); a failure below leaves it unused for good,
  // so that nothing linked to it is ever overwritten.
  r->code_next += (code.size() + 15) & ~size_t{15};
  if (!link_exits(gate, code, stub->exits)) return;
  if (!area_write(gate, code)) return;
  edges_.push_back(Edge{f.addr, target, f.len, dynamic && stub->cache ? gate : 0});
  stub->exact.insert(stub->exact.begin(), {0u, start});
  stubs_[gate] = StubInfo{f.addr, static_cast<uint32_t>(code.size()), stub->exact, stub->miss_int3, stub->ring_stores,
                          stub->cache, 0, f.len};
  translations_[start] = Translation{gate, next, true};
  ++stats_.translated;
  set_gate(start, !has_client_breakpoint(start, next));
  // Stubs made before it that lead to the block now lead to its translation.
  relink(start);
  for (auto [it, last] = cached_by_target_.equal_range(start); relink_now_ && it != last; ++it) {
    auto s = stubs_.find(it->second);
    if (s == stubs_.end() || !s->second.cache || s->second.cached != start) continue;  // moved on since
    uint64_t dest = gate;
    area_write(s->first + *s->second.cache + 16, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&dest), 8));
  }
}

bool PatchTracer::has_client_breakpoint(uint64_t begin, uint64_t end) const {
  for (uint64_t a = begin; a < end; ++a)
    if (breakpoints_.has_client(a) || (hw_break_at_ && hw_break_at_(a))) return true;
  return false;
}

// Open: the translation runs. Closed: its gate jumps to the original block, whose int3 site
// and any client breakpoint in it then work as without translations.
void PatchTracer::set_gate(uint64_t start, bool open) {
  auto it = translations_.find(start);
  if (it == translations_.end() || it->second.open == open) return;
  std::vector<uint8_t> gate = {0x0f, 0x1f, 0x44, 0x00, 0x00};
  if (!open) {
    auto j = patch::jmp_rel32(it->second.gate, start);
    if (!j) return;
    gate = *j;
  }
  if (area_write(it->second.gate, gate)) it->second.open = open;
}

// Before each free run: client breakpoints may have come or gone since the last one.
void PatchTracer::open_gates() {
  for (auto& [start, t] : translations_) set_gate(start, !has_client_breakpoint(start, t.end));
}

void PatchTracer::plan_site(pid_t tid, uint64_t flow_addr, Site& s) {
  uninstall(s);
  s.planned = true;
  s.patchable = false;
  const FlowInsn& f = s.block.end;
  if (f.len == 0 || f.addr != flow_addr) return;
  uint64_t next = f.addr + f.len;
  auto exit = stub_target(f);
  if (!exit) return;
  uint64_t target = exit->first;
  // Decode the tail of the block: from the latest instruction boundary far enough before the
  // end to cover a jmp rel32 (the decoder found it), never before the latest block start.
  uint64_t from = s.block.start == s.latest_start ? std::max(s.block.tail_start, s.latest_start) : s.latest_start;
  if (from >= next || next - from > 64 * 1024) return;
  std::vector<uint8_t> bytes(next - from);
  if (code_.reader()(from, bytes) != bytes.size()) return;
  auto insns = patch::decode_all(dis_, bytes, from);
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
  spec.table_addr = table_addr_;
  spec.table_mask = table_mask_;
  const uint64_t at = r->code_next;
  auto stub = patch::build_stub(spec, at);
  if (!stub || at + stub->code.size() > r->code_end) return;
  uint64_t begin = (*insns)[*k].addr;
  auto jmp = patch::jmp_rel32(begin, at);
  if (!jmp) return;
  // Its space first (frontier traps go after it); a failure below leaves it unused for good,
  // so that nothing linked to it is ever overwritten.
  r->code_next += (stub->code.size() + 15) & ~size_t{15};
  if (!link_exits(at, stub->code, stub->exits)) return;
  if (!area_write(at, stub->code)) return;
  bool dynamic = f.kind == FlowKind::Return || f.kind == FlowKind::IndirectJump || f.kind == FlowKind::IndirectCall;
  edges_.push_back(Edge{f.addr, target, f.len, dynamic && stub->cache ? at : 0});
  StubInfo info{f.addr, static_cast<uint32_t>(stub->code.size()), stub->exact, stub->miss_int3, stub->ring_stores,
                stub->cache, 0, f.len};
  stubs_[at] = std::move(info);
  s.begin = begin;
  s.end = next;
  s.original.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin - from), bytes.end());
  s.patched = *jmp;
  s.patched.resize(s.end - s.begin, 0xcc);  // bytes after the jmp: never executed
  s.patchable = true;
}

void PatchTracer::install(Site& s, bool int3_only) {
  if (!installed_ || !s.planned || s.installed != Installed::None) return;
  if (!flush_writes()) return;  // the stub a patch leads to is in the program first
  auto flow = s.block.end.addr;
  bool conflict = int3_only;
  if (s.patchable)
    for (uint64_t a = s.begin; a < s.end && !conflict; ++a)
      conflict = breakpoints_.contains(a) || (hw_break_at_ && hw_break_at_(a));
  if (s.patchable && !conflict) {
    code_write(s.begin, s.patched);
    s.installed = Installed::Patch;
    ranges_[s.begin] = flow;
    return;
  }
  if (code_writes_.overlaps(flow, 1) && !flush_all()) return;  // the int3 keeps what is under it
  if (breakpoints_.insert(mem_, flow, BreakpointOwner::Internal)) {
    s.installed = Installed::Int3;
  }
}

// Several bytes over code another thread may be running: an int3 first (a thread that meets it
// meanwhile traps and starts again at addr, on_stop), then the rest, the first byte last.
void PatchTracer::write_fenced(uint64_t addr, std::span<const uint8_t> bytes) {
  if (bytes.size() <= 1) {
    (void)mem_.write(addr, bytes);
    return;
  }
  if (code_writes_.overlaps(addr, bytes.size())) (void)flush_all();
  const uint8_t int3[1] = {0xcc};
  fences_.insert(addr);
  (void)mem_.write(addr, int3);
  (void)mem_.write(addr + 1, bytes.subspan(1));
  (void)mem_.write(addr, bytes.first(1));
}

void PatchTracer::uninstall(Site& s, bool fenced) {
  if (s.installed == Installed::Patch) {
    if (fenced) write_fenced(s.begin, s.original);
    else code_write(s.begin, s.original);
    ranges_.erase(s.begin);
  } else if (s.installed == Installed::Int3) {
    if (code_writes_.overlaps(s.block.end.addr, 1)) (void)flush_all();
    (void)breakpoints_.remove(mem_, s.block.end.addr, BreakpointOwner::Internal);
  }
  s.installed = Installed::None;
}

// Every thread is stopped: each gets its ring and gs base, every site its patch, and every
// other thread's pc in a module becomes a block start (no patch covers where it stands).
bool PatchTracer::install_all(pid_t self) {
  auto tasks = list_tasks(pid_);
  for (pid_t tid : tasks) {
    Ring* r = ring_for(tid);
    if (!r) {
      disable("cannot map a ring for a thread", nullptr);
      return false;
    }
    if (!r->gs_set && !set_gs(tid, *r, true)) {
      disable("the program uses the gs base", nullptr);
      return false;
    }
  }
  installed_ = true;
  ++stats_.installs;
  open_gates();
  for (uint64_t b : std::exchange(pending_relinks_, {})) relink(b);
  update_caches();
  for (auto& [addr, s] : sites_) install(s);
  for (pid_t tid : tasks) {
    if (tid == self) continue;
    uint64_t pc = pc_of(tid);
    if (pc && region_of(pc) && !enter_stub(tid, pc)) instrument(tid, pc);
  }
  return true;
}

// A stopped thread whose pc lies inside a patch (often: at a jcc it was about to run from its
// int3 site) goes on from the same instruction's copy in the stub, as if it had come there by
// the patch. Else its pc would become a block start there, which leaves no room for the patch
// for good: every pass through the site would stop.
bool PatchTracer::enter_stub(pid_t tid, uint64_t pc) {
  auto r = ranges_.upper_bound(pc);
  if (r == ranges_.begin()) return false;
  --r;
  auto s = sites_.find(r->second);
  // (At the patch's first byte its pc may stay a block start: the patch still fits. There too
  // stands a thread inside a system call, whose pc the kernel may rewind to restart it.)
  if (s == sites_.end() || s->second.installed != Installed::Patch || pc <= s->second.begin || pc >= s->second.end)
    return false;
  int32_t rel;
  std::memcpy(&rel, s->second.patched.data() + 1, 4);
  uint64_t base = s->second.begin + 5 + static_cast<int64_t>(rel);
  auto stub = stubs_.find(base);
  if (stub == stubs_.end()) return false;
  for (const auto& [off, addr] : stub->second.exact) {
    if (addr != pc) continue;
    if (!flush_all()) return false;
    user_regs_struct regs{};
    if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0 || static_cast<int64_t>(regs.orig_rax) >= 0) return false;
    regs.rip = base + off;
    return ::ptrace(PTRACE_SETREGS, tid, nullptr, &regs) == 0;
  }
  return false;
}

// A stopped thread: out of the stubs, its ring drained, its gs base the program's again.
// false: it is running (its gs base stays ours; a later stop of it settles it).
void PatchTracer::settle_thread(pid_t tid, Ring& r, LinuxThread* t) {
  normalize(tid, r);
  drain(tid, r, t);
  (void)set_gs(tid, r, false);
}

void PatchTracer::suspend(LinuxThread* t) {
  WriteBatch batch(*this);
  bool all = true;
  for (auto& [tid, r] : rings_) {
    if (!r.gs_set) continue;
    errno = 0;
    ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
    if (errno) {
      all = false;
      continue;
    }
    settle_thread(tid, r, t && t->tid == tid ? t : nullptr);
  }
  if (t)
    if (auto it = rings_.find(t->tid); it != rings_.end() && it->second.last) {
      t->cursor.block_start = it->second.last->to;
      t->cursor.last_flow = it->second.last->from;
      t->cursor.last_flow_taken = true;
      it->second.last.reset();
    }
  if (!installed_) return;
  if (all) update_caches();  // nobody runs a stub now
  (void)sync_regions();  // a module unloaded while it ran: its bytes are not ours to restore
  stats_.patched_sites = stats_.int3_sites = 0;
  for (auto& [addr, s] : sites_) {
    stats_.patched_sites += s.installed == Installed::Patch;
    stats_.int3_sites += s.installed == Installed::Int3;
    uninstall(s, !all);
  }
  installed_ = false;
}

bool PatchTracer::release(pid_t tid) {
  suspend(nullptr);
  bool ok = true;
  (void)flush_all();
  for (auto [lo, hi] : areas()) {
    auto r = patch::inject_syscall(pid_, tid, mem_, SYS_munmap, {lo, hi - lo, 0, 0, 0, 0});
    ok = ok && r && *r == 0;
  }
  code_areas_.clear();
  writes_ = patch::AreaWrites{};  // the server's views of shared areas go with it
  rings_.clear();
  spare_.clear();
  ring_views_.clear();
  for (auto& r : regions_) r.code_begin = r.code_next = r.code_end = 0;
  stubs_.clear();
  sites_.clear();
  ranges_.clear();
  data_ = table_addr_ = 0;
  ready_ = false;
  return ok;
}

std::vector<std::pair<uint64_t, uint64_t>> PatchTracer::areas() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (ready_ && data_) out.emplace_back(data_, data_ + data_size_);
  if (ready_ && table_addr_) out.emplace_back(table_addr_, table_addr_ + table_size_);
  out.insert(out.end(), code_areas_.begin(), code_areas_.end());
  // Each thread's ring: its head page, the ring, the guard page.
  for (const auto& [tid, r] : rings_)
    if (r.head_addr) out.emplace_back(r.head_addr, r.end + kPage);
  for (const Ring& r : spare_)
    if (r.head_addr) out.emplace_back(r.head_addr, r.end + kPage);
  return out;
}

void PatchTracer::thread_created(pid_t child, bool non_stop) {
  WriteBatch batch(*this);
  if (!disabled_.empty() || !ready_) return;
  if (non_stop) {
    disable("more than one thread in non-stop mode (block patching handles threads in all-stop mode)", nullptr);
    return;
  }
  // It inherited its parent's gs base: while that is one of our rings it needs its own.
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, child, nullptr, &regs) != 0) return;
  if (!installed_ && regs.gs_base == 0) return;
  Ring* r = ring_for(child);
  if (!r || !set_gs(child, *r, true)) {
    if (r) rings_.erase(child);
    regs.gs_base = 0;  // never its parent's ring
    ::ptrace(PTRACE_SETREGS, child, nullptr, &regs);
    disable(r ? "the program uses the gs base" : "cannot map a ring for a thread", nullptr);
  }
}

void PatchTracer::untraced_run(LinuxThread& t) {
  WriteBatch batch(*this);
  if (!installed_) return;
  Ring* r = ring_for(t.tid);
  if (r && (r->gs_set || set_gs(t.tid, *r, true))) return;
  suspend(&t);
}

void PatchTracer::thread_exited(pid_t tid) {
  WriteBatch batch(*this);
  auto it = rings_.find(tid);
  if (it == rings_.end()) return;
  spare_.push_back(it->second);
  rings_.erase(it);
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

size_t PatchTracer::drain(pid_t tid, Ring& r, LinuxThread* t) {
  if (!ready_) return 0;
  uint64_t head = head_of(r);
  if (head <= r.begin || head > r.end) return 0;
  // A shared ring is read where it lies; another one copied first.
  const uint8_t* buf = r.view ? r.view + (r.begin - r.head_addr) : nullptr;
  size_t bytes = head - r.begin;
  if (!buf) {
    drain_buf_.resize(bytes);
    auto got = mem_.read(r.begin, drain_buf_);
    if (!got) return 0;
    bytes = *got;
    buf = drain_buf_.data();
  }
  // Entry ids (4 bytes; with the dynamic flag, the 8-byte target follows). Only the newest
  // the history keeps are passed on (a 1 MiB BTS-sized history keeps 43,690 of the millions a
  // drain may bring); every entry moves the inline caches.
  auto entry = [&](size_t& i, uint64_t& to) -> const Edge* {
    uint32_t word;
    std::memcpy(&word, buf + i, 4);
    i += 4;
    uint32_t id = word & ~patch::kDynamicEntry;
    if (id >= edges_.size()) return nullptr;  // cannot happen: stubs only write ids we made
    const Edge& e = edges_[id];
    to = e.to;
    if (word & patch::kDynamicEntry) {
      if (i + 8 > bytes) return nullptr;
      std::memcpy(&to, buf + i, 8);
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
    return &e;
  };
  size_t count = 0;
  Branch last;
  // The ring's entry ids go to the history as they are (resolved through edges_ once per
  // history); only a dynamic entry's branch is spelled out.
  entries_.clear();
  batch_.clear();
  auto keep = [&](uint32_t word, const Edge& e, uint64_t to) {
    if (word & patch::kDynamicEntry) {
      entries_.push_back(BranchRing::kExplicit | static_cast<uint32_t>(batch_.size()));
      batch_.push_back(Branch{e.from, to});
    } else {
      entries_.push_back(word);
    }
  };
  const size_t kept = tracer_->branches_kept(tid);
  // Two passes: all entries for the inline caches and the count, then only the newest the
  // history keeps (one pass that keeps everything measured slower). (offset, branches before
  // it) every kMark branches: the second pass starts near the first branch kept instead of
  // walking the whole ring again.
  constexpr size_t kMark = 4096;
  size_t end = 0;
  drain_marks_.clear();
  for (size_t i = 0; i + 4 <= bytes;) {
    if (count % kMark == 0 && (drain_marks_.empty() || drain_marks_.back().second != count))
      drain_marks_.emplace_back(i, count);
    uint64_t to = 0;
    const Edge* e = entry(i, to);
    if (!e) break;
    end = i;
    if (to == e->from + e->len) continue;
    last = Branch{e->from, to};
    ++count;
  }
  size_t skip = count - std::min(count, kept);
  entries_.reserve(count - skip);
  size_t start = 0, before = 0;
  for (const auto& [at, n] : drain_marks_) {
    if (n > skip) break;
    start = at;
    before = n;
  }
  for (size_t i = start, n = before; i < end;) {
    uint32_t word;
    std::memcpy(&word, buf + i, 4);
    i += 4;
    const Edge& e = edges_[word & ~patch::kDynamicEntry];
    uint64_t to = e.to;
    if (word & patch::kDynamicEntry) {
      std::memcpy(&to, buf + i, 8);
      i += 8;
    }
    if (to == e.from + e.len) continue;
    if (n++ >= skip) keep(word, e, to);
  }
  tracer_->record_entries(tid, entries_, batch_, [this](uint32_t id) { return Branch{edges_[id].from, edges_[id].to}; });
  (void)set_head(r, r.begin);
  stats_.drained += count;
  if (count && t) {
    t->cursor.block_start = last.to;
    t->cursor.last_flow = last.from;
    t->cursor.last_flow_taken = true;
    r.last.reset();
  } else if (count) {
    r.last = last;  // its cursor follows when its LinuxThread is at hand
  }
  return count;
}

// Each dynamic site that missed its inline cache since the last drain caches its latest
// target, when that target is instrumented (a hit jumps there directly). Never the stub a
// thread stands in (it may be between reading the target and the id); only while no thread
// runs (the 12 bytes are not one store).
void PatchTracer::update_caches() {
  if (cache_moves_.empty()) return;
  std::vector<uint64_t> pcs;
  for (const auto& [tid, r] : rings_) pcs.push_back(pc_of(tid));
  for (const auto& [base, target] : cache_moves_) {
    auto it = stubs_.find(base);
    if (it == stubs_.end() || !it->second.cache || it->second.cached == target) continue;
    StubInfo& info = it->second;
    if (std::any_of(pcs.begin(), pcs.end(), [&, b = base](uint64_t pc) { return pc >= b && pc < b + info.len; })) continue;
    if (!visited_.count(target)) continue;
    auto [e, fresh] = cache_edges_.try_emplace({info.flow, target}, static_cast<uint32_t>(edges_.size()));
    if (fresh) edges_.push_back(Edge{info.flow, target, info.flow_len, 0});
    uint8_t slot[patch::kCacheBytes] = {};
    uint64_t dest = destination(target);
    std::memcpy(slot, &target, 8);
    std::memcpy(slot + 8, &e->second, 4);
    std::memcpy(slot + 16, &dest, 8);
    if (area_write(base + *info.cache, slot)) {
      info.cached = target;
      cached_by_target_.emplace(target, base);
    }
  }
  for (uint32_t id : cache_move_ids_) last_dynamic_[id] = 0;
  cache_move_ids_.clear();
  cache_moves_.clear();
}

void PatchTracer::clear_caches() {
  cached_by_target_.clear();
  uint8_t zeros[patch::kCacheBytes] = {};
  for (auto& [base, info] : stubs_)
    if (info.cache && info.cached) {
      area_write(base + *info.cache, zeros);
      info.cached = 0;
    }
}

// A thread stopped inside a stub goes back to the original address it stands for where nothing
// of the control-flow instruction has happened yet; elsewhere it is stepped to the stub's end.
void PatchTracer::normalize(pid_t tid, Ring& ring) {
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
  if (!flush_all()) return;  // it runs code now
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
      if (addr >= ring.end && addr < ring.end + kPage) {  // the ring filled up on the way out
        drain(tid, ring, nullptr);
        regs.rax = ring.begin;
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
  WriteBatch batch(*this);
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
  if (!WIFSTOPPED(status)) return StopKind::None;
  int sig = WSTOPSIG(status);
  if (sig == SIGTRAP && (status >> 16) == 0 && !fences_.empty()) {
    // The int3 of a fenced write (over now): start again at its address.
    user_regs_struct regs{};
    if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) == 0 && fences_.count(regs.rip - 1)) {
      uint8_t now = 0;
      if (auto n = mem_.read(regs.rip - 1, std::span<uint8_t>(&now, 1)); n && *n == 1 && now != 0xcc) {
        regs.rip -= 1;
        ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
        return StopKind::Consumed;
      }
    }
  }
  auto it = rings_.find(t.tid);
  if (it == rings_.end() || !it->second.gs_set) return StopKind::None;
  Ring& ring = it->second;
  if (ring.last) {
    t.cursor.block_start = ring.last->to;
    t.cursor.last_flow = ring.last->from;
    t.cursor.last_flow_taken = true;
    ring.last.reset();
  }
  drain(t.tid, ring, &t);
  if (rings_.size() == 1) update_caches();  // the one thread is stopped
  if ((status >> 16) != 0 || sig == (SIGTRAP | 0x80) || sig == SIGSTOP) return StopKind::None;
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0) return StopKind::None;
  uint64_t base = 0;
  if (sig == SIGTRAP) {
    const StubInfo* info = stub_at(regs.rip - 1, &base);
    if (info && info->frontier && regs.rip - 1 == base) {
      regs.rip = info->flow;  // the branch there is recorded: the thread goes on from the target
      ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      ++stats_.frontier;
      return StopKind::Frontier;
    }
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
    if (info && addr >= ring.end && addr < ring.end + kPage &&
        std::find(info->ring_stores.begin(), info->ring_stores.end(), regs.rip - base) != info->ring_stores.end()) {
      regs.rax = ring.begin;  // drained above: the store starts the ring again
      ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      ++stats_.ring_full;
      return StopKind::Consumed;
    }
  }
  // A signal for the program: it is seen at an original address.
  normalize(t.tid, ring);
  drain(t.tid, ring, &t);
  return StopKind::None;
}

// ---------------------------------------------------------------- memory

void PatchTracer::restore_into(const ProcMemory& child) const {
  for (const auto& [addr, s] : sites_)
    if (s.installed == Installed::Patch) (void)child.write(s.begin, s.original);
  // Its one thread got the forking thread's gs base: the program's 0 again.
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, child.pid(), nullptr, &regs) != 0 || regs.gs_base == 0) return;
  bool ours = std::any_of(rings_.begin(), rings_.end(), [&](const auto& e) { return e.second.head_addr == regs.gs_base; });
  if (!ours) return;
  regs.gs_base = 0;
  ::ptrace(PTRACE_SETREGS, child.pid(), nullptr, &regs);
}

void PatchTracer::unshadow(uint64_t addr, std::span<uint8_t> buf) const {
  code_writes_.overlay(addr, buf);  // memory as it is about to be: a patch just taken out
  if (ranges_.empty() || buf.empty()) return;
  uint64_t end = addr + buf.size();
  auto it = ranges_.upper_bound(addr);
  if (it != ranges_.begin()) --it;
  for (; it != ranges_.end() && it->first < end; ++it) {
    const Site& s = sites_.at(it->second);
    for (uint64_t a = std::max(s.begin, addr); a < std::min(s.end, end); ++a) buf[a - addr] = s.original[a - s.begin];
  }
}

bool PatchTracer::read_code(uint64_t addr, std::span<uint8_t> out) {
  if (out.empty()) return true;
  const Region* r = region_of(addr);
  if (!r || r->writable || out.size() > r->hi - addr) return false;
  for (uint64_t at = addr, end = addr + out.size(); at < end;) {
    uint64_t page = at & ~(kPage - 1);
    auto it = code_pages_.find(page);
    if (it == code_pages_.end()) {
      std::vector<uint8_t> bytes(kPage);
      auto n = mem_.read(page, bytes);
      if (!n || *n != kPage) return false;
      breakpoints_.unshadow(page, bytes);
      unshadow(page, bytes);
      it = code_pages_.emplace(page, std::move(bytes)).first;
    }
    uint64_t n = std::min(end, page + kPage) - at;
    std::memcpy(out.data() + (at - addr), it->second.data() + (at - page), n);
    at += n;
  }
  return true;
}

void PatchTracer::invalidate(uint64_t addr, uint64_t len) {
  WriteBatch batch(*this);
  if (len > 64 * kPage) code_pages_.clear();
  else
    for (uint64_t page = addr & ~(kPage - 1); page < addr + len; page += kPage) code_pages_.erase(page);
  bool touches = false;
  for (const auto& r : regions_) touches = touches || (addr < r.hi && addr + len > r.lo);
  if (!touches) return;
  forget_plans();
}

// Plans made from the old bytes are dropped (stubs stay allocated; the table and the inline
// caches are emptied so no stub trusts a target planned from them).
void PatchTracer::forget_plans() {
  for (auto& [a, s] : sites_) uninstall(s);
  for (auto& [start, t] : translations_) set_gate(start, false);  // old stubs may still lead there
  translations_.clear();
  exits_.clear();
  frontier_jumps_.clear();
  sites_.clear();
  visited_.clear();
  ranges_.clear();
  clear_caches();
  if (ready_) {
    std::vector<uint8_t> zeros(table_.size() * 8, 0);
    area_write(table_addr_, zeros);
    std::fill(table_.begin(), table_.end(), 0);
    table_used_ = 0;
  }
}

}  // namespace backend
