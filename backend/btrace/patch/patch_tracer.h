// The block-patching trace source (--btrace-source=patch): the software engine's exact
// history without a ptrace stop per block where a block end can be patched.
//
// A traced thread that continues from code of a patched module (the program, ld.so, libc, any
// executable file mapping; each with its own stub area within rel32 reach) runs free: every block end
// reachable from its pc through direct edges is instrumented first, either patched (a jmp rel32
// over the control-flow instruction, and over the instructions before it when it is shorter
// than 5 bytes, to a stub that appends the branch to a ring in the program and then does what
// the original instruction did) or, where that is not possible, given an int3 that the
// software engine handles as before (emulate, record, go on). ret and indirect jmp/call stubs
// look the target up in a table of instrumented block starts and trap to the server (int3) when
// it is not there, so execution never leaves instrumented code unseen. The server drains the
// ring at each stop of the thread, before the engine records anything, into the thread's
// BranchRing: GDB's btrace packets, limits and buffer sizes stay as they are.
//
// Invisible to the client: patches are in memory only while the process runs; at every reported
// stop the thread is moved out of any stub (to the original address it stands for, or stepped
// to the end of the stub) and every original byte is put back, so memory reads, Z0
// breakpoints, single steps and registers see the program as it is. Reads while running (the
// engine's decoder) get the original bytes through unshadow().
//
// Threads (all-stop): every thread has a ring of its own (head word, ring, guard page), which its
// gs base points at while the patches are in (x86-64 programs leave gs alone; the client sees
// the program's own gs base, 0, at every stop). A thread's ring is drained at each of its stops,
// into its own history. The patches go in only while every thread is stopped; code first met
// while other threads run free gets a patch only where no thread can be executing those bytes
// (fresh code, every other thread traced), else an int3 until the next time all are stopped.
// Non-stop mode with more than one thread turns patching off (the software source goes on).
//
// Files (all in backend/btrace/patch/; the private declarations below are grouped the same way):
//   patch_tracer.cc          lifecycle and the free run's entry points: prepare_run, suspend, release
//   patch_tracer_areas.cc    the patched modules, the areas mapped in the program, each thread's ring
//   patch_tracer_explore.cc  exploration: block ends planned as patches or int3 sites, their stubs,
//                            translations, frontier traps and how stub exits are linked
//   patch_tracer_install.cc  writing into the program: area and code writes, the table, patches in/out
//   patch_tracer_drain.cc    rings drained into the histories; the dynamic stubs' inline caches
//   patch_tracer_stops.cc    on_stop, moving a thread out of a stub, thread events
//   patch_tracer_memory.cc   the memory view: unshadow, read_code, restore_into, invalidate
//   patch_tracer_plans.cc    the warm plan: block starts kept on disk between runs (plan_cache.h)
//   patch_tracer_detail.h    constants and a helper shared by those files (private)
#pragma once

#include <sys/types.h>
#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/points/software_breakpoints.h"
#include "backend/btrace/patch/stub_encoder.h"
#include "backend/btrace/patch/shared_mapping.h"
#include "backend/btrace/patch/area_writes.h"
#include "backend/btrace/patch/plan_cache.h"
#include "backend/btrace/trace_manager.h"
#include "backend/x86/block_cache.h"
#include "backend/btrace/patch/patch_thread.h"
#include "backend/ptrace/proc_memory.h"

namespace backend {

class PatchTracer {
 public:
  struct Stats {
    // Over the run (a count taken at a stop said 0 at the exit_group stop of a whole recorded
    // run): block ends patched at least once, and those only ever left to the engine's stop.
    uint64_t patched_sites = 0;
    uint64_t int3_sites = 0;
    uint64_t drained = 0;         // branches taken from the ring
    uint64_t ring_full = 0;       // guard-page traps
    uint64_t ring_swaps = 0;      // of those, rings read while their thread went on in its other one
    uint64_t undrained_syscall_stops = 0;  // system-call stops resumed at once, their drains left for later
    uint64_t misses = 0;          // ret/indirect targets not (yet) instrumented
    uint64_t step_outs = 0;       // threads stepped out of a stub at a stop
    uint64_t stale_step_traps = 0;  // single-step traps on our own code, dropped
    uint64_t stale_int3_traps = 0;  // hits of a site's int3 handled after it was gone
    uint64_t installs = 0;        // times the patches were written back (one per free run)
    uint64_t translated = 0;      // short blocks run from a translation
    uint64_t frontier = 0;        // frontier traps reached (exploration went on from there)
    uint64_t shared_areas = 0;    // areas the server maps too (written and drained without system calls)
    uint64_t private_areas = 0;   // areas only the program maps (sharing failed: private_why)
    uint64_t plan_starts = 0;     // block starts explored at once from the plan cache
    uint64_t plan_dropped = 0;    // of the cache's, those whose block no longer ends where it said
    uint64_t plan_learned = 0;    // block starts exploration had to stop for (the next run's plan)
    uint64_t table_targets = 0;   // ret/indirect targets in the table (its growth's copies not counted)
    uint64_t table_slots = 0;     // its slots in use now
  };

  PatchTracer(ProcMemory& mem, SoftwareBreakpoints& breakpoints, BlockCache& code, std::unique_ptr<TraceManager>& tracer);
  ~PatchTracer();
  PatchTracer(const PatchTracer&) = delete;
  PatchTracer& operator=(const PatchTracer&) = delete;

  // t (stopped, about to continue traced) may run free: the patches are in and everything
  // reachable from its pc is instrumented. false: the engine runs it block by block.
  bool prepare_run(PatchThread t, bool watch_stepping, bool non_stop);
  // The engine's planner must not follow a direct branch to this target (patched code).
  bool enters_patched(uint64_t target) const;
  // A free run may go under PTRACE_CONT: every system call in the patched code is buffered
  // or stops at an int3 before it (a recording with the system-call buffer).
  bool calls_never_unseen() const { return installed_ && buffering(); }
  // pc (after a `syscall`) is in a buffered call's stub: the call is the buffer's to report
  // (a stop there, under PTRACE_SYSCALL, is not the program's own call).
  bool in_buffered_stub(uint64_t pc) const;

  enum class StopKind { None, Consumed, Miss, Frontier };
  // Every wait status of a stopped thread, before the engine looks at it. Drains the ring
  // (t's cursor follows the last branch). Consumed: a full ring was drained (the thread is to
  // be resumed as it was). Miss: a ret/indirect stub met an unknown target; the thread now
  // stands on the original instruction at *flow_addr, which the engine must execute.
  // Frontier: a stub's exit reached a block not explored yet; the thread stands at that block
  // (its branch recorded) and is to be continued traced (which explores from there). A hit
  // of a site's int3 that is gone since (handled late) is a Miss at that site.
  // settle_later: a system-call stop skips the drains (the ring fills on from where it is), for
  // a caller that resumes most such stops at once (a `catch syscall` filtered in the server)
  // and calls settle() for the others before anything reads t's history or cursor.
  StopKind on_stop(PatchThread t, int status, uint64_t* flow_addr, bool settle_later = false);
  // The drains on_stop() skipped: t's ring (the deferred one first) read into its history.
  void settle(PatchThread t);
  // Work that waits for every thread stopped while others run free (their exits relinked to a
  // translation, a patch that came out fenced): the caller stops the others now and then and
  // calls catch_up(), or a threaded program would stop at those int3s for the rest of its run.
  bool wants_all_stopped() const { return installed_ && (!pending_relinks_.empty() || fenced_sites_ > 0); }
  // Every thread stopped: that work done now (a site with a thread stopped inside its bytes
  // waits for the next time).
  void catch_up();
  // A reported stop (or detach, a pause, a vfork, a second thread): the thread is moved out of
  // the stubs, the ring drained, every original byte put back. `t` may be any thread.
  void suspend(PatchThread* t);
  // Recording through patches is over (record stop, the last recorded thread gone, detach):
  // suspend() and then the stub and data areas are unmapped (munmap run in `tid`), so nothing
  // of the patching is left in the program. Every thread must be stopped (after suspend() none
  // stands in a stub). The object is spent afterwards: a new recording makes a new one.
  // false: a munmap failed (the area stays; the code is original all the same).
  bool release(pid_t tid);
  // [start, end) of every area mapped in the program now (the data page first, then the table).
  std::vector<std::pair<uint64_t, uint64_t>> areas() const;
  // Whether addr lies in one of the areas above.
  bool in_areas(uint64_t addr) const;
  // Hardware execution breakpoints (Z1), and internal int3s a thread must meet (replay's watch
  // pc): a patch over one would hide it, like a client int3's.
  void set_hardware_breakpoints(std::function<bool(uint64_t)> at) { hw_break_at_ = std::move(at); }
  // How many more ring entries a thread may write before it must stop (0: no limit), asked
  // whenever its ring starts again (after each drain, before each free run): replay stops the
  // thread short of a recorded branch count this way (its ring gets only that much room before
  // the guard page), then meets the event's pc with an int3.
  void set_branch_budget(std::function<uint64_t(pid_t)> budget) { budget_ = std::move(budget); }
  // A full ring is read after its thread goes on in its other ring (on_stop() said Consumed):
  // the caller calls this once the thread runs again, so that the drain overlaps the program's
  // run. Every other read of a ring (any drain, a thread's exit) does it first, so the history
  // keeps its order whoever calls first.
  void drain_deferred();
  // At most about max_bytes of it, for a caller that looks for stops in between (a drain of a
  // whole ring kept a thread that stopped meanwhile waiting for all of it). false: there was
  // nothing left to read.
  bool drain_deferred_some(size_t max_bytes);
  // t (stopped, not traced) is to run while other threads may run patched: it gets a ring of
  // its own (its branches are dropped); where that fails the patches come out.
  void untraced_run(PatchThread t);
  // A new thread (stopped, not run yet; it inherited its parent's gs base): it gets a ring of
  // its own when the patches are in. Non-stop: patching stops for this process.
  void thread_created(pid_t child, bool non_stop);
  // A thread is gone: its ring is kept for the next new thread.
  void thread_exited(pid_t tid);
  // A fork child got a copy of the patched code: put its original bytes back.
  void restore_into(const ProcMemory& child) const;
  // Reads: the original bytes of patched code.
  void unshadow(uint64_t addr, std::span<uint8_t> buf) const;
  // The original bytes of [addr, addr+len) when all of it is code of a module never mapped
  // writable, from a copy read a page at a time (every block end planned is decoded twice: one
  // read of a page instead of two of each block). false: the caller reads the program.
  bool read_code(uint64_t addr, std::span<uint8_t> out);
  // The client wrote memory: patches over it are forgotten (planned again from the new bytes).
  void invalidate(uint64_t addr, uint64_t len);

  const Stats& stats() const { return stats_; }
  const std::string& disabled_reason() const { return disabled_; }
  const std::string& private_why() const { return private_why_; }  // why the first area is not shared
  const std::string& plan_dir() const { return plan_cache_.dir(); }  // "": no plan cache
  bool installed() const { return installed_; }
  // Where a system call injected by others may run (a private page of ours; 0: none yet). A
  // thread's pc may be in a stub area, shared with the server and not writable through ptrace.
  uint64_t syscall_site() const { return scratch_; }
  // Where tid's ring is written next: an address that grows with each branch the stubs record
  // until the ring is drained (0: tid records through no ring now).
  uint64_t ring_head(pid_t tid) const {
    auto it = rings_.find(tid);
    return it != rings_.end() && it->second.gs_set ? head_of(it->second) : 0;
  }

 private:
  struct Region {
    uint64_t lo = 0, hi = 0;  // executable bytes of one module
    uint64_t code_begin = 0, code_next = 0, code_end = 0;  // its stub area (0: not mapped yet)
    std::string name;  // the mapped file
    bool area_failed = false;  // no stub area could be mapped near it
    // Its earlier stub areas, full: their stubs stay, reached from their patches.
    std::vector<std::pair<uint64_t, uint64_t>> full_areas;
    bool writable = false;     // some mapping of it is writable: its bytes are never copied
    uint64_t inode = 0, file_offset = 0;  // of the file, and the file offset of lo
    std::string plan_key;      // its plan's key in the cache ("" none)
    bool plan_looked = false;  // plan_key computed
    bool seeded = false;       // the cached plan's block starts explored
    bool warm = false;         // and there were some: its code is explored kWarmExploreDepth deep
  };
  struct StubInfo {
    uint64_t flow = 0;   // the control-flow instruction it stands for
    uint32_t len = 0;
    std::vector<std::pair<uint32_t, uint64_t>> exact;
    std::optional<uint32_t> miss_int3;
    std::vector<uint32_t> ring_stores;
    std::optional<uint32_t> cache;  // dynamic stubs: offset of the inline cache
    uint64_t cached = 0;            // the target it holds now (0: empty)
    uint8_t flow_len = 0;
    bool frontier = false;          // a frontier trap: an int3 standing for block start `flow`
    bool buffered = false;          // a buffered system call's stub (its own `syscall` inside)
  };
  enum class Installed { None, Patch, Int3 };
  struct Site {
    Block block;                    // decoded from latest_start
    uint64_t latest_start = 0;      // the latest block start that ends at this instruction
    bool planned = false;
    bool patchable = false;         // false: an int3 site
    uint64_t begin = 0, end = 0;    // patched bytes [begin, end)
    std::vector<uint8_t> original, patched;
    Installed installed = Installed::None;
    bool counted_patch = false, counted_int3 = false;  // in Stats::patched_sites / int3_sites
  };
  // Ring entry id -> branch. `stub`: a dynamic site's stub (its ids carry the target; the
  // drain moves the site's inline cache to it).
  struct Edge { uint64_t from = 0, to = 0; uint8_t len = 0; uint64_t stub = 0; };
  // One thread's ring: [head word page][ring A][PROT_NONE guard page][ring B][guard page],
  // mapped in the program. The thread writes one of the two ([begin, end)); when it fills, it
  // goes on in the other while the server drains the full one (see drain_deferred()).
  struct Ring {
    uint64_t head_addr = 0, begin = 0, end = 0;
    uint64_t alt = 0;                  // the other ring's begin (0: none)
    uint64_t area_end = 0;             // the end of the whole mapping (after the last guard page)
    uint64_t first = 0;                // where the entries since the last drain begin (begin, or less room)
    uint8_t* view = nullptr;           // the server's view of it (from head_addr) when shared
    bool gs_set = false;               // the thread's gs base points at head_addr now
    uint64_t calls = 0, calls_end = 0;  // its system-call buffer, after the rings (0: none)
    std::optional<Branch> last;        // drained while its PatchThread was not at hand: its cursor
  };

  // patch_tracer.cc
  Region* region_of(uint64_t addr);
  const Region* region_of(uint64_t addr) const;
  void disable(std::string why, PatchThread* t);
  bool stopped_for_us(pid_t tid) const;  // in a ptrace stop the process engine has waited for
  bool all_stopped() const;           // every thread of the process is in a ptrace stop
  bool others_traced(pid_t self) const;  // every other thread runs under patch control

  // patch_tracer_areas.cc
  bool sync_regions();
  Result<void> setup(pid_t tid);
  // An area shared with the server (nullopt: the caller maps a private one; counted either way).
  Result<void> unmap_inherited_areas(pid_t tid, uint64_t hint);
  std::optional<patch::SharedMapping> map_shared(pid_t tid, uint64_t addr, bool exact, uint64_t size, int prot);
  Result<void> map_code_area(pid_t tid, Region& r);
  // A fresh stub area for r when its area cannot hold `bytes` more (a large module, libpython:
  // ~150,000 block ends filled 10 MiB, and every later one stayed an int3 site); false when
  // none can be mapped or r has had kMaxAreasPerRegion.
  bool next_code_area(pid_t tid, Region& r, uint64_t bytes);
  Ring* ring_for(pid_t tid);          // t's ring, mapped (a spare one or a new one) if it has none
  uint64_t head_of(const Ring& r) const;  // 0: unreadable
  bool set_head(Ring& r, uint64_t head);
  void restart(pid_t tid, Ring& r);   // empty again (drained), with the room the branch budget allows
  bool set_gs(pid_t tid, Ring& r, bool ours);

  // patch_tracer_explore.cc
  // How many direct edges deep exploration plans from where a thread stands (see instrument()).
  static constexpr unsigned kExploreDepth = 5;
  // In a module whose warm plan is in use: its starts already say what earlier runs ran, and
  // exploring each as deep planned mostly what never runs (ls -l /etc from main, second run:
  // 7,600 block ends planned at depth 5, 5,200 at 1, ~20 frontier traps then none after).
  static constexpr unsigned kWarmExploreDepth = 1;
  std::optional<uint64_t> slot_target(const FlowInsn& f) const;
  void instrument(pid_t tid, uint64_t pc);

  // patch_tracer_plans.cc: the warm plan (plan_cache.h) of each module
  struct PlanState {
    uint64_t code_bytes = 0, file_offset = 0;
    std::vector<patch::PlanStart> cached;  // as loaded; the valid ones once seeded
    std::set<patch::PlanStart> learned;    // exploration roots of this run, and what ran
    bool dropped = false;  // a cached start was wrong: the file is written anew, not merged
  };
  PlanState* plan_of(Region& r);
  // Exploration is to begin at pc (not visited): the first time in a module, every block start
  // of its cached plan that still holds joins `work`; pc is learned for the next run.
  void use_plan(uint64_t pc, std::vector<std::pair<uint64_t, unsigned>>& work);
  // The first exploration that reaches a module with a cached plan: its starts join `work`.
  void seed_plan(Region& r, std::vector<std::pair<uint64_t, unsigned>>& work);
  void learn_ran();  // into each module's plan: the block starts the run's drains saw run
  // The plan's entry for the block [start, flow_end) of region r (its bytes' hash); nullopt
  // where the bytes cannot be read.
  std::optional<patch::PlanStart> plan_entry(const Region& r, uint64_t start, uint64_t flow, uint64_t flow_end);
  void save_plans();
  void open_frontiers();
  bool syscall_runs_free(uint64_t block_start, const FlowInsn& f);

  // patch_tracer_calls.cc: the system-call buffer (a recording's; docs/record-replay.md)
  bool buffering() const;  // calls are buffered: a sink waits for them, one thread
  // A site ending in a system call (a recording with the buffer): a stub that buffers the call,
  // or one that stops at its int3 before it (a call the buffer does not take); else an int3 site.
  void plan_buffered_call(pid_t tid, Site& s);
  // r's buffered calls to the sink, each after the ring is drained up to where it was made.
  void flush_calls(pid_t tid, Ring& r, PatchThread* t);
  bool link_exits(uint64_t base, std::vector<uint8_t>& code, const std::vector<std::pair<uint32_t, uint64_t>>& exits);
  std::optional<uint64_t> frontier_trap(uint64_t near, uint64_t target);
  void relink(uint64_t start);
  uint64_t destination(uint64_t target) const;
  std::optional<std::pair<uint64_t, bool>> stub_target(const FlowInsn& f) const;
  // Translations: a copy of a short block whose end could not be patched (an int3 site), run
  // by the stubs that lead to it instead of the original (which keeps its int3 for any other
  // way in). Its first 5 bytes are a gate: a nop, or a jmp to the original block while a
  // client breakpoint lies in it.
  void translate(pid_t tid, uint64_t start);
  bool has_client_breakpoint(uint64_t begin, uint64_t end) const;
  void set_gate(uint64_t start, bool open);
  void open_gates();
  void plan_site(pid_t tid, uint64_t flow_addr, Site& s);
  // A stub built by `build` (at the address it is given: its jumps are relative) where r's
  // stub area has room, in a fresh area when it has none; its space is taken (a failure after
  // this leaves it unused for good, so nothing linked to it is ever overwritten). nullopt:
  // not built, or no room.
  std::optional<std::pair<uint64_t, patch::Stub>> place_stub(pid_t tid, Region& r,
                                                             const std::function<Result<patch::Stub>(uint64_t)>& build);

  // patch_tracer_install.cc
  void table_insert(uint64_t target);
  bool table_put(uint64_t target);  // where the mask in use looks for it; false: there already
  // Half full: twice the slots in use. Each target is put where the bigger mask looks for it
  // (its old slot stays, valid, for a stub that read the old mask), then the mask is written.
  bool grow_table();
  void write_table_mask();
  bool area_write(uint64_t addr, std::span<const uint8_t> bytes);
  // Code: gathered with the area writes (sent after them: a patch never leads to a stub not
  // written yet); written through while other threads may run.
  void code_write(uint64_t addr, std::span<const uint8_t> bytes);
  // Everything pending sent: before the program runs a single instruction (an injected system
  // call, a step out of a stub) and before an int3 goes in or out where a write is pending.
  bool flush_all();
  bool flush_writes();
  // Writes into the stub areas and the table are gathered while a WriteBatch lives (in every
  // public entry point) and sent when it ends, or before a patch that leads to them goes in.
  class WriteBatch {
   public:
    explicit WriteBatch(PatchTracer& p);
    ~WriteBatch();
    WriteBatch(const WriteBatch&) = delete;
    WriteBatch& operator=(const WriteBatch&) = delete;

   private:
    PatchTracer& p_;
    bool was_;
  };
  void table_set_destination(uint32_t slot, uint64_t dest);
  void table_redirect(uint64_t target);
  void install(Site& s, bool int3_only = false);
  void write_fenced(uint64_t addr, std::span<const uint8_t> bytes);
  void uninstall(Site& s, bool fenced = false);
  bool install_all(pid_t self);
  bool enter_stub(pid_t tid, uint64_t pc);
  // pc strictly inside the bytes of a patch that is in: a thread there cannot run on as it is.
  bool inside_installed_patch(uint64_t pc) const;

  // patch_tracer_drain.cc
  size_t drain(pid_t tid, Ring& r, PatchThread* t);
  // A branch drained while the thread was not at hand (Ring::last) moves its cursor now.
  static void take_last(Ring& r, BranchCursor& cursor);
  // The entries in [first, head) of r's memory into tid's history; `used`: the bytes read
  // (whole entries).
  size_t drain_span(pid_t tid, Ring& r, PatchThread* t, uint64_t first, uint64_t head, size_t& used);
  void note_dynamic(uint32_t id, uint64_t stub, uint64_t to);
  // A full ring's fault at a stub's store: true with regs read when the thread stopped so.
  bool full_ring_fault(pid_t tid, const Ring& r, int status, user_regs_struct& regs) const;
  void update_caches();
  void clear_caches();

  // patch_tracer_stops.cc
  const StubInfo* stub_at(uint64_t pc, uint64_t* base) const;
  void normalize(pid_t tid, Ring& r);
  void settle_thread(pid_t tid, Ring& r, PatchThread* t);
  // Whether system call nr (a mapping call, its arguments in regs) may change code the patches
  // know of or make new code: then the patches come out at its exit and go in again anew.
  bool mapping_touches_code(long nr, const user_regs_struct& regs) const;

  // patch_tracer_memory.cc
  void forget_plans();

  ProcMemory& mem_;
  SoftwareBreakpoints& breakpoints_;
  BlockCache& code_;
  std::unique_ptr<TraceManager>& tracer_;
  std::function<bool(uint64_t)> hw_break_at_;
  std::function<uint64_t(pid_t)> budget_;
  patch::Disassembler dis_;
  patch::AreaWrites writes_;
  patch::CodeWrites code_writes_;
  bool batching_ = false;
  pid_t pid_ = 0;
  bool ready_ = false;
  bool installed_ = false;
  bool vfork_pending_ = false;  // a vfork child shares the memory (vfork event seen, vforkdone not yet)
  pid_t in_syscall_tid_ = 0;    // the thread whose last stop was a ptrace event or syscall stop
  bool at_syscall_stop_ = false;  // that stop was a syscall stop (no event)
  bool maps_changed_ = false;     // a mapping call (mmap, mprotect...) ran since the last install
  std::string disabled_;
  std::string private_why_;
  std::vector<Region> regions_;
  // The data page: an executable `syscall` only the server runs (system calls injected while
  // other threads run). The table of instrumented block starts: an area of its own.
  uint64_t data_ = 0, data_size_ = 0, table_addr_ = 0, table_size_ = 0, scratch_ = 0, ring_bytes_ = 0;
  uint64_t table_keys_ = 0;  // the table's first slot (after its header, in the area at table_addr_)
  uint64_t ring_hint_ = 0;                   // where the next new ring is asked for (after the table)
  uint64_t name_ = 0;                        // in the data page: the shared areas' name
  std::vector<patch::SharedView> ring_views_;  // the shared rings (Ring::view points into them)
  std::map<pid_t, Ring> rings_;              // by thread
  // A full ring whose thread went on in its other ring: [first, head) is still to be read.
  struct Deferred { pid_t tid = 0; uint64_t first = 0, head = 0; };
  std::optional<Deferred> deferred_;
  std::vector<Ring> spare_;                  // rings of threads that exited
  std::set<uint64_t> fences_;                // int3s written for an instant over a live patch
  bool relink_now_ = true;                   // instrument(): stub exits may be rewritten now
  std::vector<uint64_t> pending_relinks_;    // blocks whose exits wait for every thread stopped
  std::vector<uint64_t> frontier_jumps_;     // of those, blocks whose frontier traps become jmps
  bool concurrent_ = false;                  // instrument(): other threads may be running now
  uint64_t fenced_sites_ = 0;                // patchable sites left an int3 while others ran (an upper bound)
  uint32_t table_mask_ = 0;  // in use (the program's copy at table_keys_ - 8)
  std::vector<std::pair<uint64_t, uint64_t>> code_areas_;  // stub areas mapped (kept past a dlclose)
  std::vector<uint64_t> table_;  // mirror of the inferior's table
  size_t table_used_ = 0;
  std::map<uint64_t, Site> sites_;           // by control-flow instruction address
  std::unordered_multimap<uint64_t, uint64_t> site_starts_;  // site -> every explored block start ending there
  std::map<uint64_t, uint64_t> ranges_;      // patched begin -> flow address (for unshadow)
  std::map<uint64_t, StubInfo> stubs_;       // stub address -> what it stands for (kept forever)
  std::unordered_set<uint64_t> visited_;     // instrumented block starts
  std::vector<Edge> edges_;                  // ring entry id -> branch
  // Beside it, per id: kEdgeTaken when a fixed entry of that edge is a branch (not a jump to
  // the next instruction), kEdgeSeen once a drain met one. The drain reads this byte, not the
  // 32-byte edge, for most entries (and writes it the first time only).
  static constexpr uint8_t kEdgeTaken = 1, kEdgeSeen = 2;
  std::vector<uint8_t> edge_flags_;
  void add_edge(const Edge& e) {
    edges_.push_back(e);
    edge_flags_.push_back(e.to != e.from + e.len ? kEdgeTaken : 0);
  }
  std::vector<uint64_t> ran_targets_;  // ret/indirect targets the drains saw (the caches' moves)
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> cache_edges_;  // (site, target) -> id
  std::vector<std::pair<uint64_t, uint64_t>> cache_moves_;         // (stub, target) seen in a drain
  std::vector<uint32_t> cache_move_ids_;
  std::vector<uint32_t> last_dynamic_;       // per edge id: position+1 in cache_moves_ (0: none)
  struct Translation { uint64_t gate = 0, end = 0; bool open = false; };
  std::unordered_map<uint64_t, Translation> translations_;  // block start -> its translation
  // Hashed, not ordered: looked up once or more per block end planned (most of planning's
  // time went to these trees' nodes).
  std::unordered_multimap<uint64_t, std::pair<uint64_t, uint32_t>> exits_;  // target -> (stub, rel32 offset)
  std::unordered_multimap<uint64_t, uint64_t> frontier_;  // unexplored block start -> its frontier traps
  std::unordered_multimap<uint64_t, uint64_t> cached_by_target_;  // target -> stubs caching it (may be stale)
  std::unordered_map<uint64_t, std::vector<uint8_t>> code_pages_;  // page -> original bytes (read_code)
  std::vector<uint8_t> drain_buf_;
  std::vector<std::pair<size_t, size_t>> drain_marks_;  // drain(): (offset, branches before it)
  std::vector<Branch> batch_;       // drain(): the dynamic entries' branches
  std::vector<uint32_t> entries_;   // drain(): edge ids, or BranchRing::kExplicit | index in batch_
  patch::PlanCache plan_cache_;
  std::map<std::string, PlanState> plans_;  // by key (a module unmapped and mapped again keeps its own)
  Stats stats_;
};

}  // namespace backend
