// x86 hardware breakpoints and watchpoints: 4 address slots (DR0-3) and the DR7 control word,
// the same for every thread of the process (applied to new threads when they appear).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>

#include "backend/error.h"

namespace backend {

enum class HwKind { Execute, Write, Read, Access };

struct HwHit {
  HwKind kind = HwKind::Execute;
  uint64_t addr = 0;  // the address the client inserted (start of the watched region)
};

class DebugRegisters {
 public:
  static constexpr int kSlots = 4;

  // Reserves slots for [addr, addr+len). Watch regions are split into aligned 1/2/4/8-byte
  // pieces; fails with ENOSPC when the slots run out, EINVAL for a bad length.
  Result<void> insert(HwKind kind, uint64_t addr, uint64_t len);
  Result<void> remove(HwKind kind, uint64_t addr, uint64_t len);
  bool empty() const;
  bool contains(HwKind kind, uint64_t addr) const;  // a region of that kind starts at addr
  void clear() { slots_ = {}; }

  uint64_t dr7() const;
  // Writes DR0-3 and DR7 into a stopped thread.
  Result<void> apply(pid_t tid) const;
  // Disables everything in a thread (detach, fork children).
  static void clear_thread(pid_t tid);
  // Reads DR6 of a stopped thread; returns the slot that fired, if any, and clears DR6.
  std::optional<HwHit> take_hit(pid_t tid) const;
  // DR6 of a thread (raw), for classifying single steps (bit 14, BS).
  static uint64_t read_dr6(pid_t tid);
  // Zeroes DR6 (before a PTRACE_SINGLEBLOCK: the kernel never clears DR6.BS itself).
  static void clear_dr6(pid_t tid);

 private:
  struct Slot {
    bool used = false;
    HwKind kind = HwKind::Execute;
    uint64_t addr = 0;        // slot address (aligned piece)
    uint64_t len = 1;
    uint64_t region = 0;      // start of the client's region
    uint64_t region_len = 0;
    int refs = 0;
  };
  std::array<Slot, kSlots> slots_{};
};

}  // namespace backend
