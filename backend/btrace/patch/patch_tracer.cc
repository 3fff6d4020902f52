// PatchTracer: lifecycle and the free run's public entry points (prepare_run, suspend, release).
#include "backend/btrace/patch/patch_tracer.h"

#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstddef>
#include <utility>

#include "backend/btrace/patch/patch_tracer_detail.h"
#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/remote_syscall.h"

namespace backend {

PatchTracer::PatchTracer(ProcMemory& mem, SoftwareBreakpoints& breakpoints, BlockCache& code,
                         std::unique_ptr<TraceManager>& tracer)
    : mem_(mem), breakpoints_(breakpoints), code_(code), tracer_(tracer), pid_(mem.pid()),
      plan_cache_(tracer ? tracer->plan_cache_dir() : std::string()) {
  if (tracer_) tracer_->forget_fixed_ids();  // edge ids start again from 0: histories must not reuse the old ones
}

PatchTracer::~PatchTracer() { save_plans(); }

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

void PatchTracer::disable(std::string why, PatchThread* t) {
  if (disabled_.empty()) disabled_ = std::move(why);
  suspend(t);
}

// Stopped and ours to touch: in a ptrace stop whose wait status the process engine has taken.
// A stop not waited for yet (a thread that just hit its ring's guard page while others ran)
// belongs to the engine: stepped or moved here, its status would be lost and the thread never
// resumed (a recorded xz hung so, its worker stopped for good).
bool PatchTracer::stopped_for_us(pid_t tid) const {
  errno = 0;
  ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
  if (errno) return false;
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(tid), &info, WSTOPPED | WEXITED | WNOHANG | WNOWAIT | __WALL) == 0 &&
         info.si_pid == 0;
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

bool PatchTracer::prepare_run(PatchThread t, bool watch_stepping, bool non_stop) {
  WriteBatch batch(*this);
  if (!disabled_.empty()) return false;
  if (auto it = rings_.find(t.tid); it != rings_.end()) take_last(it->second, t.cursor);
  // Between a syscall's entry and exit stops nothing may be injected (a single step there
  // finishes the syscall): the engine runs it to its exit stop first.
  if (t.in_syscall) return false;
  // From a syscall's exit stop the thread goes on through the patches when nothing needs to be
  // injected (every mapping in place, its pc explored): a system call costs its two stops, not
  // the patches out and in again. A lone thread also at a pc not explored yet, in a module
  // whose stub area exists and not inside patched bytes: rt_sigreturn returns wherever a
  // signal came (a 1 ms timer's signals otherwise took all of a recording's time). With other
  // threads running, exploring there lost the end of a thread's history (seen once in ten
  // runs of test_threads_same_history_as_software), so threads keep the old way.
  bool from_syscall = t.tid == in_syscall_tid_;
  auto explorable = [this](uint64_t pc) {
    if (visited_.count(pc)) return true;
    const Region* r = region_of(pc);
    return r && r->code_begin != 0 && !inside_installed_patch(pc) && list_tasks(pid_).size() == 1;
  };
  if (from_syscall && at_syscall_stop_ && installed_ && !maps_changed_ && explorable(pc_of(t.tid))) {
    auto it = rings_.find(t.tid);
    from_syscall = it == rings_.end() || !it->second.gs_set;
  }
  if (!tracer_->patch_traced(t.tid) || watch_stepping || vfork_pending_ || from_syscall) {
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
    maps_changed_ = false;
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
  // Empty again, with the room the budget gives now (never under a thread inside a stub: it
  // may hold the head it read). Without a budget the ring fills on from where it is: a drain
  // here kept a thread waiting at every system call it made under `catch syscall` (whose stops
  // the server resumes through here, their drains left for later: on_stop()).
  uint64_t at = pc_of(t.tid), in_stub = 0;
  if (!stub_at(at, &in_stub) && budget_ && budget_(t.tid)) {
    drain(t.tid, *ring, &t);
    restart(t.tid, *ring);
  }
  uint64_t pc = pc_of(t.tid);
  Region* r = region_of(pc);
  uint64_t base = 0;
  if (!r) return stub_at(pc, &base) != nullptr;  // put into a stub by install_all: it runs on
  // Stopped inside a planned patch's bytes (an int3 or a step there: replay's watch pc, a
  // client breakpoint): made a block start, that block end would stay an int3 site for good.
  // From the stub's copy where the patch is in; else the engine runs to the block's end.
  if (auto s = sites_.lower_bound(pc); s != sites_.end() && s->second.planned && s->second.patchable &&
                                        s->second.begin < pc && pc < s->second.end)
    return s->second.installed == Installed::Patch && enter_stub(t.tid, pc);
  concurrent_ = rings_.size() > 1;  // instrument() asks all_stopped() only when it writes code
  instrument(t.tid, pc);
  concurrent_ = false;
  return true;
}

void PatchTracer::suspend(PatchThread* t) {
  WriteBatch batch(*this);
  bool all = true;
  for (auto& [tid, r] : rings_) {
    if (!r.gs_set) continue;
    if (!stopped_for_us(tid)) {
      all = false;
      continue;
    }
    settle_thread(tid, r, t && t->tid == tid ? t : nullptr);
  }
  if (t)
    if (auto it = rings_.find(t->tid); it != rings_.end()) take_last(it->second, t->cursor);
  if (!installed_) return;
  if (all) update_caches();  // nobody runs a stub now
  (void)sync_regions();  // a module unloaded while it ran: its bytes are not ours to restore
  for (auto& [addr, s] : sites_) uninstall(s, !all);
  installed_ = false;
}

bool PatchTracer::release(pid_t tid) {
  suspend(nullptr);
  save_plans();
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
  for (auto& r : regions_) {
    r.code_begin = r.code_next = r.code_end = 0;
    r.full_areas.clear();
  }
  stubs_.clear();
  sites_.clear();
  site_starts_.clear();
  ranges_.clear();
  data_ = table_addr_ = 0;
  ready_ = false;
  return ok;
}

bool PatchTracer::in_areas(uint64_t addr) const {
  for (const auto& [lo, hi] : areas())
    if (addr >= lo && addr < hi) return true;
  return false;
}

std::vector<std::pair<uint64_t, uint64_t>> PatchTracer::areas() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  if (ready_ && data_) out.emplace_back(data_, data_ + data_size_);
  if (ready_ && table_addr_) out.emplace_back(table_addr_, table_addr_ + table_size_);
  out.insert(out.end(), code_areas_.begin(), code_areas_.end());
  // Each thread's rings: its head page, two rings, each with its guard page.
  for (const auto& [tid, r] : rings_)
    if (r.head_addr) out.emplace_back(r.head_addr, r.area_end);
  for (const Ring& r : spare_)
    if (r.head_addr) out.emplace_back(r.head_addr, r.area_end);
  return out;
}

}  // namespace backend
