// PatchTracer: exploration (which block ends a free run meets, planned as patches or int3
// sites), the stubs and translations built for them, and how their exits are linked.
#include "backend/btrace/patch/patch_tracer.h"

#include <sys/syscall.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backend/btrace/patch/patch_tracer_detail.h"
#include "backend/x86/insn_length.h"

namespace backend {

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
  std::vector<std::pair<uint64_t, unsigned>> work{{pc, 0}};
  if (!visited_.count(pc)) use_plan(pc, work);
  std::vector<uint64_t> fresh;
  std::vector<std::pair<uint64_t, Site*>> dirty;  // map nodes stay put: no second lookup
  for (size_t w = 0; w < work.size(); ++w) {
    auto [b, depth] = work[w];
    if (visited_.count(b)) continue;
    Region* in = region_of(b);
    if (!in) continue;
    if (!in->seeded) seed_plan(*in, work);  // reached through an edge from another module
    if (depth > (in->warm ? kWarmExploreDepth : kExploreDepth)) continue;
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
      // Recording with the buffer, the thread runs under PTRACE_CONT: the call is buffered
      // (a patched site) or stops at its int3 (plan_buffered_call), never unseen.
      work.emplace_back(next, depth);
      if (!buffering()) continue;
    }
    Site& s = sites_[f.addr];
    site_starts_.emplace(f.addr, b);
    if (s.planned && s.patchable && b > s.latest_start && b <= s.begin) {
      s.latest_start = b;  // a start before the patched bytes: the same patch
      s.block = *block;
    } else if (!s.planned || b > s.latest_start) {
      s.latest_start = std::max(s.latest_start, b);
      if (s.latest_start == b) s.block = *block;
      s.planned = false;
      dirty.emplace_back(f.addr, &s);
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
  dirty.erase(std::unique(dirty.begin(), dirty.end()), dirty.end());  // one node per address
  // Other threads running: a patch over code no thread can be running (a fresh site, every
  // other thread traced) goes in; a patch that moves comes out fenced and leaves an int3 (the
  // patch comes at the next free run that starts with every thread stopped).
  // Every stub first (gathered into a few writes), then the patches that lead to them.
  std::optional<bool> running, traced_all;
  std::vector<bool> int3_only(dirty.size());
  for (size_t i = 0; i < dirty.size(); ++i) {
    Site& s = *dirty[i].second;
    bool was_patch = s.installed == Installed::Patch;
    if (concurrent_ && !running) running = !all_stopped();
    bool others = concurrent_ && *running;
    if (others && !was_patch && !traced_all) traced_all = others_traced(tid);
    int3_only[i] = others && (was_patch || !*traced_all);
    if (was_patch && others) uninstall(s, true);
    plan_site(tid, dirty[i].first, s);
  }
  for (size_t i = 0; i < dirty.size(); ++i) {
    Site& s = *dirty[i].second;
    install(s, int3_only[i]);
    if (int3_only[i] && s.patchable) ++fenced_sites_;
  }
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
  // A site that was patched until a later block start left no room before it (`pop; pop; ret`
  // entered at the first pop): the blocks explored before, which end there too, now need a
  // translation as well, or every pass through them stops at its int3.
  for (const auto& [addr, site] : dirty) {
    const Site& s = *site;
    if (!s.planned || s.patchable) continue;
    for (auto [it, last] = site_starts_.equal_range(addr); it != last; ++it) translate(tid, it->second);
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
  for (auto& reg : regions_) {
    if (!reg.code_begin) continue;
    if (near >= reg.code_begin && near < reg.code_end) r = &reg;
    for (const auto& [lo, hi] : reg.full_areas)
      if (near >= lo && near < hi) r = &reg;
  }
  if (!r || r->code_next + 16 > r->code_end) return std::nullopt;
  uint64_t at = r->code_next;
  if (auto d = static_cast<int64_t>(at) - static_cast<int64_t>(near); d <= -(int64_t{1} << 30) || d >= (int64_t{1} << 30))
    return std::nullopt;  // the stub's jmp could not reach it
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
  spec.table_addr = table_keys_;
  spec.table_mask = kTableSlots - 1;  // the capacity: where the destinations lie
  uint64_t gate = r->code_next;
  auto stub = patch::build_stub(spec, gate + patch::kJmpLen);
  if (stub && gate + patch::kJmpLen + stub->code.size() > r->code_end &&
      next_code_area(tid, *r, patch::kJmpLen + stub->code.size())) {
    gate = r->code_next;  // built again where it goes: its jumps are relative
    stub = patch::build_stub(spec, gate + patch::kJmpLen);
  }
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
  add_edge(Edge{f.addr, target, f.len, dynamic && stub->cache ? gate : 0});
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
  if (breakpoints_.any_client_in(begin, end)) return true;
  if (hw_break_at_)
    for (uint64_t a = begin; a < end; ++a)
      if (hw_break_at_(a)) return true;
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

std::optional<std::pair<uint64_t, patch::Stub>> PatchTracer::place_stub(
    pid_t tid, Region& r, const std::function<Result<patch::Stub>(uint64_t)>& build) {
  uint64_t at = r.code_next;
  auto stub = build(at);
  if (stub && at + stub->code.size() > r.code_end && next_code_area(tid, r, stub->code.size())) {
    at = r.code_next;  // built again where it goes
    stub = build(at);
  }
  if (!stub || at + stub->code.size() > r.code_end) return std::nullopt;
  r.code_next += (stub->code.size() + 15) & ~size_t{15};  // frontier traps go after it
  return std::pair{at, std::move(*stub)};
}

void PatchTracer::plan_site(pid_t tid, uint64_t flow_addr, Site& s) {
  uninstall(s);
  s.planned = true;
  s.patchable = false;
  const FlowInsn& f = s.block.end;
  if (f.len == 0 || f.addr != flow_addr) return;
  if (f.kind == FlowKind::Syscall && buffering()) return plan_buffered_call(tid, s);
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
  spec.table_addr = table_keys_;
  spec.table_mask = kTableSlots - 1;  // the capacity: where the destinations lie
  auto placed = place_stub(tid, *r, [&](uint64_t a) { return patch::build_stub(spec, a); });
  if (!placed) return;
  auto& [at, built] = *placed;
  auto* stub = &built;
  uint64_t begin = (*insns)[*k].addr;
  auto jmp = patch::jmp_rel32(begin, at);
  if (!jmp) return;
  if (!link_exits(at, stub->code, stub->exits)) return;
  if (!area_write(at, stub->code)) return;
  bool dynamic = f.kind == FlowKind::Return || f.kind == FlowKind::IndirectJump || f.kind == FlowKind::IndirectCall;
  add_edge(Edge{f.addr, target, f.len, dynamic && stub->cache ? at : 0});
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

}  // namespace backend
