// Parsing the thread-local storage packets (protocol/packets/tls.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("qGetTLSAddr", "[packets][tls]") {
  // As GDB sends it with multiprocess (remote.c get_thread_local_address): ptid,offset,lm.
  auto t = as<GetTlsAddress>("qGetTLSAddr:p1a2b.1a2c,10,7ffff7ffe2e0");
  CHECK(t.thread == ThreadId{0x1a2b, 0x1a2c});
  CHECK(t.offset == 0x10);
  CHECK(t.lm == 0x7ffff7ffe2e0);
  // Without multiprocess; lm 0 is a static program.
  auto s = as<GetTlsAddress>("qGetTLSAddr:1a2c,fffffffffffffffc,0");
  CHECK(s.thread == ThreadId{std::nullopt, 0x1a2c});
  CHECK(s.offset == 0xfffffffffffffffc);
  CHECK(s.lm == 0);
  CHECK(malformed("qGetTLSAddr:"));
  CHECK(malformed("qGetTLSAddr:1a2c"));
  CHECK(malformed("qGetTLSAddr:1a2c,10"));
  CHECK(malformed("qGetTLSAddr:1a2c,10,0,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,10,"));
  CHECK(malformed("qGetTLSAddr:zz,10,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,1g,0"));
  CHECK(malformed("qGetTLSAddr:1a2c,10000000000000000,0"));
  CHECK(unknown("qGetTLSAddr"));
  CHECK(unknown("qGetTIBAddr:1a2c"));
}
