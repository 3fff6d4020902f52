// Instruction lengths for encodings capstone 4 cannot decode: VEX and EVEX (the AVX-512 mask
// and compare instructions glibc's *_evex string functions are made of: kmovd, kortestd,
// vpcmpub, vptestnmb, vpternlogd, ...) and the 0F 01 register forms (rdpkru, wrpkru). None of
// them transfers control, so the length is all that block decoding needs; where a memory
// operand is [rip+disp32], disp_offset says where the displacement is so that a displaced copy
// can be re-targeted.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace backend {

struct X86Length {
  uint8_t len = 0;
  bool rip_relative = false;  // a [rip+disp32] operand
  uint8_t disp_offset = 0;    // its disp32's offset in the instruction (0: cannot be relocated)
};

// The length of the VEX/EVEX/0F 01-register instruction at the start of code; nullopt when it
// is none of those, is malformed, or is cut short.
std::optional<X86Length> extended_insn_length(std::span<const uint8_t> code);

}  // namespace backend
