// PatchTracer: the modules it patches, the areas it maps in the program (data page, table,
// stub areas) and each thread's ring with the gs base that points at it.
#include "backend/btrace/patch/patch_tracer.h"

#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "backend/btrace/patch/patch_tracer_detail.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/remote_syscall.h"

namespace backend {

namespace {

constexpr uint64_t kRingBytes = 1 << 20;        // 256 Ki direct branches between drains
constexpr uint64_t kMinCodeArea = 1 << 20;
constexpr uint64_t kMaxCodeArea = 64 << 20;
constexpr uint64_t kCallBufferBytes = 1 << 20;  // ~4,000 stat() records between stops

bool failed(int64_t r) { return r < 0 && r > -4096; }

}  // namespace

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
      Region r;
      r.lo = m.start;
      r.hi = m.end;
      r.name = m.name;
      now.push_back(std::move(r));
      now.back().writable = m.write;
      now.back().inode = m.inode;
      now.back().file_offset = m.offset;
    }
  }
  auto kept = [&](const Region& r) {
    return std::any_of(now.begin(), now.end(), [&](const Region& n) { return n.lo == r.lo && n.hi == r.hi && n.name == r.name; });
  };
  bool dropped = !std::all_of(regions_.begin(), regions_.end(), kept);
  // The warm plan keeps what ran so far: forget_plans() below drops the sites that name its
  // blocks (at a process's end every region goes).
  if (dropped) learn_ran();
  for (const auto& r : regions_) {
    if (kept(r)) continue;
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
  uint64_t hint = lowest > 4 * patch::kKeepClear ? (lowest - 3 * patch::kKeepClear) & ~(kPage - 1) : 0;
  if (!flush_all()) return Error{EIO, "cannot write the program's code"};
  if (auto gone = unmap_inherited_areas(tid, hint); !gone) return gone.error();
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
  table_size_ = kPage + 2 * table_bytes;  // the header (its mask) in a page of its own
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
  // Rings follow the table, away from the modules too: asked for anywhere, the kernel would put
  // them where the program's next mmap goes, and move it (a replay must see it where it was
  // recorded, whenever its rings are mapped). A free page between areas keeps them apart.
  ring_hint_ = hint ? hint + kPage + table_size_ + kPage : 0;
  table_keys_ = table_addr_ + kPage;
  table_.assign(kTableSlots, 0);
  table_used_ = stats_.table_targets = 0;
  table_mask_ = kTableFirstSlots - 1;
  ready_ = true;
  write_table_mask();
  return {};
}

// A forked copy (a replay's checkpoint, a fork child the client follows) starts with its
// parent's areas where this process's would go (the places are fixed): they would push the new
// ones to where the kernel puts the program's next mmap, and a replay's copy would then see its
// mmaps land elsewhere than recorded. The copy's code is the program's own (patches come out
// before a checkpoint and in a fork child), so nothing jumps into them: they go.
Result<void> PatchTracer::unmap_inherited_areas(pid_t tid, uint64_t hint) {
  auto maps = read_memory_map(pid_);
  if (!maps) return maps.error();
  for (const auto& m : *maps) {
    bool named = m.name.find("branchstub-patch") != std::string::npos;
    bool data_page = hint && m.start == hint && m.end == hint + kPage && m.name.empty();  // private: unnamed
    if (!named && !data_page) continue;
    auto r = patch::inject_syscall(pid_, tid, mem_, SYS_munmap, {m.start, m.end - m.start, 0, 0, 0, 0});
    if (!r) return r.error();
    if (failed(*r)) return Error{static_cast<int>(-*r), "munmap of an inherited area failed"};
  }
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

bool PatchTracer::next_code_area(pid_t tid, Region& r, uint64_t bytes) {
  constexpr size_t kMaxAreasPerRegion = 8;
  if (!r.code_begin || r.code_next + bytes <= r.code_end) return r.code_begin != 0;
  if (r.area_failed || r.full_areas.size() + 1 >= kMaxAreasPerRegion) return false;
  std::pair<uint64_t, uint64_t> full{r.code_begin, r.code_end};
  if (!map_code_area(tid, r)) {
    r.area_failed = true;  // the full area stays the current one; nothing more fits
    return false;
  }
  r.full_areas.push_back(full);
  return r.code_next + bytes <= r.code_end;
}

Result<void> PatchTracer::map_code_area(pid_t tid, Region& r) {
  auto maps = read_memory_map(pid_);
  if (!maps) return maps.error();
  uint64_t size = std::clamp<uint64_t>(((r.hi - r.lo) * 4 + kMinCodeArea) & ~(kPage - 1), kMinCodeArea, kMaxCodeArea);
  auto at = patch::free_range_below_clear(*maps, r.lo, r.hi, size);  // well below the module first
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
                                 {*at, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | patch::kMapFixedNoReplace,
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

// A thread's ring: its own, a spare one of a thread that exited, or a new mapping (the system
// call runs in tid, stopped, from the scratch page: other threads may be running).
PatchTracer::Ring* PatchTracer::ring_for(pid_t tid) {
  if (auto it = rings_.find(tid); it != rings_.end()) return &it->second;
  Ring r;
  if (!spare_.empty()) {
    r = spare_.back();
    spare_.pop_back();
  } else {
    uint64_t calls = tracer_ && tracer_->syscall_buffer_room() ? kCallBufferBytes : 0;
    uint64_t size = kPage + 2 * (ring_bytes_ + kPage) + calls;
    if (!flush_all()) return nullptr;
    uint64_t at = ring_hint_;
    if (ring_hint_) ring_hint_ += size + kPage;
    if (auto shared = map_shared(tid, at, false, size, PROT_READ | PROT_WRITE)) {
      r.head_addr = shared->addr;
      r.view = shared->view.data();
      ring_views_.push_back(std::move(shared->view));
    } else {
      auto m = patch::inject_syscall(pid_, tid, mem_, SYS_mmap,
                                     {at, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, static_cast<uint64_t>(-1), 0},
                                     scratch_);
      if (!m || failed(*m)) return nullptr;
      r.head_addr = static_cast<uint64_t>(*m);
    }
    r.begin = r.head_addr + kPage;
    r.end = r.begin + ring_bytes_;
    r.alt = r.end + kPage;
    r.area_end = r.head_addr + size;
    for (uint64_t guard : {r.end, r.alt + ring_bytes_}) {
      auto g = patch::inject_syscall(pid_, tid, mem_, SYS_mprotect, {guard, kPage, PROT_NONE, 0, 0, 0}, scratch_);
      if (!g || *g != 0) return nullptr;
    }
    if (calls && r.view && buffering()) {  // read where it lies: only a shared ring has one
      r.calls = r.area_end - calls;
      r.calls_end = r.area_end;
    }
  }
  if (r.view) {  // its gs words: where records go (none: every stub takes its int3)
    auto* words = reinterpret_cast<uint64_t*>(r.view);
    __atomic_store_n(&words[patch::kGsSyscallBufNext / 8], r.calls, __ATOMIC_RELEASE);
    __atomic_store_n(&words[patch::kGsSyscallBufEnd / 8], r.calls_end, __ATOMIC_RELEASE);
  }
  r.first = r.begin;
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

void PatchTracer::restart(pid_t tid, Ring& r) {
  uint64_t room = budget_ ? budget_(tid) : 0;
  r.first = r.begin;
  // Entries are 4 bytes or more (a dynamic one 12): room for `room` of the shortest, and never
  // less than one of the longest, or a thread whose next entry is dynamic traps at its second
  // store for ever without an entry written.
  if (room && room < (r.end - r.begin) / 4) r.first = r.end - std::max<uint64_t>(room * 4, 12);
  (void)set_head(r, r.first);
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

}  // namespace backend
