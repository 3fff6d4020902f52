// The recipe the access decoder keeps per decoded instruction: its bytes and length, up to three
// accesses as address terms with size and kind, and its effects on a run-ahead walk. build()
// turns capstone's decoding into the accesses; the rules: docs/watch-emulation.md. Internal to
// backend/x86/ (access decoder), not part of its public interface.
#pragma once

#include <capstone/capstone.h>

#include <cstddef>
#include <cstdint>
#include <iterator>

#include "backend/x86/address_term.h"
#include "backend/x86/insn_effects.h"

namespace backend {
struct CpuQuirks;
}  // namespace backend

namespace backend::access {

constexpr size_t kMaxInsnLen = 15;  // the CPU raises #UD for longer instructions

struct AccessRecipe {
  Term at;
  uint32_t size = 0;
  bool read = false;
  bool write = false;
};

struct Recipe {
  uint8_t bytes[kMaxInsnLen] = {};
  uint8_t len = 0;
  bool exact = true;
  uint8_t count = 0;
  uint8_t rep_width = 0;  // rep-prefixed string op: bytes of rcx that count; 0 = no rep
  AccessRecipe acc[3];
  Effects fx;

  void add(const Term& t, uint32_t size, bool read, bool write) {
    if (count < std::size(acc)) acc[count++] = AccessRecipe{t, size, read, write};
    else exact = false;  // cannot happen with build()'s rules; never report a partial list
  }
};

// Builds the recipe for the instruction capstone decoded into `insn`.
void build(csh handle, const cs_insn& insn, const CpuQuirks& quirks, Recipe& r);

}  // namespace backend::access
