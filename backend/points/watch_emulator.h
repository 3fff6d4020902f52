// Watchpoints without debug registers, for hosts whose hypervisor accepts DR0-3/DR7 but never
// delivers the trap (the probe tells). The client's Z2/Z3/Z4 regions are kept here with the
// same slot accounting as the four debug registers, so a client meets the same limits as on
// hardware. A thread that runs while any region is set is single-stepped by LinuxProcess:
// prepare() computes, before each step, what the instruction about to run will access
// (x86/access_decoder.h); check() matches that against the regions after the step. The stop therefore
// comes after the instruction, with the region's start address, as a DR7 trap would report it.
// Read watchpoints are exact here (x86 hardware can only watch reads together with writes).
#pragma once

#include <sys/user.h>

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "backend/points/debug_registers.h"
#include "backend/error.h"
#include "backend/x86/access_decoder.h"

namespace backend {

// A client's watched region as the emulator keeps it (Execute slots are not regions).
struct WatchedRange {
  HwKind kind = HwKind::Write;
  uint64_t addr = 0, len = 0;
  bool operator==(const WatchedRange&) const = default;
};

struct WatchHit {
  HwKind kind = HwKind::Write;  // the kind of the region that fired (Write, Read or Access)
  uint64_t addr = 0;            // the region's start, as the client inserted it
};

class WatchEmulator {
 public:
  // Reads inferior memory as the program sees it (breakpoint shadows removed); false if short.
  using Reader = std::function<bool(uint64_t addr, std::span<uint8_t> out)>;

  // Accesses are computed as this machine's CPU makes them (its vendor's quirks).
  WatchEmulator();

  // What one single step of a thread will access, computed before the step.
  struct Step {
    bool exact = false;                  // accesses computed; else the snapshots are compared
    std::vector<MemAccess> accesses;
    std::vector<std::vector<uint8_t>> snapshots;  // per region (inexact steps only)
  };

  // Same limits as DR0-3: ENOSPC when the pieces do not fit in four slots, EINVAL for a bad
  // length. An execute breakpoint takes a slot only (its int3 is the caller's business).
  Result<void> insert(HwKind kind, uint64_t addr, uint64_t len);
  Result<void> remove(HwKind kind, uint64_t addr, uint64_t len);
  bool active() const { return !regions_.empty(); }
  std::vector<WatchedRange> ranges() const;
  void clear();

  // Before a step. `exact_allowed` is false when the step delivers a signal: the instruction at
  // rip may not run at all, so only a change of the watched bytes counts.
  Step prepare(const user_regs_struct& regs, bool exact_allowed, const Reader& read);
  // After the step: the first region the step touched in a way its kind watches.
  std::optional<WatchHit> check(const Step& step, const Reader& read) const;
  // How far a thread at regs.rip may run unchecked: the straight-line code from there whose
  // accesses are all computable now and touch no region (AccessDecoder::run_ahead). The
  // caller runs to `stop` and checks that instruction with a step.
  RunAhead run_ahead(const user_regs_struct& regs, const CodeBytesReader& read);
  // Would this access fire one of the regions?
  bool touches(const MemAccess& access) const;

  // Code was written (or the image replaced): forget what was decoded there.
  void invalidate_code(uint64_t addr, uint64_t len);
  void forget_code();


 private:
  struct Region {
    HwKind kind = HwKind::Write;
    uint64_t addr = 0, len = 0;
    int refs = 0;
  };
  struct Code {
    std::array<uint8_t, 16> bytes{};
    uint8_t size = 0;
  };
  std::vector<std::vector<uint8_t>> snapshot(const Reader& read) const;
  const Code& code_at(uint64_t pc, const Reader& read);

  DebugRegisters slots_;  // accounting only: never applied to a thread
  std::vector<Region> regions_;
  AccessDecoder decoder_;
  std::unordered_map<uint64_t, Code> code_;  // instruction bytes by address (cleared on writes)
};

}  // namespace backend
