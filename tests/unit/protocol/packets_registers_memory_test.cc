// Parsing the register and memory packets (protocol/packets/registers_memory.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("registers and memory", "[packets][registers_memory]") {
  CHECK_FALSE(as<ReadRegisters>("g").thread_suffix);
  CHECK(as<ReadRegisters>("g;thread:0b2a;").thread_suffix == 0xb2a);
  auto G = as<WriteRegisters>("G0011ff;thread:12;");
  CHECK(G.data == std::vector<uint8_t>{0x00, 0x11, 0xff});
  CHECK(G.thread_suffix == 0x12);
  CHECK(malformed("G001"));
  auto p = as<ReadRegister>("p10");
  CHECK(p.regno == 0x10);
  CHECK(as<ReadRegister>("p0;thread:0b2a;").thread_suffix == 0xb2a);
  CHECK(malformed("p"));
  CHECK(malformed("p0;thread:zz;"));
  auto P = as<WriteRegister>("P39=ffffffffffffffff");
  CHECK(P.regno == 0x39);
  CHECK(P.value == std::vector<uint8_t>(8, 0xff));
  CHECK(as<WriteRegister>("P10=0100000000000000;thread:7;").thread_suffix == 7);
  CHECK(malformed("P10"));

  auto m = as<ReadMemory>("m555555554040,2d8");
  CHECK(m.addr == 0x555555554040u);
  CHECK(m.length == 0x2d8u);
  CHECK_FALSE(m.binary);
  CHECK(as<ReadMemory>("x0,0").binary);
  // GDB 16's x, as remote_read_bytes_1 writes it.
  auto x = as<ReadMemory>("x555555554000,8");
  CHECK(x.binary);
  CHECK(x.addr == 0x555555554000u);
  CHECK(x.length == 8u);
  CHECK(malformed("x555555554000"));
  // Huge lengths are just numbers.
  CHECK(as<ReadMemory>("m0,ffffffffffffffff").length == UINT64_MAX);
  CHECK(malformed("m10"));
  CHECK(malformed("m,10"));
  auto M = as<WriteMemory>("M1000,2:abcd");
  CHECK(M.addr == 0x1000u);
  CHECK(M.data == std::vector<uint8_t>{0xab, 0xcd});
  CHECK(malformed("M1000,3:abcd"));
  CHECK(malformed("M1000,ffffffffffffffff:ab"));
  CHECK(as<WriteMemory>("X55555555802c,0:").data.empty());
  auto X = as<WriteMemory>(std::string_view("X10,4:\x05\0#*", 10));
  CHECK(X.data == std::vector<uint8_t>{0x05, 0x00, '#', '*'});
  CHECK(malformed("X10,5:abcd"));
}
