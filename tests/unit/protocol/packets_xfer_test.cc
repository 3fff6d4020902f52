// Parsing the qXfer packets (protocol/packets/xfer.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("qXfer", "[packets][xfer]") {
  auto x = as<XferRead>("qXfer:features:read:target.xml:0,1000");
  CHECK(x.object == "features");
  CHECK(x.annex == "target.xml");
  CHECK(x.offset == 0u);
  CHECK(x.length == 0x1000u);
  auto t = as<XferRead>("qXfer:threads:read::3000,fff");
  CHECK(t.annex.empty());
  CHECK(t.offset == 0x3000u);
  CHECK(as<XferRead>("qXfer:btrace:read:delta:0,1000").annex == "delta");
  CHECK(as<XferRead>("qXfer:libraries-svr4:read:start=0;prev=1:0,1000").annex == "start=0;prev=1");
  CHECK(unknown("qXfer:siginfo:erase::0,10"));
  CHECK(malformed("qXfer:features:read:target.xml"));
  CHECK(malformed("qXfer:features:read:target.xml:0"));
}

TEST_CASE("qXfer write", "[packets][xfer]") {
  auto w = as<XferWrite>("qXfer:siginfo:write::0:abcd");
  CHECK(w.object == "siginfo");
  CHECK(w.annex.empty());
  CHECK(w.offset == 0u);
  CHECK(w.data == std::vector<uint8_t>{'a', 'b', 'c', 'd'});
  // The data is binary (already unescaped by the framer): ':' ',' and NUL are data bytes.
  using namespace std::string_view_literals;
  auto b = as<XferWrite>("qXfer:siginfo:write::1a:\x0b:,\0\xff"sv);
  CHECK(b.offset == 0x1au);
  CHECK(b.data == std::vector<uint8_t>{0x0b, ':', ',', 0x00, 0xff});
  auto named = as<XferWrite>("qXfer:siginfo:write:3/mem:10:x");
  CHECK(named.object == "siginfo");
  CHECK(named.annex == "3/mem");
  CHECK(named.offset == 0x10u);
  CHECK(unknown("qXfer:spu:write:3/mem:10:x"));  // an object the server does not have
  CHECK(as<XferWrite>("qXfer:siginfo:write::0:").data.empty());
  CHECK(malformed("qXfer:siginfo:write::0"));
  CHECK(malformed("qXfer:siginfo:write:"));
  CHECK(malformed("qXfer:siginfo:write::zz:ab"));
  CHECK(malformed("qXfer:siginfo:write:::ab"));
}
