// Parsing the branch trace packets (protocol/packets/btrace.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("btrace packets", "[packets][btrace]") {
  CHECK(as<BtraceEnable>("Qbtrace:bts").format == "bts");
  CHECK(as<BtraceEnable>("Qbtrace:pt").format == "pt");
  CHECK(as<BtraceEnable>("Qbtrace:off").format == "off");
  CHECK(as<BtraceEnable>("Qbtrace:foo").format == "foo");
  auto c = as<BtraceConf>("Qbtrace-conf:bts:size=0x10000");
  CHECK(c.format == "bts");
  CHECK(c.key == "size");
  CHECK(c.value == "0x10000");
  auto bad = as<BtraceConf>("Qbtrace-conf:what");
  CHECK(bad.format == "what");
  CHECK(bad.key.empty());
}

TEST_CASE("btrace packets: GDB 15's PT options", "[packets][btrace]") {
  // Sent as gdb/remote.c writes them: the value quoted.
  auto w = as<BtraceConf>("Qbtrace-conf:pt:ptwrite=\"yes\"");
  CHECK(w.format == "pt");
  CHECK(w.key == "ptwrite");
  CHECK(w.value == "\"yes\"");
  auto e = as<BtraceConf>("Qbtrace-conf:pt:event-tracing=\"no\"");
  CHECK(e.key == "event-tracing");
  CHECK(e.value == "\"no\"");
}
