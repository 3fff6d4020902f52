// Software breakpoints (int3) with shadow bytes. One entry per address, refcounted per owner so
// the client (Z0, and Z1 where hardware breakpoints are emulated) and internal users (software
// tracer, stepbranch) can share an address.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>

#include "backend/error.h"
#include "backend/ptrace/proc_memory.h"

namespace backend {

// ClientHardware: a client's hardware breakpoint (Z1) emulated with an int3 where the debug
// registers do not trap; it is reported as a hardware breakpoint. Tracepoint: a running trace
// experiment's site (its hits are collected, never reported).
enum class BreakpointOwner { Client, ClientHardware, Internal, Tracepoint };

class SoftwareBreakpoints {
 public:
  static constexpr uint8_t kInt3 = 0xcc;

  Result<void> insert(const ProcMemory& mem, uint64_t addr, BreakpointOwner owner);
  Result<void> remove(const ProcMemory& mem, uint64_t addr, BreakpointOwner owner);

  bool contains(uint64_t addr) const { return table_.count(addr) != 0; }
  // Any breakpoint (of anyone's) in [begin, end); any of the client's there.
  bool any_in(uint64_t begin, uint64_t end) const {
    auto it = table_.lower_bound(begin);
    return it != table_.end() && it->first < end;
  }
  bool any_client_in(uint64_t begin, uint64_t end) const;
  // Whether an int3 of ours has ever been at addr (a trap reported after its removal is ours).
  bool ever_inserted(uint64_t addr) const { return history_.count(addr) != 0; }
  bool has_client(uint64_t addr) const;  // Client or ClientHardware
  bool has(uint64_t addr, BreakpointOwner owner) const;
  // Only emulated hardware breakpoints of the client there: report the stop as a hardware one.
  bool client_is_hardware(uint64_t addr) const;
  bool empty() const { return table_.empty(); }

  // Step-over support: put the original byte back for a moment, then the int3 again. An
  // address stays lifted until lower(), whoever removes and inserts a breakpoint there meanwhile
  // (else a thread stepping the original instruction would meet a fresh int3 there).
  Result<void> lift(const ProcMemory& mem, uint64_t addr);
  Result<void> lower(const ProcMemory& mem, uint64_t addr);

  // Reads: replace our int3s in `buf` (read from addr) by the original bytes.
  void unshadow(uint64_t addr, std::span<uint8_t> buf) const;
  // Writes: record the new original bytes under our breakpoints and keep the int3s in `buf`.
  void shadow_write(uint64_t addr, std::span<uint8_t> buf);

  // Restores every original byte (detach) and forgets the table.
  void restore_all(const ProcMemory& mem);
  // Writes original bytes into another address space (a fork child got copies of our int3s).
  void restore_into(const ProcMemory& other) const;
  // Puts all int3s back (after restore_into on a shared vfork address space).
  void reinsert_all(const ProcMemory& mem) const;
  // While a vfork child runs in this memory (from the vfork event, after restore_into, to
  // vforkdone, before reinsert_all), no int3 may be written: a child that met one would die of
  // SIGTRAP. The table still changes (the parent is resumed with its next stop armed); memory
  // keeps every original byte until reinsert_all.
  void set_shared_with_vfork_child(bool shared) { held_ = shared; }
  // Forgets everything without touching memory (after exec the old image is gone).
  void clear() {
    table_.clear();
    history_.clear();
    lifted_removed_.clear();
    held_ = false;
  }

 private:
  struct Entry {
    uint8_t original = 0;
    int client_refs = 0;
    int hardware_refs = 0;
    int internal_refs = 0;
    int tracepoint_refs = 0;
    bool lifted = false;
  };
  static int& refs_of(Entry& e, BreakpointOwner owner);
  std::map<uint64_t, Entry> table_;
  std::set<uint64_t> history_;  // bounded by the code's distinct breakpoint addresses
  std::set<uint64_t> lifted_removed_;  // removed while lifted: still lifted until lower()
  bool held_ = false;                  // set_shared_with_vfork_child: memory is not written
};

}  // namespace backend
