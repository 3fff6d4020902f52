// Where capstone 4 and the CPU disagree: memory operand sizes it reports wrong, encodings it
// decodes differently from the CPU, and decodings a run-ahead walk cannot go past. Found by the
// CPU sweeps in tests/unit/backend/test_access_decoder_sweep.cc and test_run_ahead.cc.
// Internal to backend/x86/ (access decoder), not part of its public interface.
#pragma once

#include <capstone/capstone.h>

#include <cstdint>
#include <string_view>

namespace backend::access {

// capstone 4 gets some memory operand sizes wrong (found by the CPU sweep in
// test_access_decoder_sweep.cc): scalar EVEX arithmetic and (v)comiss/sd say 16 bytes, EVEX
// vmovq says 16, and the 8:1 widening/narrowing moves say 16 where the CPU touches 8. Returns
// the size the CPU really uses for the memory operand at position mem_index.
uint32_t corrected_size(unsigned id, std::string_view name, const cs_x86& x, int mem_index, uint32_t size);

// Where capstone 4 and the CPU may disagree on the instruction or its memory operand (found
// by the random sweep in test_run_ahead.cc): decode() gives exact=false, run_ahead stops.
// - a 66/f2/f3 prefix followed by another legacy prefix: the CPU still takes it as the
//   mandatory prefix, capstone 4 may not (f2 67 0f 2c is cvttsd2si r32 to the CPU, cvttps2pi
//   to capstone). The ubiquitous padding nops (66 2e 0f 1f ...) are exempt: a nop either way.
// - a REX byte that is not right before the opcode (the CPU ignores it);
// - a memory operand whose base does not follow from ModRM/SIB (capstone 4 decodes some 0x67
//   EVEX forms with mod=00 rm=101, [eip+disp32] to the CPU, as [rbp] and misses the disp32).
bool misdecoded(const cs_insn& insn);

// Decodings decode() describes correctly for one step but a walk cannot go past:
// - f2/f3 on a string instruction: a rep the CPU honours (f2 a5 is rep movs) even where
//   capstone 4 drops the prefix; continued, it runs every iteration;
// - EVEX embedded rounding / SAE: capstone 4 takes one byte too many (the rounding control
//   as an immediate), so the next instruction would start at the wrong byte.
bool unwalkable(const cs_insn& insn, bool string_insn);

}  // namespace backend::access
