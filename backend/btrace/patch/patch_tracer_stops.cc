// PatchTracer: a thread's stops (its ring drained, a fenced write, a frontier trap, a stub's
// miss, a full ring, a thread moved out of a stub) and thread events.
#include "backend/btrace/patch/patch_tracer.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "backend/btrace/patch/patch_tracer_detail.h"
#include "backend/ptrace/popf_by_hand.h"
#include "backend/ptrace/thread_signal.h"

namespace backend {

const PatchTracer::StubInfo* PatchTracer::stub_at(uint64_t pc, uint64_t* base) const {
  auto it = stubs_.upper_bound(pc);
  if (it == stubs_.begin()) return nullptr;
  --it;
  if (pc >= it->first + it->second.len) return nullptr;
  *base = it->first;
  return &it->second;
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
    if (popf_by_hand(tid, mem_, regs)) {  // a stub's popfq is never single-stepped
      if (regs.rip < base || regs.rip >= base + info->len) break;
      continue;
    }
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
        restart(tid, ring);
        regs.rax = ring.first;
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
  for (int sig : signals) signal_thread(pid_, tid, sig);
}

// Most mapping calls are a program's data (malloc's arenas, files read through mmap, RELRO's
// mprotect): they leave every module's code and our areas as they were, and the patches may
// stay in across them (`ls -l` of a large directory: 37 such calls, each of which took every
// patch out and put it back). A call that may map code (PROT_EXEC), or that names a range
// (MAP_FIXED, munmap, mprotect) overlapping a module's code or one of our areas, and mremap,
// are taken the safe way: patches out, the regions read again, patches in.
bool PatchTracer::mapping_touches_code(long nr, const user_regs_struct& regs) const {
  const uint64_t addr = regs.rdi, len = regs.rsi, prot = regs.rdx, flags = regs.r10;
  switch (nr) {
    case SYS_mmap:
      if (prot & PROT_EXEC) return true;
      if (!(flags & (MAP_FIXED | MAP_FIXED_NOREPLACE))) return false;  // the kernel picks a free range
      break;
    case SYS_munmap:
      break;
    case SYS_mprotect:
      if (prot & PROT_EXEC) return true;
      break;
    default:
      return true;
  }
  if (len > (uint64_t{1} << 47) || addr > (uint64_t{1} << 57)) return true;
  const uint64_t lo = addr, hi = addr + ((len + kPage - 1) & ~(kPage - 1));
  auto overlaps = [&](uint64_t a, uint64_t b) { return a < b && lo < b && a < hi; };
  for (const Region& r : regions_) {
    if (overlaps(r.lo, r.hi) || overlaps(r.code_begin, r.code_end)) return true;
    for (const auto& [a, b] : r.full_areas)
      if (overlaps(a, b)) return true;
  }
  for (const auto& [tid, r] : rings_)
    if (overlaps(r.head_addr, r.area_end)) return true;
  return overlaps(data_, data_ + data_size_) || overlaps(table_addr_, table_addr_ + table_size_);
}

// A stopped thread: out of the stubs, its ring drained, its gs base the program's again.
// false: it is running (its gs base stays ours; a later stop of it settles it).
void PatchTracer::settle_thread(pid_t tid, Ring& r, PatchThread* t) {
  normalize(tid, r);
  drain(tid, r, t);
  (void)set_gs(tid, r, false);
}

PatchTracer::StopKind PatchTracer::on_stop(PatchThread t, int status, uint64_t* flow_addr, bool settle_later) {
  WriteBatch batch(*this);
  // A ptrace event or syscall stop is inside a system call whose result is not in rax yet: an
  // mmap injected there would step the thread out of that call (into its next event, unseen)
  // and put the stale rax back. The next run from such a stop goes without patches.
  if (WIFSTOPPED(status)) {
    int event = status >> 16;
    if (event != 0 || WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      in_syscall_tid_ = t.tid;
      at_syscall_stop_ = event == 0;
      if (at_syscall_stop_) {  // modules may come or go: the regions are read again at the next install
        errno = 0;
        long nr = t.syscall_nr != PatchThread::kNrUnread
                      ? t.syscall_nr
                      : ::ptrace(PTRACE_PEEKUSER, t.tid, reinterpret_cast<void*>(offsetof(user_regs_struct, orig_rax)), nullptr);
        if (errno) {
          maps_changed_ = true;
        } else if (nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mprotect || nr == SYS_mremap) {
          user_regs_struct regs{};
          if (::ptrace(PTRACE_GETREGS, t.tid, nullptr, &regs) != 0 || mapping_touches_code(nr, regs)) maps_changed_ = true;
        }
      }
    } else if (in_syscall_tid_ == t.tid) {
      in_syscall_tid_ = 0;
    }
    // A vfork child runs in this memory until it exits or execs (its parent's vforkdone): no
    // patch may go back in meanwhile.
    if (WSTOPSIG(status) == SIGTRAP && event == PTRACE_EVENT_VFORK) vfork_pending_ = true;
    if (WSTOPSIG(status) == SIGTRAP && event == PTRACE_EVENT_VFORK_DONE) vfork_pending_ = false;
  }
  if (!WIFSTOPPED(status)) return StopKind::None;
  int sig = WSTOPSIG(status);
  // A stop the caller resumes at once: a drain here would keep the thread waiting for work
  // nobody reads yet (gzip under `catch syscall`: a stop every 32 KiB it reads or writes).
  // Not under a branch budget (replay), which counts a ring's room from a drained history.
  if (settle_later && sig == (SIGTRAP | 0x80) && (status >> 16) == 0 && !(budget_ && budget_(t.tid))) {
    ++stats_.undrained_syscall_stops;
    return StopKind::None;
  }
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
  drain_deferred();  // before the cursor moves to what the rings hold
  auto it = rings_.find(t.tid);
  if (it == rings_.end() || !it->second.gs_set) return StopKind::None;
  Ring& ring = it->second;
  // A full ring, where the thread has another: it goes on there at once, and this one is read
  // while it runs (drain_deferred(), after the caller resumes it). Not under a branch budget,
  // whose room is counted from a history drained up to the stop.
  if (user_regs_struct regs{}; ring.alt && WSTOPSIG(status) == SIGSEGV && !(budget_ && budget_(t.tid)) &&
                               full_ring_fault(t.tid, ring, status, regs)) {
    if (rings_.size() == 1) update_caches();  // what the last deferred drain saw
    flush_calls(t.tid, ring, &t);  // made in this ring: counted before it is deferred
    uint64_t head = head_of(ring);
    if (head > ring.first && head <= ring.end) deferred_ = Deferred{t.tid, ring.first, head};
    std::swap(ring.begin, ring.alt);
    ring.end = ring.begin + ring_bytes_;
    restart(t.tid, ring);
    regs.rax = ring.first;
    ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
    ++stats_.ring_full;
    ++stats_.ring_swaps;
    return StopKind::Consumed;
  }
  take_last(ring, t.cursor);
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
    // The int3 of a site that is gone since the thread hit it (a pause took this stop first:
    // a catch-up or an install patched the site, or took the int3 out, before the stop was
    // handled). It is still that site's hit: the engine runs the instruction there as at
    // its int3. Without this the SIGTRAP went to the client as the program's own.
    siginfo_t si{};
    bool have_si = ::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si) == 0;
    if (have_si && si.si_code == SI_KERNEL && sites_.count(regs.rip - 1)) {
      uint8_t now = 0;
      if (auto n = mem_.read(regs.rip - 1, std::span<uint8_t>(&now, 1)); n && *n == 1 && now != 0xcc) {
        regs.rip -= 1;
        ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
        *flow_addr = regs.rip;
        ++stats_.stale_int3_traps;
        return StopKind::Miss;
      }
    }
    // A single-step trap on an instruction of our own areas is stale: nothing steps through
    // stub code but normalize() and the syscall injector, which take their traps themselves,
    // and a client's step starts from the original code. Seen rarely on a forking or
    // multi-threaded program under load (a kernel TRAP_TRACE delivered after the thread was
    // continued); the thread goes on as it was.
    if (have_si && si.si_code == TRAP_TRACE && in_areas(regs.rip)) {
      ++stats_.stale_step_traps;
      return StopKind::Consumed;
    }
    return StopKind::None;
  }
  if (sig == SIGSEGV) {
    if (full_ring_fault(t.tid, ring, status, regs)) {
      restart(t.tid, ring);  // drained above: the store starts the ring again
      regs.rax = ring.first;
      ::ptrace(PTRACE_SETREGS, t.tid, nullptr, &regs);
      ++stats_.ring_full;
      return StopKind::Consumed;
    }
  }
  // A signal for the program: it is seen at an original address. Stepping out of a stub stops
  // the thread again (a step trap, a full ring): the signal's own siginfo is put back for its
  // delivery (and for whoever reads it at this stop: replay records it).
  siginfo_t si{};
  bool have_info = ::ptrace(PTRACE_GETSIGINFO, t.tid, nullptr, &si) == 0 && si.si_signo == sig;
  normalize(t.tid, ring);
  if (have_info) ::ptrace(PTRACE_SETSIGINFO, t.tid, nullptr, &si);
  drain(t.tid, ring, &t);
  return StopKind::None;
}

void PatchTracer::settle(PatchThread t) {
  WriteBatch batch(*this);
  drain_deferred();
  auto it = rings_.find(t.tid);
  if (it == rings_.end() || !it->second.gs_set) return;
  take_last(it->second, t.cursor);
  drain(t.tid, it->second, &t);
  if (rings_.size() == 1) update_caches();  // the one thread is stopped
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

void PatchTracer::untraced_run(PatchThread t) {
  WriteBatch batch(*this);
  if (!installed_) return;
  Ring* r = ring_for(t.tid);
  if (r && (r->gs_set || set_gs(t.tid, *r, true))) return;
  suspend(&t);
}

bool PatchTracer::full_ring_fault(pid_t tid, const Ring& r, int status, user_regs_struct& regs) const {
  if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGSEGV || (status >> 16) != 0) return false;
  siginfo_t si{};
  if (::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si) != 0 || si.si_signo != SIGSEGV) return false;
  auto addr = reinterpret_cast<uint64_t>(si.si_addr);
  if (addr < r.end || addr >= r.end + kPage) return false;
  if (::ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return false;
  uint64_t base = 0;
  const StubInfo* info = stub_at(regs.rip, &base);
  return info && std::find(info->ring_stores.begin(), info->ring_stores.end(), regs.rip - base) != info->ring_stores.end();
}

void PatchTracer::thread_exited(pid_t tid) {
  WriteBatch batch(*this);
  drain_deferred();
  auto it = rings_.find(tid);
  if (it == rings_.end()) return;
  spare_.push_back(it->second);
  rings_.erase(it);
}

}  // namespace backend
