#include <catch2/catch.hpp>

#include "server/read_ahead.h"

using namespace server;
using protocol::ReadMemory;

TEST_CASE("read-ahead: only bulk reads have a next block") {
  CHECK_FALSE(ReadAhead::next_after(ReadMemory{0x1000, 0x40, false}));   // a stack read
  CHECK_FALSE(ReadAhead::next_after(ReadMemory{0x1000, 0xfff, false}));
  auto next = ReadAhead::next_after(ReadMemory{0x10000, 0x10000, false});
  REQUIRE(next);
  CHECK(next->addr == 0x20000);
  CHECK(next->length == 0x10000);
  CHECK_FALSE(next->binary);
  CHECK(ReadAhead::next_after(ReadMemory{0x10000, 0x10000, true})->binary);
  CHECK_FALSE(ReadAhead::next_after(ReadMemory{~0ull - 0x100, 0x1000, false}));  // would wrap
}

TEST_CASE("read-ahead: served once, only for exactly the kept block") {
  ReadAhead ra;
  ReadMemory block{0x20000, 0x10000, false};
  ra.keep(block, "abcd", "$abcd#8a");
  CHECK(ra.holding());
  auto got = ra.take(block);
  REQUIRE(got);
  CHECK(got->payload == "abcd");
  CHECK(got->framed == "$abcd#8a");
  CHECK_FALSE(ra.holding());
  CHECK_FALSE(ra.take(block));  // once only

  ra.keep(block, "abcd", "$abcd#8a");
  CHECK_FALSE(ra.take(ReadMemory{0x20000, 0x8000, false}));  // another length: dropped
  CHECK_FALSE(ra.take(block));

  ra.keep(block, "abcd", "$abcd#8a");
  CHECK_FALSE(ra.take(ReadMemory{0x20000, 0x10000, true}));   // binary vs hex
  ra.keep(block, "abcd", "$abcd#8a");
  ra.drop();
  CHECK_FALSE(ra.take(block));
}
