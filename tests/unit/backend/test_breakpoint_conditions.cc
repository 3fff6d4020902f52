// Target-side breakpoint programs (backend/points/breakpoint_conditions.h): the table (replace, erase,
// Z0 and Z1 apart) and the verdict on a hit (conditions ORed, errors count as true, commands run
// only when the condition holds and make the hit silent, a failing command ends the list).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "backend/points/breakpoint_conditions.h"

using backend::BreakpointConditions;
using backend::BreakpointProgram;
using Bytes = std::vector<uint8_t>;

namespace {

enum : uint8_t { EQUAL = 0x13, REF32 = 0x19, CONST8 = 0x22, REG = 0x26, END = 0x27, PRINTF = 0x34 };

const Bytes kTrue{CONST8, 1, END};
const Bytes kFalse{CONST8, 0, END};
// reg 0 == value
Bytes reg0_is(uint8_t value) { return {REG, 0, 0, CONST8, value, EQUAL, END}; }
// *(int32 *)addr != 0 (reads memory; faults where the context has none)
Bytes deref(uint8_t addr) { return {CONST8, addr, REF32, END}; }
// printf(format, reg 0) as GDB's gen_printf lays it out: argument, channel 0, function 0.
Bytes printf_reg0(const std::string& format) {
  Bytes b{REG, 0, 0, CONST8, 0, CONST8, 0, PRINTF, 1, 0, static_cast<uint8_t>(format.size() + 1)};
  b.insert(b.end(), format.begin(), format.end());
  b.push_back(0);
  b.push_back(END);
  return b;
}

// A thread with rax = `rax` and 4 readable bytes (value 1) at address 0x40.
backend::agent::Context thread(uint64_t rax) {
  backend::agent::Context ctx;
  ctx.reg = [rax](int regno) -> std::optional<uint64_t> {
    if (regno == 0) return rax;
    return std::nullopt;
  };
  ctx.read = [](uint64_t addr, std::span<uint8_t> out) {
    if (addr != 0x40 || out.size() > 4) return false;
    Bytes one{1, 0, 0, 0};
    std::copy_n(one.begin(), out.size(), out.begin());
    return true;
  };
  return ctx;
}

BreakpointProgram cond(std::vector<Bytes> conditions, std::vector<Bytes> commands = {}) {
  BreakpointProgram p;
  p.conditions = std::move(conditions);
  p.commands = std::move(commands);
  return p;
}

}  // namespace

TEST_CASE("breakpoint conditions: a breakpoint without a program is reported") {
  BreakpointConditions c;
  CHECK_FALSE(c.any_at(0x1000));
  auto v = c.hit(0x1000, thread(0));
  CHECK(v.report);
  CHECK_FALSE(v.commands_ran);
  CHECK(v.output.empty());
}

TEST_CASE("breakpoint conditions: the thread's registers decide") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({reg0_is(7)}));
  CHECK(c.any_at(0x1000));
  CHECK_FALSE(c.any_at(0x1001));
  CHECK_FALSE(c.any_at(0xfff));
  CHECK_FALSE(c.hit(0x1000, thread(6)).report);
  CHECK(c.hit(0x1000, thread(7)).report);
}

TEST_CASE("breakpoint conditions: several conditions at one address are ORed") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({reg0_is(1), reg0_is(2)}));
  CHECK(c.hit(0x1000, thread(1)).report);
  CHECK(c.hit(0x1000, thread(2)).report);
  CHECK_FALSE(c.hit(0x1000, thread(3)).report);
}

TEST_CASE("breakpoint conditions: a condition that cannot be evaluated counts as true") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({kFalse, deref(0x80)}));  // 0x80 unreadable
  auto v = c.hit(0x1000, thread(0));
  CHECK(v.report);
  CHECK(v.error.find("condition") == 0);
  c.set(0x1000, false, cond({deref(0x40)}));  // readable, value 1
  v = c.hit(0x1000, thread(0));
  CHECK(v.report);
  CHECK(v.error.empty());
}

TEST_CASE("breakpoint conditions: a new program replaces the old one, an empty one erases it") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({kFalse}));
  CHECK_FALSE(c.hit(0x1000, thread(0)).report);
  c.set(0x1000, false, cond({kTrue}));
  CHECK(c.hit(0x1000, thread(0)).report);
  CHECK(c.size() == 1);
  c.set(0x1000, false, cond({kFalse}));
  c.set(0x1000, false, BreakpointProgram{});
  CHECK_FALSE(c.any_at(0x1000));
  CHECK(c.size() == 0);
  c.set(0x1000, false, cond({kFalse}));
  c.erase(0x1000, false);
  CHECK(c.hit(0x1000, thread(0)).report);
}

TEST_CASE("breakpoint conditions: Z0 and Z1 at one address are kept apart and ORed at a hit") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({kFalse}));
  c.set(0x1000, true, cond({reg0_is(5)}));
  CHECK(c.size() == 2);
  CHECK(c.find(0x1000, true) != nullptr);
  CHECK_FALSE(c.hit(0x1000, thread(4)).report);
  CHECK(c.hit(0x1000, thread(5)).report);
  c.erase(0x1000, true);
  CHECK_FALSE(c.hit(0x1000, thread(5)).report);
}

TEST_CASE("breakpoint conditions: commands print when the condition holds, and the hit is silent") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({reg0_is(3)}, {printf_reg0("rax=%d\\n")}));
  auto v = c.hit(0x1000, thread(2));
  CHECK_FALSE(v.report);
  CHECK_FALSE(v.commands_ran);
  CHECK(v.output.empty());
  v = c.hit(0x1000, thread(3));
  CHECK_FALSE(v.report);  // a dprintf never stops
  CHECK(v.commands_ran);
  CHECK(v.output == "rax=3\n");
  CHECK(v.error.empty());
  // Unconditional dprintf: every hit prints.
  c.set(0x2000, false, cond({}, {printf_reg0("a%d "), printf_reg0("b%d\\n")}));
  v = c.hit(0x2000, thread(9));
  CHECK_FALSE(v.report);
  CHECK(v.output == "a9 b9\n");
}

TEST_CASE("breakpoint conditions: a failing command ends the list") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({}, {printf_reg0("one%d "), deref(0x80), printf_reg0("two%d")}));
  auto v = c.hit(0x1000, thread(1));
  CHECK_FALSE(v.report);
  CHECK(v.output == "one1 ");
  CHECK(v.error.find("command") == 0);
}

TEST_CASE("breakpoint conditions: a failing condition still runs the commands (error = true)") {
  BreakpointConditions c;
  c.set(0x1000, false, cond({deref(0x80)}, {printf_reg0("x%d")}));
  auto v = c.hit(0x1000, thread(4));
  CHECK_FALSE(v.report);
  CHECK(v.output == "x4");
}
