// What one instruction does to a run_ahead walk: whether it can leave the straight line, and
// which GPRs it writes (followed exactly, or made unknown); and the walk's register model that
// applies it. The rules are at the top of insn_effects.cc. Internal to backend/x86/ (access
// decoder), not part of its public interface.
#pragma once

#include <sys/user.h>

#include <capstone/capstone.h>

#include <cstdint>

#include "backend/x86/address_term.h"
#include "backend/x86/gpr_slot.h"

namespace backend::access {

// How an instruction leaves the straight line.
enum class Flow : uint8_t {
  Falls,    // continues at the next instruction (or faults: a signal, which the caller handles)
  Branch,   // may go elsewhere, traps on purpose or never completes: the walk stops (ControlFlow)
  Unusual,  // falls through but changes state the walk does not model (segment bases, TF...):
            // the walk stops (Unknown)
};

// A register update the walk follows exactly; every other written GPR becomes unknown.
enum class Track : uint8_t {
  None,
  AddImm,  // dst += imm (width 4: the 32-bit result, zero-extended)
  AndImm,  // dst &= imm (width 4: zero-extended): stack realignment (and rsp, -16)
  SetImm,  // dst = imm (already zero-extended for width 4)
  Copy,    // dst = src (width 4: src's low 32 bits, zero-extended)
  Lea,     // dst = the address `value` computes, no segment base (width 4: its low 32 bits)
  Enter,   // enter imm, 0: rbp = rsp - 8; rsp = rsp - 8 - imm
  Leave,   // leave: rsp = rbp + 8 (rbp itself is loaded from memory: in clobber)
};

// The compact per-instruction summary the walk applies after each walked instruction.
struct Effects {
  Flow flow = Flow::Falls;
  Track track = Track::None;
  uint8_t dst = kNoReg, src = kNoReg;
  uint8_t width = 8;
  uint16_t clobber = 0;  // GPRs (bit = slot) that may be written and are not followed by `track`
  int64_t imm = 0;
  Term value;  // Track::Lea
};

// The effects of the instruction capstone decoded into `insn`.
void build_effects(const cs_insn& insn, Effects& e);

// Every register the term uses is known (bit = slot in `known`; rip always is). Inline: it is
// checked for every access of every walked instruction.
inline bool term_known(const Term& t, uint16_t known) {
  if (t.base != kNoReg && t.base != kRip && !(known & bit(t.base))) return false;
  return t.index == kNoReg || (known & bit(t.index));
}

// Applies a walked instruction's effects to the model (regs + known).
void apply(const Effects& e, user_regs_struct& regs, uint16_t& known);

}  // namespace backend::access
