// PatchTracer: writing into the program: the stub areas and the table (batched), patches and
// int3 sites in and out, and the whole set installed before a free run.
#include "backend/btrace/patch/patch_tracer.h"

#include <sys/ptrace.h>
#include <sys/user.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/btrace/patch/patch_tracer_detail.h"
#include "backend/ptrace/proc_info.h"

namespace backend {

void PatchTracer::table_insert(uint64_t target) {
  if (!ready_ || target == 0) return;
  if (table_used_ * 2 >= uint64_t{table_mask_} + 1 && !grow_table()) return;  // full: misses stop
  if (table_put(target)) ++stats_.table_targets;
}

bool PatchTracer::table_put(uint64_t target) {
  for (uint32_t i = patch::hash_slot(target, table_mask_);; i = (i + 1) & table_mask_) {
    if (table_[i] == target) return false;
    if (table_[i] != 0) continue;
    table_[i] = target;
    ++table_used_;
    table_set_destination(i, destination(target));  // first: a stub reads it once it finds the target
    uint8_t bytes[8];
    std::memcpy(bytes, &target, 8);
    area_write(table_keys_ + uint64_t{i} * 8, bytes);
    return true;
  }
}

bool PatchTracer::grow_table() {
  if (uint64_t{table_mask_} + 1 >= kTableSlots) return false;
  uint32_t old = table_mask_;
  table_mask_ = old * 2 + 1;
  // Slots only gain targets, never lose or change one: a target's first slot on its path under
  // a mask stays the one a probe with that mask finds (table_redirect updates each). The mask
  // is written last: until then the stubs find every target where the old one looks.
  for (uint32_t k = 0; k <= old; ++k)
    if (table_[k]) table_put(table_[k]);
  write_table_mask();
  return true;
}

void PatchTracer::write_table_mask() {
  stats_.table_slots = uint64_t{table_mask_} + 1;
  uint8_t bytes[8] = {};
  std::memcpy(bytes, &table_mask_, 4);
  area_write(table_keys_ - 8, bytes);
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
  area_write(table_keys_ + uint64_t{kTableSlots} * 8 + uint64_t{slot} * 8, bytes);
}

// A translation was made for target: a table hit on it goes there from now on. Under each
// mask the table had (a stub may have read an older one), the slot a probe finds.
void PatchTracer::table_redirect(uint64_t target) {
  if (!ready_ || target == 0) return;
  // (Slots the table took later may fill an older mask's range: at most one pass over it.)
  for (uint32_t mask = table_mask_; mask >= kTableFirstSlots - 1; mask >>= 1) {
    uint32_t i = patch::hash_slot(target, mask);
    for (uint64_t n = 0; n <= mask && table_[i] != 0; ++n, i = (i + 1) & mask) {
      if (table_[i] != target) continue;
      table_set_destination(i, destination(target));
      break;
    }
  }
}

void PatchTracer::install(Site& s, bool int3_only) {
  if (!installed_ || !s.planned || s.installed != Installed::None) return;
  if (!flush_writes()) return;  // the stub a patch leads to is in the program first
  auto flow = s.block.end.addr;
  bool conflict = int3_only || (s.patchable && breakpoints_.any_in(s.begin, s.end));
  if (s.patchable && hw_break_at_)
    for (uint64_t a = s.begin; a < s.end && !conflict; ++a) conflict = hw_break_at_(a);
  if (s.patchable && !conflict) {
    code_write(s.begin, s.patched);
    s.installed = Installed::Patch;
    ranges_[s.begin] = flow;
    if (!s.counted_patch) {
      s.counted_patch = true;
      ++stats_.patched_sites;
      if (s.counted_int3) --stats_.int3_sites;  // an int3 site once, patched now
    }
    return;
  }
  if (code_writes_.overlaps(flow, 1) && !flush_all()) return;  // the int3 keeps what is under it
  if (breakpoints_.insert(mem_, flow, BreakpointOwner::Internal)) {
    s.installed = Installed::Int3;
    if (!s.counted_int3 && !s.counted_patch) ++stats_.int3_sites;
    s.counted_int3 = true;
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
    // Right after a site's first byte: a thread whose int3 trap is not handled yet (the
    // engine moves it back to the site); exploring from there would decode from inside an
    // instruction.
    if (sites_.count(pc - 1)) continue;
    if (pc && region_of(pc) && !enter_stub(tid, pc)) instrument(tid, pc);
  }
  return true;
}

void PatchTracer::catch_up() {
  WriteBatch batch(*this);
  if (!installed_ || !all_stopped()) return;
  std::vector<uint64_t> pcs;
  for (pid_t tid : list_tasks(pid_)) pcs.push_back(pc_of(tid));
  for (uint64_t b : std::exchange(pending_relinks_, {})) relink(b);
  uint64_t left = 0;
  for (auto& [addr, s] : sites_) {
    if (s.installed != Installed::Int3 || !s.planned || !s.patchable) continue;
    bool inside = std::any_of(pcs.begin(), pcs.end(), [&](uint64_t pc) { return pc > s.begin && pc < s.end; });
    if (inside) {
      ++left;
      continue;
    }
    uninstall(s);
    install(s);
  }
  fenced_sites_ = left;
}

// A stopped thread whose pc lies inside a patch (often: at a jcc it was about to run from its
// int3 site) goes on from the same instruction's copy in the stub, as if it had come there by
// the patch. Else its pc would become a block start there, which leaves no room for the patch
// for good: every pass through the site would stop.
bool PatchTracer::inside_installed_patch(uint64_t pc) const {
  auto r = ranges_.upper_bound(pc);
  if (r == ranges_.begin()) return false;
  --r;
  auto s = sites_.find(r->second);
  return s != sites_.end() && s->second.installed == Installed::Patch && pc > s->second.begin && pc < s->second.end;
}

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

}  // namespace backend
