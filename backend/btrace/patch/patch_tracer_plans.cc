// PatchTracer: the warm plan. The block starts a run's exploration had to stop for, and the
// blocks that ran, are kept per module file (patch/plan_cache.h); the next recording of the
// same file explores them all when it first reaches that module, only a little around them,
// so its frontier traps and unknown targets are met already and little that never runs is
// planned.
#include "backend/btrace/patch/patch_tracer.h"

#include <algorithm>
#include <iterator>
#include <unordered_map>
#include <unordered_set>

namespace backend {

PatchTracer::PlanState* PatchTracer::plan_of(Region& r) {
  if (!r.plan_looked) {
    r.plan_looked = true;
    // A module some mapping of which is writable may change under us: never planned ahead.
    if (plan_cache_.enabled() && !r.writable && r.hi - r.lo < (uint64_t{1} << 32))
      r.plan_key = patch::PlanCache::key_of(r.name, r.inode);
    if (!r.plan_key.empty() && !plans_.count(r.plan_key)) {
      PlanState& st = plans_[r.plan_key];
      st.code_bytes = r.hi - r.lo;
      st.file_offset = r.file_offset;
      if (auto p = plan_cache_.load(r.plan_key); p && p->code_bytes == st.code_bytes && p->file_offset == st.file_offset)
        st.cached = std::move(p->starts);
    }
  }
  if (r.plan_key.empty()) return nullptr;
  PlanState& st = plans_[r.plan_key];
  // The same file mapped otherwise (another size or offset) has no plan of ours.
  return st.code_bytes == r.hi - r.lo && st.file_offset == r.file_offset ? &st : nullptr;
}

void PatchTracer::use_plan(uint64_t pc, std::vector<std::pair<uint64_t, unsigned>>& work) {
  Region* r = region_of(pc);
  if (!r) return;
  PlanState* st = plan_of(*r);
  if (!st) return;
  auto block = code_.block_at(pc);
  if (block && block->end.addr < r->hi)
    if (auto e = plan_entry(*r, pc, block->end.addr, block->end.addr + block->end.len); e && st->learned.insert(*e).second)
      ++stats_.plan_learned;
  seed_plan(*r, work);
}

void PatchTracer::seed_plan(Region& region, std::vector<std::pair<uint64_t, unsigned>>& work) {
  Region* r = &region;
  // Other threads running: what the plan adds would mostly become int3 sites (patches over
  // code they may run wait): the plan waits for a stop of all.
  if (r->seeded || concurrent_) return;
  PlanState* st = plan_of(*r);
  r->seeded = true;
  if (!st) return;
  // Every cached start at once, the module then explored kWarmExploreDepth deep around them
  // (they say what ran: learn_ran()). Each start decoded again from the program's bytes: one
  // whose block ends elsewhere now or whose bytes hash otherwise (the file is not what the
  // plan was made from, or the plan is damaged) is dropped, never planned.
  std::vector<patch::PlanStart> valid;
  for (const patch::PlanStart& s : st->cached) {
    auto b = code_.block_at(r->lo + s.start);
    std::optional<patch::PlanStart> now;
    if (b && b->end.addr == r->lo + s.end) now = plan_entry(*r, r->lo + s.start, b->end.addr, b->end.addr + b->end.len);
    if (!now || *now != s) {
      ++stats_.plan_dropped;
      st->dropped = true;
      continue;
    }
    valid.push_back(s);
    if (!visited_.count(r->lo + s.start)) work.emplace_back(r->lo + s.start, 0);
  }
  stats_.plan_starts += valid.size();
  r->warm = !valid.empty();
  st->cached = std::move(valid);
}

// What ran, for the next run's plan: the block at every taken branch's target a drain met (a
// fixed edge's kEdgeSeen, a ret/indirect target the inline caches moved to) and the block that
// branch ended; from each, the blocks after conditional branches that were never taken (every
// run of them fell through: no branch's target, they ran all the same). The next run explores
// each of them kWarmExploreDepth deep, not the whole of what they reach.
void PatchTracer::learn_ran() {
  std::unordered_map<uint64_t, uint64_t> site_of;  // block start -> the flow instruction ending it
  site_of.reserve(site_starts_.size());
  for (const auto& [site, start] : site_starts_) site_of.emplace(start, site);
  std::unordered_set<uint64_t> taken_at, learned;  // sites some branch of which was taken; starts done
  for (size_t id = 0; id < edges_.size(); ++id)
    if (edge_flags_[id] & kEdgeSeen) taken_at.insert(edges_[id].from);
  auto learn = [&](uint64_t start) {
    for (int chain = 0; chain < 256 && learned.insert(start).second; ++chain) {
      auto it = site_of.find(start);
      Region* r = it == site_of.end() ? nullptr : region_of(start);
      if (!r || it->second >= r->hi) return;
      auto site = sites_.find(it->second);
      if (site == sites_.end()) return;
      const FlowInsn& f = site->second.block.end;
      if (PlanState* st = plan_of(*r))
        if (auto e = plan_entry(*r, start, f.addr, f.addr + f.len)) st->learned.insert(*e);
      if ((f.kind != FlowKind::CondJump && f.kind != FlowKind::Loop) || !f.len || taken_at.count(f.addr)) return;
      start = f.addr + f.len;
    }
  };
  for (size_t id = 0; id < edges_.size(); ++id) {
    if (!(edge_flags_[id] & kEdgeSeen)) continue;
    learn(edges_[id].to);
    auto [b, e] = site_starts_.equal_range(edges_[id].from);
    for (auto it = b; it != e; ++it) learn(it->second);
  }
  for (uint64_t to : ran_targets_) learn(to);
  ran_targets_.clear();
}

std::optional<patch::PlanStart> PatchTracer::plan_entry(const Region& r, uint64_t start, uint64_t flow, uint64_t flow_end) {
  if (start < r.lo || flow < start || flow_end <= flow || flow >= r.hi || flow_end - start > 4096) return std::nullopt;
  std::vector<uint8_t> bytes(flow_end - start);
  if (!read_code(start, bytes)) return std::nullopt;  // the original bytes (the server's copy of the page)
  return patch::PlanStart{static_cast<uint32_t>(start - r.lo), static_cast<uint32_t>(flow - r.lo), patch::block_hash(bytes)};
}

void PatchTracer::save_plans() {
  learn_ran();
  for (auto& [key, st] : plans_) {
    // Nothing new: the file stays as it is (a warm run writes nothing).
    std::vector<patch::PlanStart> fresh;
    std::set_difference(st.learned.begin(), st.learned.end(), st.cached.begin(), st.cached.end(), std::back_inserter(fresh));
    if (fresh.empty() && !st.dropped) continue;
    patch::ModulePlan plan{st.code_bytes, st.file_offset, std::move(fresh)};
    plan.starts.insert(plan.starts.end(), st.cached.begin(), st.cached.end());
    (void)plan_cache_.save(key, plan, /*merge=*/!st.dropped);
  }
  plans_.clear();
}

}  // namespace backend
