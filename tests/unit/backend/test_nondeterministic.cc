// The instructions record/replay takes results of (backend/x86/nondeterministic.h): decoding
// from bytes, the registers and flags a result leaves, and BlockCache ending blocks at them
// when asked to (and only then).
#include <capstone/capstone.h>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "backend/x86/block_cache.h"
#include "backend/x86/nondeterministic.h"

using namespace backend;
using Kind = NondeterministicInsn::Kind;

namespace {

std::optional<NondeterministicInsn> decode(std::vector<uint8_t> bytes) {
  bytes.resize(bytes.size() + 4, 0x90);  // what follows in memory
  return nondeterministic_insn(bytes);
}

// The block at `start` ends at a Trap of `len` bytes at `at` (a stop before that instruction).
void check_trap_end(BlockCache& cache, uint64_t start, uint64_t at, uint8_t len) {
  auto b = cache.block_at(start);
  REQUIRE(b.ok());
  CHECK(b->end.addr == at);
  CHECK(b->end.kind == FlowKind::Trap);
  CHECK(b->end.len == len);
}

// The block at `start` runs to the `ret` (nothing stops it before).
void check_return_end(BlockCache& cache, uint64_t start) {
  auto b = cache.block_at(start);
  REQUIRE(b.ok());
  CHECK(b->end.kind == FlowKind::Return);
}

// Reads `bytes` as code at `base` (nothing elsewhere).
CodeReader code_at(const std::vector<uint8_t>& bytes, uint64_t base) {
  return [&bytes, base](uint64_t addr, std::span<uint8_t> out) -> size_t {
    if (addr < base || addr >= base + bytes.size()) return 0;
    size_t n = std::min<size_t>(out.size(), base + bytes.size() - addr);
    std::memcpy(out.data(), bytes.data() + (addr - base), n);
    return n;
  };
}

}  // namespace

TEST_CASE("nondeterministic instructions: decoded with their destination and size", "[nondet]") {
  struct Case { std::vector<uint8_t> bytes; Kind kind; uint8_t len, reg, size; const char* what; };
  std::vector<Case> cases = {
      {{0x0f, 0xa2}, Kind::Cpuid, 2, 0, 0, "cpuid"},
      {{0x0f, 0xc7, 0xf0}, Kind::Rdrand, 3, 0, 4, "rdrand %eax"},
      {{0x48, 0x0f, 0xc7, 0xf0}, Kind::Rdrand, 4, 0, 8, "rdrand %rax"},
      {{0x66, 0x0f, 0xc7, 0xf3}, Kind::Rdrand, 4, 3, 2, "rdrand %bx"},
      {{0x49, 0x0f, 0xc7, 0xf0}, Kind::Rdrand, 4, 8, 8, "rdrand %r8"},
      {{0x41, 0x0f, 0xc7, 0xf7}, Kind::Rdrand, 4, 15, 4, "rdrand %r15d"},
      {{0x48, 0x0f, 0xc7, 0xf9}, Kind::Rdseed, 4, 1, 8, "rdseed %rcx"},
      {{0x0f, 0xc7, 0xfa}, Kind::Rdseed, 3, 2, 4, "rdseed %edx"},
      {{0xf3, 0x0f, 0xc7, 0xf8}, Kind::Rdpid, 4, 0, 8, "rdpid %rax"},
      {{0xf3, 0x41, 0x0f, 0xc7, 0xfc}, Kind::Rdpid, 5, 12, 8, "rdpid %r12"},
      {{0x49, 0x66, 0x0f, 0xc7, 0xf0}, Kind::Rdrand, 5, 0, 2, "rex.wb data16 rdrand: a REX before a prefix is ignored"},
      {{0x2e, 0x0f, 0xa2}, Kind::Cpuid, 3, 0, 0, "cs cpuid"},
      {{0x0f, 0x31}, Kind::Rdtsc, 2, 0, 0, "rdtsc"},
      {{0x0f, 0x01, 0xf9}, Kind::Rdtscp, 3, 0, 0, "rdtscp"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto d = decode(c.bytes);
    REQUIRE(d);
    CHECK(d->kind == c.kind);
    CHECK(d->len == c.len);
    if (c.kind != Kind::Cpuid) {
      CHECK(d->reg == c.reg);
      CHECK(d->size == c.size);
    }
  }
}

TEST_CASE("nondeterministic instructions: what shares their opcodes is not one", "[nondet]") {
  std::vector<std::pair<std::vector<uint8_t>, const char*>> others = {
      {{0x0f, 0xc7, 0x0f}, "cmpxchg8b (%rdi)"},
      {{0x48, 0x0f, 0xc7, 0x0e}, "cmpxchg16b (%rsi)"},
      {{0x0f, 0xc7, 0x30}, "vmptrld (%rax): /6 with a memory operand"},
      {{0x0f, 0xc7, 0x38}, "vmptrst (%rax): /7 with a memory operand"},
      {{0xf3, 0x0f, 0xc7, 0xf0}, "senduipi %rax (f3 /6)"},
      {{0xf2, 0x0f, 0xc7, 0xf0}, "f2 0f c7 /6"},
      {{0xf0, 0x0f, 0xc7, 0xf0}, "lock rdrand (#UD)"},
      {{0x0f, 0x01, 0xf8}, "swapgs (0f 01, not rdtscp's f9)"},
      {{0x0f, 0x01}, "a 0f 01 cut short"},
      {{0x0f, 0x05}, "syscall"},
      {{0x0f}, "a lone 0f"},
      {{0x90}, "nop"},
  };
  for (const auto& [bytes, what] : others) {
    INFO(what);
    CHECK_FALSE(nondeterministic_insn(bytes));
  }
}

TEST_CASE("nondeterministic instructions: a result leaves registers as the CPU would", "[nondet]") {
  user_regs_struct regs{};
  regs.rip = 0x1000;
  regs.rax = 0xffffffffffffffffULL;
  regs.rbx = 0x1111222233334444ULL;
  regs.rcx = 0x7;
  regs.eflags = 0x202 | 0x8c4;  // IF, and OF SF ZF PF set
  SECTION("cpuid writes four zero-extended registers") {
    auto insn = decode({0x0f, 0xa2});
    REQUIRE(insn);
    CHECK(input_of(*insn, regs) == (0xffffffffULL | (7ULL << 32)));
    NondeterministicResult r{{0x16, 0x756e6547, 0x6c65746e, 0x49656e69}};
    apply_result(*insn, r, regs);
    CHECK(regs.rax == 0x16);
    CHECK(regs.rbx == 0x756e6547);
    CHECK(regs.rcx == 0x6c65746e);
    CHECK(regs.rdx == 0x49656e69);
    CHECK(regs.rip == 0x1002);
    CHECK(regs.eflags == (0x202 | 0x8c4));  // untouched
  }
  SECTION("rdrand into a 32-bit register zero-extends, sets CF and clears the rest") {
    auto insn = decode({0x0f, 0xc7, 0xf3});  // rdrand %ebx
    REQUIRE(insn);
    apply_result(*insn, NondeterministicResult{{0xaaaabbbbccccddddULL, 1}}, regs);
    CHECK(regs.rbx == 0xccccddddULL);
    CHECK((regs.eflags & 0x8d5) == 1);
    CHECK((regs.eflags & 0x200) != 0);
    CHECK(regs.rip == 0x1003);
  }
  SECTION("a 16-bit destination keeps the upper bits; a failed rdseed clears CF") {
    auto insn = decode({0x66, 0x0f, 0xc7, 0xfb});  // rdseed %bx
    REQUIRE(insn);
    regs.eflags |= 1;
    apply_result(*insn, NondeterministicResult{{0, 0}}, regs);
    CHECK(regs.rbx == 0x1111222233330000ULL);
    CHECK((regs.eflags & 0x8d5) == 0);
  }
  SECTION("rdtsc splits its count into edx:eax, zero-extended; rdtscp adds TSC_AUX in ecx") {
    auto insn = decode({0x0f, 0x31});
    REQUIRE(insn);
    CHECK(input_of(*insn, regs) == 0);
    apply_result(*insn, NondeterministicResult{{0x0000123487654321ULL}}, regs);
    CHECK(regs.rax == 0x87654321ULL);
    CHECK(regs.rdx == 0x1234);
    CHECK(regs.rcx == 7);
    CHECK(regs.rip == 0x1002);
    auto p = decode({0x0f, 0x01, 0xf9});
    REQUIRE(p);
    apply_result(*p, NondeterministicResult{{0xffffffff00000001ULL, 0, 0x8000000000000003ULL}}, regs);
    CHECK(regs.rax == 1);
    CHECK(regs.rdx == 0xffffffffULL);
    CHECK(regs.rcx == 3);
    CHECK(regs.rip == 0x1005);
    CHECK(regs.eflags == (0x202 | 0x8c4));
  }
  SECTION("rdpid writes 64 bits and no flags") {
    auto insn = decode({0xf3, 0x0f, 0xc7, 0xf9});  // rdpid %rcx
    REQUIRE(insn);
    apply_result(*insn, NondeterministicResult{{3}}, regs);
    CHECK(regs.rcx == 3);
    CHECK(regs.eflags == (0x202 | 0x8c4));
  }
}

TEST_CASE("nondeterministic instructions: cpuid runs here", "[nondet]") {
  user_regs_struct regs{};  // leaf 0: the highest leaf and the vendor
  auto r = execute_here(*decode({0x0f, 0xa2}), regs);
  REQUIRE(r);
  CHECK(r->value[0] >= 1);
  char vendor[13] = {};
  std::memcpy(vendor, &r->value[1], 4);
  std::memcpy(vendor + 4, &r->value[3], 4);
  std::memcpy(vendor + 8, &r->value[2], 4);
  CHECK((std::string(vendor) == "GenuineIntel" || std::string(vendor) == "AuthenticAMD" ||
         std::string(vendor).size() == 12));
}

TEST_CASE("decoder: nondeterministic instructions end a block only when asked", "[decoder][nondet]") {
  std::vector<uint8_t> bytes = {0x48, 0x89, 0xd8,        // mov %rbx,%rax
                                0x0f, 0xa2,              // cpuid
                                0x48, 0x0f, 0xc7, 0xf0,  // rdrand %rax
                                0xc3};                   // ret
  const uint64_t base = 0x400000;
  BlockCache cache(code_at(bytes, base));
  check_return_end(cache, base);
  auto one = cache.insn_at(base + 3);
  REQUIRE(one.ok());
  CHECK_FALSE(one->second);

  cache.set_stop_at_nondeterministic(true);
  check_trap_end(cache, base, base + 3, 2);
  check_trap_end(cache, base + 5, base + 5, 4);
  auto insn = cache.insn_at(base + 5);
  REQUIRE(insn.ok());
  REQUIRE(insn->second);
  CHECK(insn->second->kind == FlowKind::Trap);
  check_return_end(cache, base + 9);
}

TEST_CASE("decoder: rdtsc and rdtscp end a block when asked (hosts that ignore PR_SET_TSC)", "[decoder][nondet]") {
  std::vector<uint8_t> bytes = {0x0f, 0x31,        // rdtsc
                                0x0f, 0x01, 0xf9,  // rdtscp
                                0xc3};             // ret
  const uint64_t base = 0x400000;
  BlockCache cache(code_at(bytes, base));
  check_return_end(cache, base);
  cache.set_stop_at_nondeterministic(true);
  check_trap_end(cache, base, base, 2);
  check_trap_end(cache, base + 2, base + 2, 3);
}

TEST_CASE("nondeterministic instructions: agree with capstone on random prefixed 0f c7 / 0f a2", "[nondet]") {
  csh handle = 0;
  REQUIRE(cs_open(CS_ARCH_X86, CS_MODE_64, &handle) == CS_ERR_OK);
  cs_insn* insn = cs_malloc(handle);
  std::mt19937 rng(1234);
  const uint8_t prefixes[] = {0x66, 0x67, 0xf2, 0xf3, 0x2e, 0x3e, 0x64, 0x65, 0x40, 0x41, 0x48, 0x49, 0x4c};
  int found = 0;
  for (int i = 0; i < 200000; ++i) {
    std::vector<uint8_t> bytes;
    for (int p = static_cast<int>(rng() % 3); p > 0; --p) bytes.push_back(prefixes[rng() % sizeof prefixes]);
    bytes.push_back(0x0f);
    bytes.push_back(rng() % 8 ? 0xc7 : 0xa2);
    for (int k = 0; k < 6; ++k) bytes.push_back(static_cast<uint8_t>(rng()));
    const uint8_t* code = bytes.data();
    size_t size = bytes.size();
    uint64_t addr = 0x1000;
    bool decoded = cs_disasm_iter(handle, &code, &size, &addr, insn);
    auto ours = nondeterministic_insn(bytes);
    bool cs_ours = decoded && (insn->id == X86_INS_CPUID || insn->id == X86_INS_RDRAND || insn->id == X86_INS_RDSEED);
    INFO(fmt::format("{:02x}", fmt::join(bytes, " ")) << " capstone: " << (decoded ? insn->mnemonic : "(none)"));
    // f2/f3 before 0f c7 make other instructions (rdpid, senduipi) or #UD: rdrand and rdseed
    // are "NFx" in Intel's manual; capstone 4 decodes them as if the prefix were not there.
    bool nfx = std::find(bytes.begin(), bytes.end() - 8, 0xf2) != bytes.end() - 8 ||
               std::find(bytes.begin(), bytes.end() - 8, 0xf3) != bytes.end() - 8;
    if (nfx && bytes[bytes.size() - 7] == 0xc7) {
      if (ours) CHECK(ours->kind == Kind::Rdpid);
      continue;
    }
    if (cs_ours) {  // every one capstone knows is ours, with its length
      REQUIRE(ours);
      CHECK(ours->len == insn->size);
      CHECK(ours->kind == (insn->id == X86_INS_CPUID    ? Kind::Cpuid
                           : insn->id == X86_INS_RDRAND ? Kind::Rdrand
                                                        : Kind::Rdseed));
      ++found;
    } else if (ours) {  // ours and not capstone's: only rdpid (capstone 4 does not know it)
      CHECK(ours->kind == Kind::Rdpid);
    }
  }
  CHECK(found > 1000);
  cs_free(insn, 1);
  cs_close(&handle);
}
