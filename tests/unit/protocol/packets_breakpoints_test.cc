// Parsing the breakpoint packets (protocol/packets/breakpoints.h).
#include <catch2/catch.hpp>

#include "protocol/hex.h"
#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("breakpoints", "[packets][breakpoints]") {
  auto z = as<InsertBreakpoint>("Z0,555555555149,1");
  CHECK(z.type == BreakpointType::Software);
  CHECK(z.addr == 0x555555555149u);
  CHECK(z.kind == 1u);
  CHECK(z.conditions.empty());
  CHECK_FALSE(z.commands);
  auto zc = as<InsertBreakpoint>("Z0,10,1;X2,0a0b;cmds:0,X1,27");
  CHECK(zc.addr == 0x10u);
  CHECK(zc.conditions == std::vector<std::vector<uint8_t>>{{0x0a, 0x0b}});
  REQUIRE(zc.commands);
  CHECK_FALSE(zc.commands->persist);
  CHECK(zc.commands->bytecodes == std::vector<std::vector<uint8_t>>{{0x27}});
  CHECK(as<RemoveBreakpoint>("z2,55555555802c,4").type == BreakpointType::WriteWatch);
  CHECK(as<InsertBreakpoint>("Z4,1,8").type == BreakpointType::AccessWatch);
  CHECK(unknown("Z5,1,1"));
  CHECK(malformed("Z0,1"));
  CHECK(malformed("Z0,zz,1"));
}

namespace {
std::vector<uint8_t> bytes(std::string_view hex) { return from_hex(hex).value(); }
using Codes = std::vector<std::vector<uint8_t>>;
}  // namespace

// Z packets GDB 13.1 sent to gdbserver (set debug remote 1) with `set breakpoint
// condition-evaluation target` and `set dprintf-style agent`.

TEST_CASE("breakpoint conditions and commands from GDB", "[packets][breakpoints]") {
  // break foo if x > 3 && *p == 7
  const char* cond = "26000622100222dc16080219162022032b1420001821003526000622100222d01608021a1916202207132000302100352201210037220027";
  auto z = as<InsertBreakpoint>(std::string("Z0,555555555151,1;X38,") + cond);
  CHECK(z.type == BreakpointType::Software);
  CHECK(z.addr == 0x555555555151u);
  CHECK(z.kind == 1u);
  REQUIRE(z.conditions.size() == 1);
  CHECK(z.conditions[0] == bytes(cond));
  CHECK(z.conditions[0].size() == 0x38);
  CHECK_FALSE(z.commands);

  // Two breakpoints at one address: break foo if x == 1; break foo if *s == 111 && sp->c < -4
  auto two = as<InsertBreakpoint>(
      "Z0,555555555151,1;X12,26000622100222dc16080219162022011327X3d,26000622100222c81608021a171608226f13"
      "20001821003a26000622100222c01608021a22040217160822fc16081420003521003a220121003c220027");
  REQUIRE(two.conditions.size() == 2);
  CHECK(two.conditions[0] == bytes("26000622100222dc16080219162022011327"));
  CHECK(two.conditions[1].size() == 0x3d);
  CHECK(two.conditions[1].back() == 0x27);

  // hbreak foo if x == 2
  auto hw = as<InsertBreakpoint>("Z1,555555555151,1;X12,26000622100222dc16080219162022021327");
  CHECK(hw.type == BreakpointType::Hardware);
  CHECK(hw.conditions == Codes{bytes("26000622100222dc16080219162022021327")});

  // dprintf foo,"x=%d s=%s\n",x,s
  const char* printf_code = "26000622100222c81608021a26000622100222dc160802191620220022003402000c783d256420733d25735c6e0027";
  auto d = as<InsertBreakpoint>(std::string("Z0,555555555151,1;cmds:1,X2f,") + printf_code);
  CHECK(d.conditions.empty());
  REQUIRE(d.commands);
  CHECK(d.commands->persist);
  CHECK(d.commands->bytecodes == Codes{bytes(printf_code)});

  // dprintf foo,"hit x=%d\n",x ; condition 1 x > 8
  auto dc = as<InsertBreakpoint>(
      "Z0,555555555151,1;X13,26000622100222dc16080219162022082b1427;"
      "cmds:1,X22,26000622100222dc160802191620220022003401000b68697420783d25645c6e0027");
  CHECK(dc.conditions == Codes{bytes("26000622100222dc16080219162022082b1427")});
  REQUIRE(dc.commands);
  REQUIRE(dc.commands->bytecodes.size() == 1);
  CHECK(dc.commands->bytecodes[0].size() == 0x22);

  // dprintf foo,"first x=%d\n",x ; dprintf foo,"second x=%d\n",x  (one cmds: token)
  auto two_cmds = as<InsertBreakpoint>(
      "Z0,555555555151,1;cmds:1,X24,26000622100222dc160802191620220022003401000d666972737420783d25645c6e0027"
      "X25,26000622100222dc160802191620220022003401000e7365636f6e6420783d25645c6e0027");
  REQUIRE(two_cmds.commands);
  REQUIRE(two_cmds.commands->bytecodes.size() == 2);
  CHECK(two_cmds.commands->bytecodes[0].size() == 0x24);
  CHECK(two_cmds.commands->bytecodes[1].size() == 0x25);
  CHECK(two_cmds.commands->bytecodes[1].back() == 0x27);
}

TEST_CASE("breakpoint options: grammar and bounds", "[packets][breakpoints]") {
  // Several commands back to back, persist 0, upper-case hex, an empty expression.
  auto z = as<InsertBreakpoint>("Z0,1,1;cmds:0,X1,27X2,0A0B");
  REQUIRE(z.commands);
  CHECK_FALSE(z.commands->persist);
  CHECK(z.commands->bytecodes == std::vector<std::vector<uint8_t>>{{0x27}, {0x0a, 0x0b}});
  CHECK(as<InsertBreakpoint>("Z0,1,1;X0,").conditions == std::vector<std::vector<uint8_t>>{{}});
  // Empty tokens and a trailing ';' are fine; unknown tokens are skipped, as gdbserver does.
  CHECK(as<InsertBreakpoint>("Z0,1,1;").conditions.empty());
  CHECK(as<InsertBreakpoint>("Z0,1,1;;X1,27;").conditions.size() == 1);
  auto skip = as<InsertBreakpoint>("Z0,1,1;future:1,2;X1,27");
  CHECK(skip.conditions.size() == 1);
  CHECK_FALSE(skip.commands);
  // Watchpoints parse the same options (GDB sends none).
  CHECK(as<InsertBreakpoint>("Z2,1000,4;X1,27").conditions.size() == 1);
  // z ignores whatever follows, as before.
  CHECK(as<RemoveBreakpoint>("z0,1,1;X2,zz").addr == 1u);

  CHECK(malformed("Z0,1,1;X"));
  CHECK(malformed("Z0,1,1;X1"));
  CHECK(malformed("Z0,1,1;X,27"));
  CHECK(malformed("Z0,1,1;Xg,27"));
  CHECK(malformed("Z0,1,1;X2,27"));          // shorter than its length
  CHECK(malformed("Z0,1,1;X1,2"));
  CHECK(malformed("Z0,1,1;X1,zz"));
  CHECK(malformed("Z0,1,1;X1,2727"));        // longer: junk after the expression
  CHECK(malformed("Z0,1,1;X1,27junk"));
  CHECK(malformed("Z0,1,1;Xffffffffffffffff,27"));   // no allocation from a bad length
  CHECK(malformed("Z0,1,1;X10000000000000000,27"));
  CHECK(malformed("Z0,1,1;X7fffffffffffffff,2727"));
  CHECK(malformed("Z0,1,1;cmds:"));
  CHECK(malformed("Z0,1,1;cmds:1"));
  CHECK(malformed("Z0,1,1;cmds:1,"));
  CHECK(malformed("Z0,1,1;cmds:2,X1,27"));
  CHECK(malformed("Z0,1,1;cmds:1X1,27"));
  CHECK(malformed("Z0,1,1;cmds:1,27"));
  CHECK(malformed("Z0,1,1;cmds:1,X1,27junk"));
  CHECK(malformed("Z0,1,1;cmds:1,X1,27;cmds:0,X1,27"));
  CHECK(malformed("Z0,1,1;X1,27;cmds:1,X1,zz"));
}
