// GDB agent expressions (backend/points/agent_expr.h): every opcode, the limits, the error rule, the
// agent printf, and bytecode captured from the real GDB 13.1 (set debug remote 1, condition
// evaluation on the target, dprintf-style agent) against Debian's gdbserver.
#include <catch2/catch.hpp>

#include <array>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/points/agent_expr.h"

using namespace backend::agent;

namespace {

// Opcode values as GDB's manual lists them ("Bytecode Descriptions").
enum : uint8_t {
  FLOAT = 0x01, ADD = 0x02, SUB = 0x03, MUL = 0x04, DIV_SIGNED = 0x05, DIV_UNSIGNED = 0x06,
  REM_SIGNED = 0x07, REM_UNSIGNED = 0x08, LSH = 0x09, RSH_SIGNED = 0x0a, RSH_UNSIGNED = 0x0b,
  TRACE = 0x0c, TRACE_QUICK = 0x0d, LOG_NOT = 0x0e, BIT_AND = 0x0f, BIT_OR = 0x10,
  BIT_XOR = 0x11, BIT_NOT = 0x12, EQUAL = 0x13, LESS_SIGNED = 0x14, LESS_UNSIGNED = 0x15,
  EXT = 0x16, REF8 = 0x17, REF16 = 0x18, REF32 = 0x19, REF64 = 0x1a, REF_FLOAT = 0x1b,
  REF_DOUBLE = 0x1c, REF_LONG_DOUBLE = 0x1d, L_TO_D = 0x1e, D_TO_L = 0x1f, IF_GOTO = 0x20,
  GOTO = 0x21, CONST8 = 0x22, CONST16 = 0x23, CONST32 = 0x24, CONST64 = 0x25, REG = 0x26,
  END = 0x27, DUP = 0x28, POP = 0x29, ZERO_EXT = 0x2a, SWAP = 0x2b, GETV = 0x2c, SETV = 0x2d,
  TRACEV = 0x2e, TRACENZ = 0x2f, TRACE16 = 0x30, INVALID2 = 0x31, PICK = 0x32, ROT = 0x33,
  PRINTF = 0x34,
};

// Builds bytecode; operands big-endian as the manual says.
struct Asm {
  std::vector<uint8_t> b;
  Asm& op(uint8_t o) { b.push_back(o); return *this; }
  Asm& be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Asm& c8(uint8_t v) { return op(CONST8).be(v, 1); }
  Asm& c16(uint16_t v) { return op(CONST16).be(v, 2); }
  Asm& c32(uint32_t v) { return op(CONST32).be(v, 4); }
  Asm& c64(uint64_t v) { return op(CONST64).be(v, 8); }
  Asm& op1(uint8_t o, uint8_t v) { return op(o).be(v, 1); }
  Asm& op2(uint8_t o, uint16_t v) { return op(o).be(v, 2); }
  Asm& printf_(uint8_t nargs, std::string_view format) {  // format as GDB sends it, NUL added
    op(PRINTF).be(nargs, 1).be(format.size() + 1, 2);
    b.insert(b.end(), format.begin(), format.end());
    b.push_back(0);
    return *this;
  }
  Asm& end() { return op(END); }
  size_t here() const { return b.size(); }
};

// An inferior: registers, page-granular memory (a read fails when it touches a page that is
// not mapped, as on the real thing), trace state variables and the printf channel.
struct Fake {
  std::map<int, uint64_t> regs;
  std::map<uint64_t, std::array<uint8_t, 4096>> pages;
  std::map<int, int64_t> tsvs;
  std::string output;
  int out_calls = 0;
  uint64_t readable_end = UINT64_MAX;  // a reader finer than pages: nothing at or above this

  void put(uint64_t addr, const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) {
      uint64_t a = addr + i;
      auto [it, fresh] = pages.try_emplace(a & ~uint64_t{4095});
      if (fresh) it->second.fill(0);
      it->second[a & 4095] = p[i];
    }
  }
  template <typename T>
  void put(uint64_t addr, T v) { put(addr, &v, sizeof v); }
  void put_string(uint64_t addr, std::string_view s) {
    put(addr, s.data(), s.size());
    put(addr + s.size(), uint8_t{0});
  }
  bool read(uint64_t addr, std::span<uint8_t> out) const {
    for (size_t i = 0; i < out.size(); ++i) {
      uint64_t a = addr + i;
      if (a >= readable_end) return false;
      auto it = pages.find(a & ~uint64_t{4095});
      if (it == pages.end()) return false;
      out[i] = it->second[a & 4095];
    }
    return true;
  }
  Context ctx() {
    Context c;
    c.reg = [this](int r) -> std::optional<uint64_t> {
      auto it = regs.find(r);
      if (it == regs.end()) return std::nullopt;
      return it->second;
    };
    c.read = [this](uint64_t a, std::span<uint8_t> o) { return read(a, o); };
    c.get_tsv = [this](int n) -> std::optional<int64_t> {
      auto it = tsvs.find(n);
      if (it == tsvs.end()) return std::nullopt;
      return it->second;
    };
    c.set_tsv = [this](int n, int64_t v) {
      auto it = tsvs.find(n);
      if (it == tsvs.end()) return false;
      it->second = v;
      return true;
    };
    c.out = [this](std::string_view s) {
      output += s;
      ++out_calls;
    };
    return c;
  }
};

Evaluation run(const std::vector<uint8_t>& code, Fake& f, const Limits& limits = {}) {
  return evaluate(code, f.ctx(), limits);
}
Evaluation run(const Asm& a, Fake& f, const Limits& limits = {}) { return run(a.b, f, limits); }

// The value an expression leaves; fails the test with the disassembly when it faults.
uint64_t value(const Asm& a) {
  Fake f;
  Evaluation e = run(a, f);
  INFO(disassemble(a.b) << e.error);
  REQUIRE(e.fault == Fault::None);
  REQUIRE(e.value.has_value());
  CHECK(e.outcome == (*e.value != 0 ? Outcome::True : Outcome::False));
  return *e.value;
}

Fault fault(const Asm& a, const Limits& limits = {}) {
  Fake f;
  Evaluation e = run(a, f, limits);
  INFO(disassemble(a.b));
  CHECK(e.outcome == Outcome::Error);
  CHECK_FALSE(e.error.empty());
  CHECK_FALSE(e.value.has_value());
  return e.fault;
}

uint64_t u(int64_t v) { return static_cast<uint64_t>(v); }
using List = std::vector<std::vector<uint8_t>>;

std::vector<uint8_t> from_hex(std::string_view h) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<uint8_t>(std::stoul(std::string(h.substr(i, 2)), nullptr, 16)));
  return out;
}

}  // namespace

// ---- arithmetic and logic: (a b => a op b), the top is b ----

TEST_CASE("agent add, sub, mul wrap at 64 bits, sub is deeper minus top", "[agent_expr]") {
  CHECK(value(Asm().c8(2).c8(3).op(ADD).end()) == 5);
  CHECK(value(Asm().c64(UINT64_MAX).c8(2).op(ADD).end()) == 1);
  CHECK(value(Asm().c8(3).c8(5).op(SUB).end()) == u(-2));
  CHECK(value(Asm().c8(5).c8(3).op(SUB).end()) == 2);
  CHECK(value(Asm().c8(6).c8(7).op(MUL).end()) == 42);
  CHECK(value(Asm().c64(u(-3)).c8(5).op(MUL).end()) == u(-15));
  CHECK(value(Asm().c64(uint64_t{1} << 63).c8(2).op(MUL).end()) == 0);
}

TEST_CASE("agent div_signed and rem_signed truncate toward zero", "[agent_expr]") {
  CHECK(value(Asm().c64(u(-7)).c8(2).op(DIV_SIGNED).end()) == u(-3));
  CHECK(value(Asm().c64(u(-7)).c8(2).op(REM_SIGNED).end()) == u(-1));
  CHECK(value(Asm().c8(7).c64(u(-2)).op(DIV_SIGNED).end()) == u(-3));
  CHECK(value(Asm().c8(7).c64(u(-2)).op(REM_SIGNED).end()) == 1);
  CHECK(value(Asm().c8(100).c8(7).op(DIV_SIGNED).end()) == 14);
  // INT64_MIN / -1 traps on x86 (gdbserver would die of SIGFPE): defined here as wrapping.
  CHECK(value(Asm().c64(uint64_t{1} << 63).c64(u(-1)).op(DIV_SIGNED).end()) == uint64_t{1} << 63);
  CHECK(value(Asm().c64(uint64_t{1} << 63).c64(u(-1)).op(REM_SIGNED).end()) == 0);
  CHECK(value(Asm().c8(9).c64(u(-1)).op(DIV_SIGNED).end()) == u(-9));
}

TEST_CASE("agent div_unsigned and rem_unsigned", "[agent_expr]") {
  CHECK(value(Asm().c64(u(-2)).c8(2).op(DIV_UNSIGNED).end()) == UINT64_MAX / 2);
  CHECK(value(Asm().c8(17).c8(5).op(DIV_UNSIGNED).end()) == 3);
  CHECK(value(Asm().c64(u(-1)).c8(10).op(REM_UNSIGNED).end()) == UINT64_MAX % 10);
  CHECK(value(Asm().c8(17).c8(5).op(REM_UNSIGNED).end()) == 2);
}

TEST_CASE("agent division and remainder by zero are errors", "[agent_expr]") {
  for (uint8_t op : {DIV_SIGNED, DIV_UNSIGNED, REM_SIGNED, REM_UNSIGNED}) {
    INFO(int(op));
    CHECK(fault(Asm().c8(1).c8(0).op(op).end()) == Fault::DivideByZero);
  }
}

TEST_CASE("agent shifts, counts are taken modulo 64 as x86 does", "[agent_expr]") {
  CHECK(value(Asm().c8(3).c8(4).op(LSH).end()) == 48);
  CHECK(value(Asm().c64(u(-8)).c8(1).op(RSH_SIGNED).end()) == u(-4));
  CHECK(value(Asm().c64(u(-8)).c8(1).op(RSH_UNSIGNED).end()) == u(-8) >> 1);
  CHECK(value(Asm().c8(0x80).c8(4).op(RSH_SIGNED).end()) == 8);
  CHECK(value(Asm().c8(1).c8(64).op(LSH).end()) == 1);
  CHECK(value(Asm().c8(1).c8(65).op(LSH).end()) == 2);
  CHECK(value(Asm().c64(u(-16)).c8(66).op(RSH_SIGNED).end()) == u(-4));
  CHECK(value(Asm().c64(uint64_t{1} << 63).c8(63).op(RSH_UNSIGNED).end()) == 1);
}

TEST_CASE("agent log_not, bit_and, bit_or, bit_xor, bit_not", "[agent_expr]") {
  CHECK(value(Asm().c8(0).op(LOG_NOT).end()) == 1);
  CHECK(value(Asm().c8(7).op(LOG_NOT).end()) == 0);
  CHECK(value(Asm().c64(uint64_t{1} << 63).op(LOG_NOT).end()) == 0);
  CHECK(value(Asm().c8(0xc).c8(0xa).op(BIT_AND).end()) == 0x8);
  CHECK(value(Asm().c8(0xc).c8(0xa).op(BIT_OR).end()) == 0xe);
  CHECK(value(Asm().c8(0xc).c8(0xa).op(BIT_XOR).end()) == 0x6);
  CHECK(value(Asm().c8(0).op(BIT_NOT).end()) == UINT64_MAX);
  CHECK(value(Asm().c16(0x1234).op(BIT_NOT).end()) == ~uint64_t{0x1234});
}

TEST_CASE("agent equal, less_signed, less_unsigned", "[agent_expr]") {
  CHECK(value(Asm().c8(5).c8(5).op(EQUAL).end()) == 1);
  CHECK(value(Asm().c8(5).c8(6).op(EQUAL).end()) == 0);
  CHECK(value(Asm().c64(u(-1)).c64(UINT64_MAX).op(EQUAL).end()) == 1);
  CHECK(value(Asm().c64(u(-1)).c8(1).op(LESS_SIGNED).end()) == 1);
  CHECK(value(Asm().c8(1).c64(u(-1)).op(LESS_SIGNED).end()) == 0);
  CHECK(value(Asm().c64(u(-1)).c8(1).op(LESS_UNSIGNED).end()) == 0);
  CHECK(value(Asm().c8(1).c64(u(-1)).op(LESS_UNSIGNED).end()) == 1);
  CHECK(value(Asm().c8(3).c8(3).op(LESS_SIGNED).end()) == 0);
  CHECK(value(Asm().c8(2).c8(3).op(LESS_UNSIGNED).end()) == 1);
}

// ---- widths ----

TEST_CASE("agent ext sign-extends from the given width", "[agent_expr]") {
  CHECK(value(Asm().c8(0xfc).op1(EXT, 8).end()) == u(-4));
  CHECK(value(Asm().c8(0x7f).op1(EXT, 8).end()) == 0x7f);
  CHECK(value(Asm().c16(0x1ff).op1(EXT, 8).end()) == u(-1));  // bits above the width go
  CHECK(value(Asm().c16(0xfed4).op1(EXT, 16).end()) == u(-300));
  CHECK(value(Asm().c32(0xfffffffb).op1(EXT, 32).end()) == u(-5));
  CHECK(value(Asm().c64(0x1234ffffffff).op1(EXT, 32).end()) == u(-1));
  CHECK(value(Asm().c8(6).op1(EXT, 3).end()) == u(-2));  // a 3-bit signed bit-field
  CHECK(value(Asm().c8(3).op1(EXT, 3).end()) == 3);
  CHECK(value(Asm().c64(0x800000000000).op1(EXT, 48).end()) == 0xffff800000000000);
  CHECK(value(Asm().c64(0x8000000000000001).op1(EXT, 64).end()) == 0x8000000000000001);
  CHECK(value(Asm().c64(0x8000000000000001).op1(EXT, 200).end()) == 0x8000000000000001);
  CHECK(value(Asm().c8(1).op1(EXT, 1).end()) == u(-1));
  CHECK(fault(Asm().c8(1).op1(EXT, 0).end()) == Fault::BadOperand);
}

TEST_CASE("agent zero_ext keeps the low bits", "[agent_expr]") {
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 8).end()) == 0xff);
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 32).end()) == 0xffffffff);
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 5).end()) == 31);
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 63).end()) == INT64_MAX);
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 64).end()) == UINT64_MAX);
  CHECK(value(Asm().c64(u(-1)).op1(ZERO_EXT, 0).end()) == 0);
}

// ---- memory and registers ----

TEST_CASE("agent ref8..ref64 read little-endian, zero-extended", "[agent_expr]") {
  Fake f;
  const uint8_t bytes[] = {0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8};
  f.put(0x1000, bytes, sizeof bytes);
  auto ref = [&](uint8_t op) {
    Evaluation e = run(Asm().c16(0x1000).op(op).end(), f);
    REQUIRE(e.fault == Fault::None);
    return *e.value;
  };
  CHECK(ref(REF8) == 0xf1);
  CHECK(ref(REF16) == 0xf2f1);
  CHECK(ref(REF32) == 0xf4f3f2f1);
  CHECK(ref(REF64) == 0xf8f7f6f5f4f3f2f1);
  uint64_t v = 0;
  std::memcpy(&v, bytes, 8);
  CHECK(ref(REF64) == v);
}

TEST_CASE("agent ref of an unreadable address is an error", "[agent_expr]") {
  Fake f;
  f.put(0x1ffc, uint32_t{0x11223344});  // the last 4 bytes of a page; the next is unmapped
  CHECK(*run(Asm().c16(0x1ffc).op(REF32).end(), f).value == 0x11223344);
  for (uint8_t op : {REF16, REF32, REF64}) {
    Evaluation e = run(Asm().c16(0x1fff).op(op).end(), f);
    CHECK(e.fault == Fault::MemoryUnreadable);
    CHECK(e.outcome == Outcome::Error);
    CHECK(e.error.find("0x1fff") != std::string::npos);
  }
  CHECK(run(Asm().c8(0).op(REF8).end(), f).fault == Fault::MemoryUnreadable);
  Context none;  // no memory accessor at all
  CHECK(evaluate(Asm().c8(0).op(REF8).end().b, none).fault == Fault::MemoryUnreadable);
}

TEST_CASE("agent reg pushes a register by remote number, unavailable is an error", "[agent_expr]") {
  Fake f;
  f.regs[6] = 0x7ffe1000;
  f.regs[0x123] = 77;
  CHECK(*run(Asm().op2(REG, 6).end(), f).value == 0x7ffe1000);
  CHECK(*run(Asm().op2(REG, 0x123).end(), f).value == 77);
  Evaluation e = run(Asm().op2(REG, 7).end(), f);
  CHECK(e.fault == Fault::RegisterUnavailable);
  CHECK(e.error.find("register 7") != std::string::npos);
  Context none;
  CHECK(evaluate(Asm().op2(REG, 6).end().b, none).fault == Fault::RegisterUnavailable);
}

// ---- constants and control flow ----

TEST_CASE("agent const8..const64 are big-endian and zero-extended", "[agent_expr]") {
  CHECK(value(Asm().c8(0xfc).end()) == 0xfc);
  CHECK(value(Asm().c16(0xfed4).end()) == 0xfed4);
  CHECK(value(Asm().c32(0xb2d05e00).end()) == 3000000000u);
  CHECK(value(Asm().c64(0x000055555555803c).end()) == 0x55555555803c);
  CHECK(value(Asm().c64(UINT64_MAX).end()) == UINT64_MAX);
}

TEST_CASE("agent if_goto pops and jumps when non-zero, goto always jumps", "[agent_expr]") {
  // if (c) 11 else 22
  auto pick = [](uint8_t c) {
    Asm a;
    a.c8(c).op2(IF_GOTO, 10).c8(22).op2(GOTO, 12).c8(11).end();
    REQUIRE(a.b[10] == CONST8);
    REQUIRE(a.b[12] == END);
    return value(a);
  };
  CHECK(pick(1) == 11);
  CHECK(pick(0) == 22);
  CHECK(pick(0x80) == 11);
  // if_goto consumes its operand: the stack below is what remains.
  CHECK(value(Asm().c8(9).c8(1).op2(IF_GOTO, 7).end()) == 9);
  CHECK(fault(Asm().op2(IF_GOTO, 3).end()) == Fault::StackUnderflow);
  // A backward jump is fine: sum 3+2+1 with a countdown loop.
  Asm loop;
  loop.c8(0).c8(3);                    // acc n
  size_t top = loop.here();
  loop.op(DUP).op(LOG_NOT).op2(IF_GOTO, 0);  // patched below: n == 0 -> exit
  size_t patch = loop.here() - 2;
  loop.op(DUP).op(ROT).op(ADD).op(SWAP).c8(1).op(SUB).op2(GOTO, static_cast<uint16_t>(top));
  size_t exit = loop.here();
  loop.b[patch] = static_cast<uint8_t>(exit >> 8);
  loop.b[patch + 1] = static_cast<uint8_t>(exit);
  loop.op(POP).end();
  CHECK(value(loop) == 6);
}

TEST_CASE("agent end: the value is the top, an empty stack has none", "[agent_expr]") {
  CHECK(value(Asm().c8(1).c8(0).end()) == 0);
  Fake f;
  Evaluation e = run(Asm().c8(0).end(), f);
  CHECK(e.outcome == Outcome::False);
  CHECK(e.pc == 2);
  CHECK(run(Asm().c8(4).end(), f).outcome == Outcome::True);
  CHECK(fault(Asm().end()) == Fault::EmptyStack);
  CHECK(fault(Asm().c8(1).op(POP).end()) == Fault::EmptyStack);
  CHECK(command_ok(run(Asm().end(), f)));
  CHECK_FALSE(command_ok(run(Asm().op(ADD).end(), f)));
}

// ---- stack ops ----

TEST_CASE("agent dup, pop, swap", "[agent_expr]") {
  CHECK(value(Asm().c8(4).op(DUP).op(MUL).end()) == 16);
  CHECK(value(Asm().c8(4).c8(5).op(POP).end()) == 4);
  CHECK(value(Asm().c8(3).c8(5).op(SWAP).op(SUB).end()) == 2);
  CHECK(value(Asm().c8(3).c8(5).op(SWAP).end()) == 3);
  CHECK(fault(Asm().op(DUP).end()) == Fault::StackUnderflow);
  CHECK(fault(Asm().op(POP).end()) == Fault::StackUnderflow);
  CHECK(fault(Asm().c8(1).op(SWAP).end()) == Fault::StackUnderflow);
}

TEST_CASE("agent rot: a b c => c a b", "[agent_expr]") {
  // Encode the three values as digits to see the order: ((x*10)+y)*10+z over the result.
  auto order = [](Asm a) {
    a.op(ROT);
    // stack x y z (z top) -> x*100 + y*10 + z
    a.op(SWAP).c8(10).op(MUL).op(ADD)       // x (y*10+z)
        .op(SWAP).c8(100).op(MUL).op(ADD).end();
    return value(a);
  };
  CHECK(order(Asm().c8(1).c8(2).c8(3)) == 312);
  CHECK(value(Asm().c8(9).c8(1).c8(2).c8(3).op(ROT).op(POP).op(POP).op(POP).end()) == 9);
  CHECK(fault(Asm().c8(1).c8(2).op(ROT).end()) == Fault::StackUnderflow);
}

TEST_CASE("agent pick n copies the value n below the top", "[agent_expr]") {
  CHECK(value(Asm().c8(7).c8(8).c8(9).op1(PICK, 0).end()) == 9);
  CHECK(value(Asm().c8(7).c8(8).c8(9).op1(PICK, 1).end()) == 8);
  CHECK(value(Asm().c8(7).c8(8).c8(9).op1(PICK, 2).end()) == 7);
  CHECK(value(Asm().c8(7).c8(8).c8(9).op1(PICK, 2).op(POP).end()) == 9);
  CHECK(fault(Asm().c8(7).c8(8).c8(9).op1(PICK, 3).end()) == Fault::StackUnderflow);
  CHECK(fault(Asm().op1(PICK, 0).end()) == Fault::StackUnderflow);
}

TEST_CASE("agent binary and unary ops on a short stack underflow", "[agent_expr]") {
  for (uint8_t op : {ADD, SUB, MUL, DIV_SIGNED, DIV_UNSIGNED, REM_SIGNED, REM_UNSIGNED, LSH, RSH_SIGNED,
                     RSH_UNSIGNED, BIT_AND, BIT_OR, BIT_XOR, EQUAL, LESS_SIGNED, LESS_UNSIGNED}) {
    INFO(int(op));
    CHECK(fault(Asm().c8(1).op(op).end()) == Fault::StackUnderflow);
    CHECK(fault(Asm().op(op).end()) == Fault::StackUnderflow);
  }
  for (uint8_t op : {LOG_NOT, BIT_NOT, REF8, REF16, REF32, REF64}) {
    INFO(int(op));
    CHECK(fault(Asm().op(op).end()) == Fault::StackUnderflow);
  }
  CHECK(fault(Asm().op1(EXT, 8).end()) == Fault::StackUnderflow);
  CHECK(fault(Asm().op1(ZERO_EXT, 8).end()) == Fault::StackUnderflow);
  CHECK(fault(Asm().op2(SETV, 1).end()) == Fault::StackUnderflow);
}

// ---- trace state variables ----

TEST_CASE("agent getv and setv, setv leaves the value on the stack", "[agent_expr]") {
  Fake f;
  f.tsvs[2] = -5;
  Evaluation e = run(Asm().op2(GETV, 2).end(), f);
  CHECK(e.value == u(-5));
  e = run(Asm().c8(40).op2(SETV, 2).c8(2).op(ADD).end(), f);
  CHECK(e.value == 42);
  CHECK(f.tsvs[2] == 40);
  e = run(Asm().c64(u(-9)).op2(SETV, 2).op(POP).op2(GETV, 2).end(), f);
  CHECK(e.value == u(-9));
  CHECK(run(Asm().op2(GETV, 3).end(), f).fault == Fault::TsvUnavailable);
  CHECK(run(Asm().c8(1).op2(SETV, 3).end(), f).fault == Fault::TsvUnavailable);
  Context none;
  CHECK(evaluate(Asm().op2(GETV, 2).end().b, none).fault == Fault::TsvUnavailable);
  CHECK(evaluate(Asm().c8(1).op2(SETV, 2).end().b, none).fault == Fault::TsvUnavailable);
}

// ---- what a condition or dprintf never holds ----

TEST_CASE("agent tracepoint ops and floating point are unsupported", "[agent_expr]") {
  CHECK(fault(Asm().c8(1).c8(1).op(TRACE).c8(1).end()) == Fault::Unsupported);
  CHECK(fault(Asm().c8(1).op1(TRACE_QUICK, 4).end()) == Fault::Unsupported);
  CHECK(fault(Asm().c8(1).op2(TRACE16, 4).end()) == Fault::Unsupported);
  CHECK(fault(Asm().op2(TRACEV, 1).c8(1).end()) == Fault::Unsupported);
  CHECK(fault(Asm().c8(1).c8(1).op(TRACENZ).c8(1).end()) == Fault::Unsupported);
  for (uint8_t op : {FLOAT, REF_FLOAT, REF_DOUBLE, REF_LONG_DOUBLE, L_TO_D, D_TO_L}) {
    INFO(int(op));
    CHECK(fault(Asm().c8(1).op(op).end()) == Fault::Unsupported);
  }
}

TEST_CASE("agent invalid opcodes are errors", "[agent_expr]") {
  for (uint8_t op : {uint8_t{0x00}, uint8_t{INVALID2}, uint8_t{0x35}, uint8_t{0x80}, uint8_t{0xff}}) {
    INFO(int(op));
    Fake f;
    Evaluation e = run(Asm().c8(1).op(op).end(), f);
    CHECK(e.fault == Fault::BadOpcode);
    CHECK(e.pc == 2);
  }
}

// ---- limits ----

TEST_CASE("agent stack depth is bounded", "[agent_expr]") {
  Limits lim;
  lim.max_stack = 50;
  Asm fits, over;
  for (int i = 0; i < 50; ++i) fits.c8(1);
  for (int i = 0; i < 51; ++i) over.c8(1);
  Fake f;
  CHECK(run(fits.end(), f, lim).fault == Fault::None);
  CHECK(run(over.end(), f, lim).fault == Fault::StackOverflow);
  // Growing by dup, pick, reg and getv is bounded too.
  Asm dup;
  dup.c8(1);
  for (int i = 0; i < 60; ++i) dup.op(DUP);
  CHECK(run(dup.end(), f, lim).fault == Fault::StackOverflow);
  // A loop that pushes forever stops at the default limit, not the step limit.
  Asm grow;
  grow.c8(1).op(DUP).op2(GOTO, 2);
  Evaluation e = run(grow, f);
  CHECK(e.fault == Fault::StackOverflow);
  CHECK(e.steps == 2 * Limits{}.max_stack);  // const8, then dup/goto pairs
}

TEST_CASE("agent an endless loop stops at the step limit", "[agent_expr]") {
  Fake f;
  Evaluation e = run(Asm().op2(GOTO, 0), f);
  CHECK(e.fault == Fault::StepLimit);
  CHECK(e.steps == Limits{}.max_steps);
  Limits lim;
  lim.max_steps = 10;
  e = run(Asm().c8(1).op(POP).op2(GOTO, 0), f, lim);
  CHECK(e.fault == Fault::StepLimit);
  CHECK(e.steps == 10);
  // Exactly max_steps ops (the end included) is still fine.
  lim.max_steps = 3;
  CHECK(run(Asm().c8(1).c8(2).end(), f, lim).fault == Fault::None);
  lim.max_steps = 2;
  CHECK(run(Asm().c8(1).c8(2).end(), f, lim).fault == Fault::StepLimit);
}

TEST_CASE("agent jump targets must lie inside the expression", "[agent_expr]") {
  CHECK(fault(Asm().op2(GOTO, 4).end()) == Fault::BadJump);
  CHECK(value(Asm().op2(GOTO, 3).c8(1).end()) == 1);
  CHECK(fault(Asm().c8(1).op2(IF_GOTO, 0xffff).end()) == Fault::BadJump);
  // Checked even when the branch is not taken: such bytecode is malformed either way.
  CHECK(fault(Asm().c8(0).op2(IF_GOTO, 0x100).c8(1).end()) == Fault::BadJump);
  // A target inside an operand decodes from there (here: the 0x27 of const8 0x27 is an end).
  CHECK(value(Asm().c8(5).op2(GOTO, 6).c8(END)) == 5);
}

TEST_CASE("agent truncated operands are errors", "[agent_expr]") {
  const std::vector<std::pair<uint8_t, int>> with_operands = {
      {CONST8, 1}, {CONST16, 2}, {CONST32, 4}, {CONST64, 8}, {REG, 2}, {IF_GOTO, 2}, {GOTO, 2},
      {EXT, 1}, {ZERO_EXT, 1}, {PICK, 1}, {GETV, 2}, {SETV, 2}, {TRACE_QUICK, 1}, {TRACE16, 2},
      {TRACEV, 2}, {PRINTF, 3}};
  for (auto [op, n] : with_operands) {
    for (int have = 0; have < n; ++have) {
      Asm a;
      a.c8(1).c8(1).c8(1).op(op);
      for (int i = 0; i < have; ++i) a.b.push_back(0);
      INFO(int(op) << " with " << have << " operand bytes");
      CHECK(fault(a) == Fault::Truncated);
    }
  }
  // A printf whose string runs past the end.
  Asm p;
  p.c8(0).c8(0).op(PRINTF).be(0, 1).be(10, 2);
  p.b.insert(p.b.end(), {'h', 'i'});
  CHECK(fault(p) == Fault::Truncated);
}

TEST_CASE("agent length limits, empty bytecode, no end", "[agent_expr]") {
  Fake f;
  CHECK(run(std::vector<uint8_t>{}, f).fault == Fault::EmptyBytecode);
  Limits lim;
  lim.max_bytes = 4;
  CHECK(run(Asm().c8(1).end(), f, lim).fault == Fault::None);
  CHECK(run(Asm().c8(1).c8(1).end(), f, lim).fault == Fault::TooLong);
  CHECK(fault(Asm().c8(1)) == Fault::RanOffEnd);
  CHECK(fault(Asm().c8(0).op2(IF_GOTO, 0)) == Fault::RanOffEnd);
}

// ---- the error rule ----

TEST_CASE("agent conditions: any true holds, any error holds, all false does not", "[agent_expr]") {
  Fake f;
  f.put(0x5000, uint32_t{3});
  auto is = [](uint32_t v) {  // *(int *)0x5000 == v
    return Asm().c16(0x5000).op(REF32).c32(v).op(EQUAL).end().b;
  };
  std::vector<std::vector<uint8_t>> none;
  CHECK(conditions_hold(none, f.ctx()));
  CHECK(conditions_hold(List{is(3)}, f.ctx()));
  CHECK_FALSE(conditions_hold(List{is(4)}, f.ctx()));
  CHECK(conditions_hold(List{is(4), is(3)}, f.ctx()));
  CHECK(conditions_hold(List{is(3), is(4)}, f.ctx()));
  CHECK_FALSE(conditions_hold(List{is(4), is(5)}, f.ctx()));
  // Unreadable memory, a bad opcode, an endless loop, no value: the hit is reported.
  auto unreadable = Asm().c16(0x9000).op(REF32).c8(3).op(EQUAL).end().b;
  CHECK(evaluate(unreadable, f.ctx()).outcome == Outcome::Error);
  CHECK(conditions_hold(List{unreadable}, f.ctx()));
  CHECK(conditions_hold(List{is(4), unreadable}, f.ctx()));
  CHECK(conditions_hold(List{Asm().op(0xff).b}, f.ctx()));
  CHECK(conditions_hold(List{Asm().op2(GOTO, 0).b}, f.ctx()));
  CHECK(conditions_hold(List{Asm().end().b}, f.ctx()));
  CHECK(conditions_hold(List{std::vector<uint8_t>{}}, f.ctx()));
}

TEST_CASE("agent conditions run most recent first and stop at the first that holds", "[agent_expr]") {
  // Each condition stores its number in TSV 1 and yields `holds`.
  auto mark = [](uint8_t n, bool holds) {
    return Asm().c8(n).op2(SETV, 1).op(POP).c8(holds).end().b;
  };
  Fake f;
  f.tsvs[1] = 0;
  CHECK(conditions_hold(List{mark(1, true), mark(2, true)}, f.ctx()));
  CHECK(f.tsvs[1] == 2);
  CHECK(conditions_hold(List{mark(1, true), mark(2, false)}, f.ctx()));
  CHECK(f.tsvs[1] == 1);
  CHECK_FALSE(conditions_hold(List{mark(1, false), mark(2, false)}, f.ctx()));
  CHECK(f.tsvs[1] == 1);
}

// ---- printf ----

namespace {
std::string print(const Asm& a, Fake& f, Evaluation* out = nullptr) {
  f.output.clear();
  Evaluation e = run(a, f);
  INFO(disassemble(a.b) << e.error);
  if (out) *out = e;
  else CHECK(command_ok(e));
  return f.output;
}
// Arguments are pushed last first, then channel 0 and function 0, as GDB's gen_printf does.
Asm call(std::vector<uint64_t> args, std::string_view format) {
  Asm a;
  for (size_t i = args.size(); i-- > 0;) a.c64(args[i]);
  a.c8(0).c8(0).printf_(static_cast<uint8_t>(args.size()), format).end();
  return a;
}
}  // namespace

TEST_CASE("agent printf integer conversions", "[agent_expr]") {
  Fake f;
  CHECK(print(call({}, "plain text\\n"), f) == "plain text\n");
  CHECK(print(call({u(-5), u(-5), u(-5)}, "%d|%i|%u"), f) == "-5|-5|4294967291");
  CHECK(print(call({255, 255, 255, 8}, "%x|%X|%#x|%o"), f) == "ff|FF|0xff|10");
  // int conversions take the low 32 bits, as gdbserver passes an int.
  CHECK(print(call({0x100000007}, "%d"), f) == "7");
  CHECK(print(call({u(-2), u(-2), u(-2)}, "%ld|%lu|%lx"), f) == "-2|18446744073709551614|fffffffffffffffe");
  CHECK(print(call({u(-3), u(1) << 40}, "%lld|%llu"), f) == "-3|1099511627776");
  CHECK(print(call({24, u(-1)}, "%zu|%zd"), f) == "24|-1");
  CHECK(print(call({0x12345}, "%hx"), f) == "2345");
  CHECK(print(call({65, 'z'}, "%c%c"), f) == "Az");
  CHECK(print(call({7, 7, 7, 7, 7}, "[%5d][%-5d][%05d][%+d][% d]"), f) == "[    7][7    ][00007][+7][ 7]");
  CHECK(print(call({7}, "[%5.3d]"), f) == "[  007]");
  CHECK(print(call({}, "100%% sure"), f) == "100% sure");
  CHECK(f.out_calls > 0);
}

TEST_CASE("agent printf %s reads the inferior, bounded", "[agent_expr]") {
  Fake f;
  f.put_string(0x4000, "even");
  CHECK(print(call({0x4000}, "<%s>"), f) == "<even>");
  CHECK(print(call({0x4000, 0x4001}, "[%-6s][%.2s]"), f) == "[even  ][ve]");
  CHECK(print(call({0}, "%s|"), f) == "(null)|");  // as gdbserver (and glibc)
  // A string that ends just before an unmapped page reads (the reads do not cross pages).
  f.put_string(0x6ffa, "edge!");
  CHECK(print(call({0x6ffa}, "%s"), f) == "edge!");
  // One whose NUL lies on the unmapped page does not: an error, and nothing printed.
  f.put(0x8ffd, "abc", 3);
  Evaluation e;
  CHECK(print(call({0x8ffd}, "x=%s"), f, &e).empty());
  CHECK(e.fault == Fault::MemoryUnreadable);
  CHECK(print(call({0x12345000}, "%s"), f, &e).empty());
  CHECK(e.fault == Fault::MemoryUnreadable);
  // A reader that refuses part of a page: the string is read again byte by byte.
  f.readable_end = 0x4005;
  CHECK(print(call({0x4000}, "<%s>"), f) == "<even>");
  f.readable_end = 0x4004;
  CHECK(print(call({0x4000}, "<%s>"), f, &e).empty());
  CHECK(e.fault == Fault::MemoryUnreadable);
  f.readable_end = UINT64_MAX;
  // Longer than max_string: cut there.
  std::string lng(5000, 'q');
  f.put_string(0x20000, lng);
  CHECK(print(call({0x20000}, "%s"), f) == std::string(Limits{}.max_string, 'q'));
}

TEST_CASE("agent printf %p prints as glibc and GDB do", "[agent_expr]") {
  Fake f;
  CHECK(print(call({0x7fffffffe668}, "%p"), f) == "0x7fffffffe668");
  CHECK(print(call({0}, "%p"), f) == "(nil)");
  CHECK(print(call({0x10}, "[%6p]"), f) == "[  0x10]");
}

TEST_CASE("agent printf escapes as GDB's format parser", "[agent_expr]") {
  Fake f;
  CHECK(print(call({}, "a\\tb\\\\c\\\"d\\n"), f) == "a\tb\\c\"d\n");
  CHECK(print(call({}, "\\a\\b\\e\\f\\r\\v"), f) == "\a\b\x1b\f\r\v");
  // The text ends at an unescaped quote (GDB never sends one).
  CHECK(print(call({}, "up to\"here"), f) == "up to");
  Evaluation e;
  CHECK(print(call({}, "bad \\q"), f, &e).empty());
  CHECK(e.fault == Fault::PrintfFormat);
  CHECK(print(call({}, "trailing \\"), f, &e).empty());
  CHECK(e.fault == Fault::PrintfFormat);
}

TEST_CASE("agent printf errors print nothing", "[agent_expr]") {
  Fake f;
  f.put_string(0x4000, "s");
  Evaluation e;
  auto fails = [&](Asm a, Fault want) {
    f.output.clear();
    e = run(a, f);
    INFO(disassemble(a.b) << e.error);
    CHECK(e.fault == want);
    CHECK(f.output.empty());
  };
  fails(call({1}, "%d %d"), Fault::PrintfFormat);          // wrong number of arguments
  fails(call({1, 2}, "%d"), Fault::PrintfFormat);
  fails(call({1}, "x=%d %f"), Fault::PrintfFormat);         // too few, and floating point
  fails(call({1, 2}, "x=%d %f"), Fault::PrintfFormat);      // floating point: no ax values
  fails(call({1}, "%Lf"), Fault::PrintfFormat);
  fails(call({1}, "%e"), Fault::PrintfFormat);
  fails(call({0x4000}, "%ls"), Fault::PrintfFormat);        // wide: unsupported in agent printf
  fails(call({65}, "%lc"), Fault::PrintfFormat);
  fails(call({1}, "%n"), Fault::PrintfFormat);
  fails(call({1}, "%*d"), Fault::PrintfFormat);
  fails(call({1}, "%q"), Fault::PrintfFormat);
  fails(call({1}, "%hhd"), Fault::PrintfFormat);            // one h only, as GDB
  fails(call({1}, "%lld%"), Fault::PrintfFormat);           // incomplete at the end
  fails(call({1}, "%#u"), Fault::PrintfFormat);             // inappropriate modifiers
  fails(call({1}, "%+x"), Fault::PrintfFormat);
  fails(call({1}, "%.2c"), Fault::PrintfFormat);
  fails(call({1}, "%#p"), Fault::PrintfFormat);
  fails(call({1}, "%05s"), Fault::PrintfFormat);
  fails(call({1}, "%Ld"), Fault::PrintfFormat);
  fails(call({1}, "%Hd"), Fault::PrintfFormat);             // decimal-float modifiers
  fails(call({1}, "%I64d"), Fault::PrintfFormat);
  fails(call({1}, "%99999999999999999999d"), Fault::OutputLimit);
  fails(call({1}, "%.70000d"), Fault::OutputLimit);
  // The format must be NUL-terminated inside its length, and the stack must hold
  // nargs + channel + function.
  Asm unterminated;
  unterminated.c8(0).c8(0).op(PRINTF).be(0, 1).be(2, 2);
  unterminated.b.insert(unterminated.b.end(), {'h', 'i'});
  unterminated.end();
  fails(unterminated, Fault::BadOperand);
  Asm empty_format;
  empty_format.c8(0).c8(0).op(PRINTF).be(0, 1).be(0, 2).end();
  fails(empty_format, Fault::BadOperand);
  fails(Asm().c8(5).c8(0).printf_(1, "%d").end(), Fault::StackUnderflow);
  // No output channel.
  Context quiet = f.ctx();
  quiet.out = nullptr;
  CHECK(evaluate(call({}, "hi").b, quiet).fault == Fault::Unsupported);
}

TEST_CASE("agent printf output is bounded per evaluation", "[agent_expr]") {
  Limits lim;
  lim.max_output = 100;
  Fake f;
  Asm a;
  for (int i = 0; i < 3; ++i) a.c8(0).c8(0).printf_(0, std::string(40, 'x'));
  a.c8(1).end();
  Evaluation e = run(a, f, lim);
  CHECK(e.fault == Fault::OutputLimit);
  CHECK(f.output == std::string(80, 'x'));  // the first two printfs, whole
  CHECK(f.out_calls == 2);
}

// ---- bytecode from the real GDB 13.1 ----
//
// prog.c, built with gcc -g -O0 (and -O2 for the register case):
//   struct S { int a : 3; unsigned b : 5; short h; signed char c; long long ll; unsigned u; };
//   int gcount = 0;
//   struct S gs = { -2, 17, -300, -5, 1LL << 40, 4000000000u };
//   int foo(int x, int *p, const char *s, struct S *sp) { gcount += x; ... }
//   main: for (i = 0; i < 12; i++) foo(i, &v /* v = 7 */, i & 1 ? "odd" : "even", &gs);
// gdb -batch: set breakpoint condition-evaluation target; set dprintf-style agent;
// target remote | gdbserver - ./prog; set debug remote 1; break foo if ...; continue.
// The bytes below are the X<len>,<hex> payloads of the Z0 packets GDB sent.

namespace {

// foo's frame at the breakpoint after the prologue, as the -O0 code addresses it: GDB's
// frame base is rbp + 16 (DW_OP_call_frame_cfa), x at base-36, p at base-48, s at base-56,
// sp at base-64.
struct FooFrame {
  Fake f;
  static constexpr uint64_t rbp = 0x7fffffffe640, base = rbp + 16;
  static constexpr uint64_t v_addr = 0x7fffffffe668, gs_addr = 0x555555558020;
  static constexpr uint64_t gcount_addr = 0x55555555803c;
  static constexpr uint64_t even = 0x555555556008, odd = 0x555555556004;

  struct S {
    int a : 3;
    unsigned b : 5;
    short h;
    signed char c;
    long long ll;
    unsigned u;
  };

  FooFrame(int x, int v = 7, S gs = S{-2, 17, -300, -5, 1LL << 40, 4000000000u}, int gcount = 0) {
    static_assert(sizeof(S) == 24);
    f.regs[6] = rbp;
    f.put(base - 36, int32_t{x});
    f.put(base - 48, uint64_t{v_addr});
    f.put(base - 56, uint64_t{x & 1 ? odd : even});
    f.put(base - 64, uint64_t{gs_addr});
    f.put(v_addr, int32_t{v});
    f.put(gs_addr, &gs, sizeof gs);
    f.put(gcount_addr, int32_t{gcount});
    f.put_string(even, "even");
    f.put_string(odd, "odd");
  }
  Outcome eval(const std::vector<uint8_t>& code) { return evaluate(code, f.ctx()).outcome; }
};

Outcome truth(bool b) { return b ? Outcome::True : Outcome::False; }

}  // namespace

TEST_CASE("agent real GDB: break foo if x > 3 && *p == 7", "[agent_expr]") {
  auto code = from_hex("26000622100222dc16080219162022032b1420001821003526000622100222d01608021a1916202207132000302100352201210037220027");
  REQUIRE(code.size() == 0x38);
  for (int x : {-100, 0, 3, 4, 5, 1000})
    for (int v : {7, 6, -7}) {
      INFO("x=" << x << " v=" << v);
      CHECK(FooFrame(x, v).eval(code) == truth(x > 3 && v == 7));
    }
  // p pointing nowhere: an error, so the hit is reported (GDB then says why).
  FooFrame bad(5);
  bad.f.put(FooFrame::base - 48, uint64_t{0x10});
  CHECK(bad.eval(code) == Outcome::Error);
  CHECK(conditions_hold(List{code}, bad.f.ctx()));
  // ... but not when the && short-circuits before the dereference, as in C.
  FooFrame short_circuit(2);
  short_circuit.f.put(FooFrame::base - 48, uint64_t{0x10});
  CHECK(short_circuit.eval(code) == Outcome::False);
}

TEST_CASE("agent real GDB: bit-fields, || and &&", "[agent_expr]") {
  // break foo if sp->a < 0
  auto a_neg = from_hex("26000622100222c01608021a17160322001427");
  // break foo if x == 1 || (sp->a < 0 && sp->b == 17)
  auto mixed = from_hex(
      "26000622100222dc16080219162022011320005826000622100222c01608021a17160322001420002c21004e2600"
      "0622100222c01608021a1722030b2a0522112a201320004921004e22012100502200200058220021005a220127");
  REQUIRE(mixed.size() == 0x5b);
  for (int a : {-4, -2, -1, 0, 1, 3})
    for (unsigned b : {0u, 16u, 17u, 31u})
      for (int x : {0, 1, 2}) {
        FooFrame::S gs{a, b, -300, -5, 1LL << 40, 4000000000u};
        INFO("a=" << a << " b=" << b << " x=" << x);
        CHECK(FooFrame(x, 7, gs).eval(a_neg) == truth(gs.a < 0));
        CHECK(FooFrame(x, 7, gs).eval(mixed) == truth(x == 1 || (gs.a < 0 && gs.b == 17)));
      }
}

TEST_CASE("agent real GDB: two breakpoints at one address send two conditions", "[agent_expr]") {
  // break foo if x == 1 ; break foo if *s == 111 && sp->c < -4  (one Z0, X12,...X3d,...)
  std::vector<std::vector<uint8_t>> conds = {
      from_hex("26000622100222dc16080219162022011327"),
      from_hex("26000622100222c81608021a171608226f1320001821003a26000622100222c01608021a2204021716"
               "0822fc16081420003521003a220121003c220027")};
  for (int x = 0; x < 12; ++x)
    for (signed char c : {-5, -4, 3}) {
      FooFrame::S gs{-2, 17, -300, c, 1LL << 40, 4000000000u};
      FooFrame fr(x, 7, gs);
      const char* s = x & 1 ? "odd" : "even";
      INFO("x=" << x << " c=" << int(c));
      CHECK(conditions_hold(conds, fr.f.ctx()) == (x == 1 || (*s == 111 && c < -4)));
    }
}

TEST_CASE("agent real GDB: division, remainder, shifts, unsigned, a global", "[agent_expr]") {
  // break foo if sp->ll / 1024 > 1000 && sp->u > 3000000000 && x % 2 == 1 && (x << 3) >= 8
  //              && gcount != 0
  auto c1 = from_hex(
      "26000622100222c01608021a2208021a16402304000516402303e82b1420002321004926000622100222c01608"
      "021a221002192500000000b2d05e002b14200044210049220121004b220020005121007226000622100222dc16"
      "0802191620220207162022011320006d2100722201210074220020007a21009c26000622100222dc1608021916"
      "2022030916202208140e20009721009c220121009e22002000a42100bf25000055555555803c19162022001"
      "30e2000ba2100bf22012100c1220027");
  REQUIRE(c1.size() == 0xc2);
  // break foo if (unsigned)x % 3u == 2 && -x / 2 == -4 && (sp->ll >> 38) == 4
  //              && (x ^ 5 | 2 & ~x) != 0
  auto c2 = from_hex(
      "26000622100222dc1608021916202a202203082a2022022a2013200020210048220026000622100222dc160802"
      "191620031620220205162022fc160813200043210048220121004a220020005021007526000622100222c01608"
      "021a2208021a164022260a16402204132000702100752201210077220020007d2100b226000622100222dc1608"
      "02191620220511220226000622100222dc1608021916201216200f102200130e2000ad2100b222012100b42200"
      "27");
  REQUIRE(c2.size() == 0xb5);
  for (long long ll : {1LL << 40, 1000LL * 1024, 1001LL * 1024, -(1LL << 40), 4LL << 38, 5LL << 38})
    for (unsigned uu : {4000000000u, 3000000000u, 3000000001u, 7u})
      for (int gcount : {0, 5})
        for (int x : {-9, -8, 0, 1, 2, 5, 8, 11}) {
          FooFrame::S gs{-2, 17, -300, -5, ll, uu};
          FooFrame fr(x, 7, gs, gcount);
          INFO("ll=" << ll << " u=" << uu << " gcount=" << gcount << " x=" << x);
          CHECK(fr.eval(c1) == truth(ll / 1024 > 1000 && uu > 3000000000u && x % 2 == 1 &&
                                     (x << 3) >= 8 && gcount != 0));
          CHECK(fr.eval(c2) == truth(static_cast<unsigned>(x) % 3u == 2 && -x / 2 == -4 &&
                                     (ll >> 38) == 4 && ((x ^ 5) | (2 & ~x)) != 0));
        }
}

TEST_CASE("agent real GDB: a register variable (-O2)", "[agent_expr]") {
  // break foo if x == 9, x in edi: reg 5 (rdi), ext 32, const8 9, equal.
  auto code = from_hex("260005162022091327");
  Fake f;
  for (uint64_t rdi : {uint64_t{9}, uint64_t{8}, 0xdeadbeef00000009, 0xffffffff00000009}) {
    f.regs[5] = rdi;
    INFO(rdi);
    CHECK(evaluate(code, f.ctx()).outcome == truth(static_cast<int>(static_cast<uint32_t>(rdi)) == 9));
  }
  f.regs.erase(5);
  CHECK(evaluate(code, f.ctx()).fault == Fault::RegisterUnavailable);
}

TEST_CASE("agent real GDB: a trace state variable", "[agent_expr]") {
  // tvariable $t = 5; break foo if $t > 3 && ($t = x) > 2
  // GDB 13 compiles the assignment to store x's *address* in $t (setv before ref32): run as
  // sent. gdbserver reads an unknown $t as 0; here it is an error (so GDB evaluates it).
  auto code = from_hex("2c000222032b1420000d21002d26000622100222dc1608022d000219162022022b1420002821002d220121002f220027");
  FooFrame fr(4);
  CHECK(fr.eval(code) == Outcome::Error);
  fr.f.tsvs[2] = 5;
  CHECK(fr.eval(code) == Outcome::True);
  CHECK(fr.f.tsvs[2] == static_cast<int64_t>(FooFrame::base - 36));
  fr.f.tsvs[2] = 3;
  CHECK(fr.eval(code) == Outcome::False);
  CHECK(fr.f.tsvs[2] == 3);
}

TEST_CASE("agent real GDB: dprintf bytecode prints what gdbserver printed", "[agent_expr]") {
  // dprintf foo,"x=%d s=%s\n",x,s  (cmds:1,X2f,...)
  auto simple = from_hex("26000622100222c81608021a26000622100222dc160802191620220022003402000c783d256420733d25735c6e0027");
  REQUIRE(simple.size() == 0x2f);
  {
    FooFrame fr(4);
    Evaluation e = evaluate(simple, fr.f.ctx());
    CHECK(command_ok(e));
    CHECK(e.fault == Fault::EmptyStack);  // a dprintf leaves no value
    CHECK(fr.f.output == "x=4 s=even\n");
  }
  // dprintf foo,"x=%u %x %c %ld %lld %lu %zu %5.3d|%-6s|%%\n",x,x,65+x,(long)x,sp->ll,
  //             (unsigned long)sp->u,sizeof(*sp),x,s
  // Lines gdbserver 13.1 printed on its stdout for this very bytecode (x = 0, 1, 10, 11).
  auto many = from_hex(
      "26000622100222c81608021a26000622100222dc160802191620221826000622100222c01608021a221002192a"
      "4026000622100222c01608021a2208021a164026000622100222dc160802191620224126000622100222dc1608"
      "0219162002162026000622100222dc16080219162026000622100222dc160802191620220022003409002c783d"
      "257520257820256320256c6420256c6c6420256c7520257a752025352e33647c252d36737c25255c6e0027");
  REQUIRE(many.size() == 0xb2);
  const std::vector<std::pair<int, std::string>> gdbserver_printed = {
      {0, "x=0 0 A 0 1099511627776 4000000000 24   000|even  |%\n"},
      {1, "x=1 1 B 1 1099511627776 4000000000 24   001|odd   |%\n"},
      {10, "x=10 a K 10 1099511627776 4000000000 24   010|even  |%\n"},
      {11, "x=11 b L 11 1099511627776 4000000000 24   011|odd   |%\n"}};
  for (const auto& [x, line] : gdbserver_printed) {
    FooFrame fr(x);
    CHECK(command_ok(evaluate(many, fr.f.ctx())));
    CHECK(fr.f.output == line);
  }
  // dprintf foo,"A %d %s %s|\n",x,(char*)0,s: gdbserver printed "A 0 (null) even|".
  auto null_string = from_hex("26000622100222c81608021a220026000622100222dc160802191620220022003403000e412025642025732025737c5c6e0027");
  FooFrame fr0(0);
  CHECK(command_ok(evaluate(null_string, fr0.f.ctx())));
  CHECK(fr0.f.output == "A 0 (null) even|\n");
  // dprintf foo,"B %d %p\n",x,p: gdbserver printed "B 0 " then died ("Format directive in
  // '%p' not supported in agent printf"); here %p prints.
  auto pointer = from_hex("26000622100222d01608021a26000622100222dc160802191620220022003402000a422025642025705c6e0027");
  FooFrame fr2(2);
  CHECK(command_ok(evaluate(pointer, fr2.f.ctx())));
  CHECK(fr2.f.output == "B 2 0x7fffffffe668\n");
}

TEST_CASE("agent real GDB: dprintf with a condition sends both", "[agent_expr]") {
  // dprintf foo,"hit x=%d\n",x ; condition 1 x > 8  ->  ;X13,<cond>;cmds:1,X22,<printf>
  auto cond = from_hex("26000622100222dc16080219162022082b1427");
  auto cmd = from_hex("26000622100222dc160802191620220022003401000b68697420783d25645c6e0027");
  for (int x = 0; x < 12; ++x) {
    FooFrame fr(x);
    CHECK(fr.eval(cond) == truth(x > 8));
    CHECK(command_ok(evaluate(cmd, fr.f.ctx())));
    CHECK(fr.f.output == "hit x=" + std::to_string(x) + "\n");
  }
}

TEST_CASE("agent disassemble names every op and stops at truncation", "[agent_expr]") {
  std::string d = disassemble(from_hex("260005162022091327"));
  CHECK(d == "0000 reg 5\n0003 ext 32\n0005 const8 9\n0007 equal\n0008 end\n");
  CHECK(disassemble(Asm().op2(GOTO, 0x10).op(0x31).op(CONST16).b) == "0000 goto 0x10\n0003 ?? 0x31\n0004 const16 (truncated)\n");
  CHECK(disassemble(call({}, "hi").b).find("printf 0 args \"hi\"") != std::string::npos);
  CHECK(fault_name(Fault::StepLimit) == "step limit");
}
