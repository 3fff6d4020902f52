// rep movs / rep stos finished by the replay up to a signal's recorded registers
// (backend/x86/rep_string.h): decoding, registers after k iterations, memory effects.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "backend/x86/rep_string.h"

using namespace backend;

namespace {

// A flat memory of `size` bytes at `base`, as the program's.
struct FakeMemory {
  uint64_t base;
  std::vector<uint8_t> bytes;
  ProgramMemory access() {
    return ProgramMemory{
        [this](uint64_t addr, std::span<uint8_t> out) {
          if (addr < base || addr + out.size() > base + bytes.size()) return false;
          std::memcpy(out.data(), bytes.data() + (addr - base), out.size());
          return true;
        },
        [this](uint64_t addr, std::span<const uint8_t> in) {
          if (addr < base || addr + in.size() > base + bytes.size()) return false;
          std::memcpy(bytes.data() + (addr - base), in.data(), in.size());
          return true;
        }};
  }
};

user_regs_struct regs_at(uint64_t rip, uint64_t rcx, uint64_t rsi, uint64_t rdi, uint64_t rax = 0, bool df = false) {
  user_regs_struct r{};
  r.rip = rip;
  r.rcx = rcx;
  r.rsi = rsi;
  r.rdi = rdi;
  r.rax = rax;
  r.eflags = 0x202 | (df ? 0x400 : 0);
  return r;
}

}  // namespace

TEST_CASE("rep string: the forms decoded, the others refused") {
  auto d = [](std::vector<uint8_t> b) { return decode_rep_string(b); };
  REQUIRE(d({0xf3, 0xa4}));
  CHECK(d({0xf3, 0xa4})->op == RepString::Op::Movs);
  CHECK(d({0xf3, 0xa4})->size == 1);
  CHECK(d({0xf3, 0xa4})->len == 2);
  CHECK(d({0xf3, 0xa5})->size == 4);
  CHECK(d({0x66, 0xf3, 0xa5})->size == 2);
  CHECK(d({0xf3, 0x48, 0xa5})->size == 8);
  CHECK(d({0xf3, 0x48, 0xa5})->len == 3);
  CHECK(d({0xf3, 0xaa})->op == RepString::Op::Stos);
  CHECK(d({0xf3, 0x48, 0xab})->size == 8);
  CHECK_FALSE(d({0xa4}));              // no rep
  CHECK_FALSE(d({0xf3, 0xac}));        // lods
  CHECK_FALSE(d({0xf3, 0xa6}));        // cmps (repe)
  CHECK_FALSE(d({0xf2, 0xae}));        // repne scas
  CHECK_FALSE(d({0xf3, 0x67, 0xa4}));  // 32-bit addresses
  CHECK_FALSE(d({0xf3, 0x64, 0xa4}));  // fs:
  CHECK_FALSE(d({0xf3}));
  CHECK_FALSE(d({}));
}

TEST_CASE("rep string: registers after k iterations, up and down") {
  RepString movsq = *decode_rep_string(std::vector<uint8_t>{0xf3, 0x48, 0xa5});
  auto r = after_iterations(movsq, regs_at(0x1000, 10, 0x2000, 0x3000), 4);
  CHECK(r.rcx == 6);
  CHECK(r.rsi == 0x2020);
  CHECK(r.rdi == 0x3020);
  CHECK(r.rip == 0x1000);  // iterations left: still at the instruction
  auto down = after_iterations(movsq, regs_at(0x1000, 10, 0x2000, 0x3000, 0, true), 4);
  CHECK(down.rsi == 0x2000 - 0x20);
  CHECK(down.rdi == 0x3000 - 0x20);
  auto all = after_iterations(movsq, regs_at(0x1000, 10, 0x2000, 0x3000), 10);
  CHECK(all.rcx == 0);
  CHECK(all.rip == 0x1003);
  RepString stosb = *decode_rep_string(std::vector<uint8_t>{0xf3, 0xaa});
  auto s = after_iterations(stosb, regs_at(0x1000, 5, 0x2000, 0x3000), 2);
  CHECK(s.rsi == 0x2000);  // stos leaves rsi
  CHECK(s.rdi == 0x3002);
}

TEST_CASE("rep string: memory as the CPU leaves it, overlapping copies included") {
  FakeMemory mem{0x1000, std::vector<uint8_t>(0x300)};
  for (size_t i = 0; i < 0x100; ++i) mem.bytes[i] = static_cast<uint8_t>(i);
  RepString movsb = *decode_rep_string(std::vector<uint8_t>{0xf3, 0xa4});
  REQUIRE(run_iterations(movsb, regs_at(0, 0x100, 0x1000, 0x1100), 0x40, mem.access()));
  for (size_t i = 0; i < 0x40; ++i) CHECK(mem.bytes[0x100 + i] == i);
  CHECK(mem.bytes[0x140] == 0);  // only k elements
  // Forward onto itself 3 bytes on: the first 3 bytes repeat, element after element.
  REQUIRE(run_iterations(movsb, regs_at(0, 0x20, 0x1000, 0x1003), 12, mem.access()));
  for (size_t i = 0; i < 15; ++i) CHECK(mem.bytes[i] == i % 3);
  // Backwards (DF): from the last element down.
  FakeMemory back{0x1000, std::vector<uint8_t>(0x20)};
  for (size_t i = 0; i < 8; ++i) back.bytes[i] = static_cast<uint8_t>(0x10 + i);
  REQUIRE(run_iterations(movsb, regs_at(0, 8, 0x1007, 0x1017, 0, true), 8, back.access()));
  for (size_t i = 0; i < 8; ++i) CHECK(back.bytes[0x10 + i] == 0x10 + i);
  // stosd fills with eax; a bad address fails.
  RepString stosd = *decode_rep_string(std::vector<uint8_t>{0xf3, 0xab});
  REQUIRE(run_iterations(stosd, regs_at(0, 100, 0, 0x1200, 0x11223344), 3, mem.access()));
  uint32_t word;
  std::memcpy(&word, mem.bytes.data() + 0x208, 4);
  CHECK(word == 0x11223344);
  CHECK(mem.bytes[0x20c] == 0);
  CHECK_FALSE(run_iterations(stosd, regs_at(0, 100, 0, 0x9000, 1), 3, mem.access()));
}

TEST_CASE("rep string: the fewest iterations the wanted registers take") {
  RepString movsb = *decode_rep_string(std::vector<uint8_t>{0xf3, 0xa4});
  auto start = regs_at(0x1000, 1000, 0x2000, 0x3000);
  auto k = iterations_until(movsb, start, 1 << 20, [](const user_regs_struct& r) { return r.rcx == 250; });
  REQUIRE(k);
  CHECK(*k == 750);
  CHECK_FALSE(iterations_until(movsb, start, 100, [](const user_regs_struct& r) { return r.rcx == 250; }));
  CHECK_FALSE(iterations_until(movsb, start, 1 << 20, [](const user_regs_struct& r) { return r.rcx == 5000; }));
}
