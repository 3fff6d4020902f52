// A `rep movs` or `rep stos` that a signal interrupted halfway: the CPU leaves rip at the
// instruction with rcx, rsi and rdi advanced by the iterations done. A replay reaches that pc
// with the branch count recorded but before any iteration (iterations are not branches); it
// runs the missing iterations here (registers and memory, as the CPU would) until the
// registers are the recorded ones, then delivers the signal. rr single-steps the instruction
// instead; without its registers (the trace keeps a digest) the count of iterations is found by
// trying each. Pure functions over registers and a memory interface: unit-tested.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

namespace backend {

struct RepString {
  enum class Op : uint8_t { Movs, Stos };
  Op op = Op::Movs;
  uint8_t size = 1;  // bytes per element: 1, 2, 4, 8
  uint8_t len = 0;   // of the instruction
};

// `rep movs{b,w,d,q}` or `rep stos{b,w,d,q}` at the start of `code` (f3, then optionally 66 and
// a REX prefix); nullopt for anything else, the address-size and segment-override forms too.
std::optional<RepString> decode_rep_string(std::span<const uint8_t> code);

// The registers after k more iterations (k <= rcx): rcx down by k, rdi (and rsi for movs) by
// k elements up, or down when DF is set; rip stays while iterations are left, else the next
// instruction.
user_regs_struct after_iterations(const RepString& s, const user_regs_struct& regs, uint64_t k);

// The memory the program can be read and written through; false: not accessible.
struct ProgramMemory {
  std::function<bool(uint64_t addr, std::span<uint8_t> out)> read;
  std::function<bool(uint64_t addr, std::span<const uint8_t> in)> write;
};

// Does what k iterations from `regs` write, element after element as the CPU does (an
// overlapping forward copy repeats its pattern). false when memory was not accessible (the
// program would have faulted).
bool run_iterations(const RepString& s, const user_regs_struct& regs, uint64_t k, const ProgramMemory& mem);

// The fewest iterations (1..min(rcx, limit)) whose registers `wanted` accepts; nullopt if none.
std::optional<uint64_t> iterations_until(const RepString& s, const user_regs_struct& regs, uint64_t limit,
                                         const std::function<bool(const user_regs_struct&)>& wanted);

}  // namespace backend
