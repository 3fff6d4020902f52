// Parsing the monitor command packet (protocol/packets/monitor.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("qRcmd", "[packets][monitor]") {
  CHECK(as<Monitor>("qRcmd,68656c70").command == "help");
  CHECK(as<Monitor>("qRcmd,").command.empty());
  CHECK(malformed("qRcmd,6"));
  CHECK(unknown("qRcmd"));
}
