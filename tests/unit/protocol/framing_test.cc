#include <catch2/catch.hpp>

#include "protocol/framing.h"

using namespace protocol;
using Kind = Framer::Event::Kind;

TEST_CASE("encode adds checksum and RLE", "[framing]") {
  CHECK(Framer::encode("") == "$#00");
  CHECK(Framer::encode("OK") == "$OK#9a");
  CHECK(Framer::encode("qC") == "$qC#b4");
  CHECK(Framer::encode("00000000", false) == "$00000000#80");
  std::string e = Framer::encode("00000000");
  CHECK(e.substr(0, 6) == "$0*\"00");
  CHECK(Framer::encode_notification("Stop", "T05").substr(0, 10) == "%Stop:T05#");
}

TEST_CASE("framer parses packets, acks and interrupts", "[framing]") {
  Framer f;
  auto ev = f.feed("+$qC#b4-\x03");
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].kind == Kind::Ack);
  CHECK(ev[1].kind == Kind::Packet);
  CHECK(ev[1].payload == "qC");
  CHECK(ev[2].kind == Kind::Nack);
  CHECK(ev[3].kind == Kind::Interrupt);
}

TEST_CASE("framer reassembles packets split across feeds", "[framing]") {
  Framer f;
  std::string wire = Framer::encode("vCont;c:p1.-1", false) + Framer::encode("?", false);
  std::vector<Framer::Event> all;
  for (char c : wire) {
    auto ev = f.feed(std::string_view(&c, 1));
    all.insert(all.end(), ev.begin(), ev.end());
  }
  REQUIRE(all.size() == 2);
  CHECK(all[0].payload == "vCont;c:p1.-1");
  CHECK(all[1].payload == "?");
}

TEST_CASE("framer: bad checksum, no-ack, garbage", "[framing]") {
  Framer f;
  auto ev = f.feed("$qC#00");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::BadChecksum);
  ev = f.feed("$qC#zz");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::BadChecksum);

  ev = f.feed("garbage\r\n$?#3f");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::Packet);
  CHECK(ev[0].payload == "?");

  f.set_no_ack(true);
  ev = f.feed("$qC#00$qC#xx");
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].kind == Kind::Packet);
  CHECK(ev[1].payload == "qC");

  // A '$' in the middle restarts the packet.
  ev = f.feed("$qSupp$qC#b4");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].payload == "qC");
}

TEST_CASE("framer unescapes binary payloads, 0x03 inside is data", "[framing]") {
  Framer f;
  f.set_no_ack(true);
  std::string payload = "X10,6:";
  payload += std::string{'}', '\x03', '}', '\x04', '}', ']', '}', '\x0a', '\x03', 'A'};
  auto ev = f.feed(Framer::encode(payload, false));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::Packet);
  CHECK(ev[0].payload == std::string("X10,6:#$}*\x03" "A"));
}

TEST_CASE("framer checksum covers escaped bytes", "[framing]") {
  Framer f;
  std::string payload{'X', '0', ',', '1', ':', '}', '\x03'};
  auto ev = f.feed(Framer::encode(payload, false));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::Packet);
  CHECK(ev[0].payload == "X0,1:#");
}

TEST_CASE("framer rejects oversized packets without buffering them", "[framing]") {
  Framer f(16);
  auto ev = f.feed("$" + std::string(16, 'a') + "#");
  CHECK(ev.empty());  // exactly the limit is fine so far
  ev = f.feed("00");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::BadChecksum);

  ev = f.feed("$" + std::string(1000, 'a'));
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::Oversized);
  ev = f.feed(std::string(100000, 'b') + "#00+");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].kind == Kind::Ack);
  ev = f.feed("$?#3f");
  REQUIRE(ev.size() == 1);
  CHECK(ev[0].payload == "?");
}
