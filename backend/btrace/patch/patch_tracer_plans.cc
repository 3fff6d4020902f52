// PatchTracer: the warm plan. The block starts a run's exploration had to stop for are kept per
// module file (patch/plan_cache.h); the next recording of the same file explores them all at
// its first stop in that module, so its frontier traps and unknown targets are met already.
#include "backend/btrace/patch/patch_tracer.h"

#include <algorithm>
#include <iterator>

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
  if (block && block->end.addr < r->hi &&
      st->learned.emplace(static_cast<uint32_t>(pc - r->lo), static_cast<uint32_t>(block->end.addr - r->lo)).second)
    ++stats_.plan_learned;
  // Other threads running: what the plan adds would mostly become int3 sites (patches over
  // code they may run wait): the plan waits for a stop of all.
  if (r->seeded || concurrent_) return;
  r->seeded = true;
  // Each cached start explored as deep as the run that met it did: the plan that run ended
  // with, at once. (Explored less deep, to shrink the plan towards what runs, the second run
  // stopped more than the first: ls -l /etc, 497 frontier traps against 473.)
  // Each start decoded again from the program's bytes: one whose block ends elsewhere now
  // (the file is not what the plan was made from) is dropped, never planned.
  std::vector<std::pair<uint32_t, uint32_t>> valid;
  for (auto [start, end] : st->cached) {
    auto b = code_.block_at(r->lo + start);
    if (!b || b->end.addr != r->lo + end) {
      ++stats_.plan_dropped;
      st->dropped = true;
      continue;
    }
    valid.emplace_back(start, end);
    if (!visited_.count(r->lo + start)) work.emplace_back(r->lo + start, 0);
  }
  stats_.plan_starts += valid.size();
  st->cached = std::move(valid);
}

void PatchTracer::save_plans() {
  for (auto& [key, st] : plans_) {
    // Nothing new: the file stays as it is (a warm run writes nothing).
    std::vector<std::pair<uint32_t, uint32_t>> fresh;
    std::set_difference(st.learned.begin(), st.learned.end(), st.cached.begin(), st.cached.end(), std::back_inserter(fresh));
    if (fresh.empty() && !st.dropped) continue;
    patch::ModulePlan plan{st.code_bytes, st.file_offset, std::move(fresh)};
    plan.starts.insert(plan.starts.end(), st.cached.begin(), st.cached.end());
    (void)plan_cache_.save(key, plan, /*merge=*/!st.dropped);
  }
  plans_.clear();
}

}  // namespace backend
