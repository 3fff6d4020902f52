// The harness that runs AccessDecoder against the real CPU (test_access_decoder_table.cc and
// test_access_decoder_sweep.cc). Each entry is one instruction plus a register setup;
// a forked child runs it under ptrace for exactly one single step, over and over with different
// page protections, and the decoder's answer must explain what the CPU did:
// - with the scratch pages writable (filled once with a pattern and once with its complement,
//   so every byte the CPU writes changes in at least one of the two runs): every changed byte
//   lies in a computed write, and (unless the entry writes only part of its operand, e.g. a
//   masked store) every byte of a computed write changed;
// - with all pages PROT_NONE, then all PROT_READ, then each page alone PROT_NONE and alone
//   PROT_READ: the step faults exactly when a computed access (a computed write, for
//   PROT_READ) touches a protected page, and the fault address lies in such an access. Entries
//   place their operands across page boundaries to pin down sizes this way.
// Entries whose result is intentionally a superset (the CPU may touch less) say so and are
// allowed to complete where a fault was expected.
#pragma once

#include <sys/user.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/x86/access_decoder.h"

namespace access_cpu {

using backend::AccessDecoder;
using backend::CpuQuirks;
using backend::InsnAccesses;
using backend::MemAccess;

constexpr uint64_t kPage = 4096;
constexpr int kPages = 3;
// Below 4 GiB, so the 0x67 (32-bit address) entries can reach the scratch area.
constexpr uint64_t kScratch = 0x20000000;
constexpr uint64_t kP0 = kScratch, kP1 = kScratch + kPage, kP2 = kScratch + 2 * kPage;
constexpr uint64_t kScratchEnd = kScratch + kPages * kPage;
constexpr uint64_t kCodePage = 0x30000000;
constexpr uint64_t kCode = kCodePage + 0x100;  // the instruction under test runs here
constexpr uint64_t kFar = kCodePage + 0x800;   // branch targets (never executed)

// The scratch fill: a hash of the offset, so a loaded value identifies where it came from.
uint8_t pattern(uint64_t addr, bool inverted);

enum class Prot : uint8_t { RW, None, Read };

// What an entry prepares: registers (GPRs, eflags, optionally fs_base/gs_base) and bytes that
// replace the pattern before the step (return addresses, selectors...).
struct Setup {
  user_regs_struct regs{};
  bool set_fs = false, set_gs = false;
  bool inverted = false;
  std::vector<std::pair<uint64_t, uint8_t>> pokes;

  uint8_t mem(uint64_t addr) const {
    for (auto it = pokes.rbegin(); it != pokes.rend(); ++it)
      if (it->first == addr) return it->second;
    return pattern(addr, inverted);
  }
  uint64_t u64(uint64_t addr) const {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | mem(addr + i);
    return v;
  }
  void poke64(uint64_t addr, uint64_t v) {
    for (int i = 0; i < 8; ++i) pokes.emplace_back(addr + i, static_cast<uint8_t>(v >> (8 * i)));
  }
  void poke16(uint64_t addr, uint16_t v) {
    pokes.emplace_back(addr, static_cast<uint8_t>(v));
    pokes.emplace_back(addr + 1, static_cast<uint8_t>(v >> 8));
  }
  void fs(uint64_t base) { set_fs = true; regs.fs_base = base; }
  void gs(uint64_t base) { set_gs = true; regs.gs_base = base; }
};

struct StepResult {
  int signo = 0;
  uint64_t fault_addr = 0;
  user_regs_struct before{}, after{};
  user_fpregs_struct fp_after{};
  std::vector<uint8_t> memory;  // the scratch pages after the step (writable layouts only)
  uint64_t dr6 = 0;             // B0..B3: which watchpoints fired
};

// A hardware watchpoint on one aligned quadword: on writes only, or on any access.
struct Watch {
  uint64_t addr = 0;
  bool writes_only = false;
};

// A CPU feature an entry's instruction needs beyond x86-64 baseline (CPUID bits).
enum class Need { None, Avx2, Avx512, Sse41, Sse42, Movbe, F16c, Clflushopt, Clwb, Rdpid };

// Empty when the CPU has it, else the feature's name for the skip message.
std::string missing(Need n);

struct Entry;
using Post = std::function<void(const Entry&, const Setup&, const StepResult&, const InsnAccesses&)>;

struct Entry {
  const char* name;
  std::vector<uint8_t> bytes;
  // The expected access list: kind+size per access, in order ("R8 W8", "RW16", "" = none,
  // "?" = exact=false). The CPU decides addresses and sizes; this pins read vs write, which no
  // page protection can tell apart for a store.
  const char* shape;
  std::function<void(Setup&)> setup;
  Need need = Need::None;
  bool full_write = true;  // every computed written byte is really written
  bool superset = false;   // the CPU may touch less than computed (masked forms)
  bool advances = true;    // rip moves to the next instruction (not for branches and rep)
  Post post;
  // ENTER checks that the final rsp is writable (SDM: "#PF if a write using the final value of
  // the stack pointer would cause a page fault") without accessing it: a fault there is fine.
  std::function<uint64_t(const user_regs_struct&)> probe;

  Entry(const char* n, std::vector<uint8_t> b, const char* sh, std::function<void(Setup&)> st = {})
      : name(n), bytes(std::move(b)), shape(sh), setup(std::move(st)) {}
  Entry& needs(Need n) { need = n; return *this; }
  Entry& writes_part() { full_write = false; return *this; }  // bit ops, masked stores, failed cmpxchg
  Entry& may_touch_less() { superset = true; return *this; }
  Entry& stays() { advances = false; return *this; }  // branches, rep iterations
  Entry& then(Post p) { post = std::move(p); return *this; }
  Entry& write_probe(std::function<uint64_t(const user_regs_struct&)> f) { probe = std::move(f); return *this; }
};

// The access list as a table entry's shape ("R8 W8", "?" for exact=false).
std::string shape_of(const InsnAccesses& a);

// Runs the entry's instruction once in a fresh child with the scratch pages protected as given.
StepResult run_step(const Entry& e, const Setup& s, const Prot (&prot)[kPages], bool read_memory,
                    int vector_level, const std::vector<Watch>& watches = {});

// The entry's setup (registers, pokes) over the defaults, on the pattern or its complement.
Setup make_setup(const Entry& e, bool inverted);
// The entry's bytes padded with int3 to the 16 bytes a caller passes.
std::vector<uint8_t> code_bytes(const Entry& e);
std::string hex(uint64_t v);
std::string describe(const InsnAccesses& a);
bool in_access(uint64_t addr, const MemAccess& m);

// Where the CPU contradicts `acc` (computed for the entry's instruction and registers), given
// the bytes it changed with the scratch area writable; each item is a sentence.
std::vector<std::string> cpu_disagreements(const Entry& e, const InsnAccesses& acc,
                                           const std::vector<bool>& changed, int vector_level);

// The decoder models this machine's CPU, as the watch emulator does.
CpuQuirks host_quirks();

// Checks one table entry against the CPU (CHECKs and FAIL_CHECKs through Catch).
void check_entry(const Entry& e, int vector_level);

// 2 with AVX-512, 1 with AVX2, else 0: which vector state the child loads.
int vector_level();

}  // namespace access_cpu
