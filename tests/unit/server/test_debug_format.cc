#include <catch2/catch.hpp>

#include "server/log.h"

using namespace server;

TEST_CASE("debug-format words, in order, with gdbserver's messages") {
  auto all = parse_debug_format("all");
  CHECK(all.timestamps);
  CHECK(all.said == "All extra debug format options enabled.\n");
  CHECK(all.error.empty());
  auto none = parse_debug_format("none");
  CHECK_FALSE(none.timestamps);
  CHECK(none.said == "All extra debug format options disabled.\n");
  auto ts = parse_debug_format(" timestamp");  // monitor text may start with spaces
  CHECK(ts.timestamps);
  CHECK(ts.said == "Timestamps will be added to debug output.\n");
  auto seq = parse_debug_format("all,,none");
  CHECK_FALSE(seq.timestamps);
  CHECK(seq.said == "All extra debug format options enabled.\nAll extra debug format options disabled.\n");
  auto empty = parse_debug_format("");
  CHECK_FALSE(empty.timestamps);
  CHECK(empty.said.empty());
  auto bad = parse_debug_format("all,bogus");
  CHECK(bad.error == "Unknown debug-format argument: \"bogus\"\n");
}
