// Instructions whose results differ from run to run (or machine to machine) and that no fault
// can be asked to catch everywhere: cpuid (CPUID faulting is Intel-only and absent from most
// guests), rdrand, rdseed, rdpid, and rdtsc/rdtscp (PR_SET_TSC makes them fault on most hosts,
// but some hypervisors ignore it: seen on AMD EPYC guests). A recording takes their results and
// a replay gives them back (docs/record-replay.md); this decodes them from bytes and says what
// they write.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <optional>
#include <span>

namespace backend {

struct NondeterministicInsn {
  enum class Kind : uint8_t { Cpuid = 0, Rdrand = 1, Rdseed = 2, Rdpid = 3, Rdtsc = 4, Rdtscp = 5 };
  Kind kind = Kind::Cpuid;
  uint8_t len = 0;
  uint8_t reg = 0;    // rdrand/rdseed/rdpid: destination register number (0 rax ... 15 r15)
  uint8_t size = 0;   // its operand size in bytes: 2, 4 or 8 (rdpid: 8)
};

// rdtsc or rdtscp: recorded and replayed as `rdtsc` events (what PR_SET_TSC's trap gives too).
inline bool is_tsc(const NondeterministicInsn& insn) {
  return insn.kind == NondeterministicInsn::Kind::Rdtsc || insn.kind == NondeterministicInsn::Kind::Rdtscp;
}

// The instruction at the start of `code`, when it is one of the above (prefixes and REX
// included in len); nullopt for anything else (cmpxchg8b/16b share 0f c7 with a memory operand).
std::optional<NondeterministicInsn> nondeterministic_insn(std::span<const uint8_t> code);

// What the instruction produced, as recorded: cpuid's eax, ebx, ecx, edx; rdtsc's edx:eax as
// value[0] (rdtscp's TSC_AUX in value[2]); for the others value[0] the destination's value and
// value[1] the carry flag (1: a valid value).
struct NondeterministicResult {
  uint64_t value[4] = {};
};

// Runs it here, in this process, for the registers the program had (cpuid's leaf and subleaf
// from rax/rcx). nullopt when this CPU lacks the instruction (the program's own attempt
// raises SIGILL as it would natively).
std::optional<NondeterministicResult> execute_here(const NondeterministicInsn& insn, const user_regs_struct& regs);

// The program's registers after the instruction with `result`: destinations written as the
// CPU writes them (a 32-bit destination zero-extended, a 16-bit one merged), rdrand/rdseed's
// flags (CF the result, OF SF ZF AF PF cleared), rip past the instruction.
void apply_result(const NondeterministicInsn& insn, const NondeterministicResult& result, user_regs_struct& regs);

// What the instruction read, to check a replay against its recording: cpuid's leaf and
// subleaf (eax | ecx << 32); rdtsc, rdtscp: 0; for the others the destination (reg | size << 8).
uint64_t input_of(const NondeterministicInsn& insn, const user_regs_struct& regs);

const char* kind_name(NondeterministicInsn::Kind kind);

}  // namespace backend
