#include "server/selftest.h"

#include <fmt/format.h>

#include <source_location>
#include <string_view>
#include <variant>

#include "backend/probe/probe.h"
#include "protocol/framing.h"
#include "protocol/packets.h"
#include "protocol/qsupported.h"
#include "protocol/replies.h"

namespace server {

namespace {

void check(bool ok, std::string_view what, std::source_location where = std::source_location::current()) {
  if (!ok) throw SelfTestFailure(fmt::format("{}:{}: {}", where.file_name(), where.line(), what));
}

// One packet framed as a client sends it and read back, and one with a run long enough for
// RLE (as we reply) whose checksum holds: the framing as built.
void framing() {
  using Kind = protocol::Framer::Event::Kind;
  const std::string payload = "T05thread:p1.1;" + std::string(40, '0');
  protocol::Framer framer;
  auto plain = framer.feed(protocol::Framer::encode(payload, false));
  check(plain.size() == 1 && plain[0].kind == Kind::Packet && plain[0].payload == payload,
        "a framed packet comes back whole");
  std::string packed = protocol::Framer::encode(payload);
  check(packed.size() < payload.size(), "the run is compressed");
  auto rle = framer.feed(packed);
  check(rle.size() == 1 && rle[0].kind == Kind::Packet, "the RLE frame's checksum is right");
}

// A client's frame parsed as a request, its dialect negotiated, a stop reply framed back: the
// path every session takes, end to end (the cases are in tests/unit/protocol).
void round_trip() {
  using namespace protocol;
  Framer in;
  auto events = in.feed(Framer::encode("qSupported:multiprocess+;swbreak+", false));
  check(events.size() == 1 && events[0].kind == Framer::Event::Kind::Packet, "one packet from the client");
  Request request = parse_request(events[0].payload);
  const auto* supported = std::get_if<QuerySupported>(&request);
  check(supported != nullptr, "qSupported parses as such");
  StopReply stop;
  stop.gdb_signal = 5;
  stop.pid = 0x1a;
  stop.tid = 0x1b;
  stop.reason = StopReason::Breakpoint;
  std::string reply = format_stop_reply(stop, negotiate(*supported));
  check(reply == "T05swbreak:;thread:p1a.1b;", fmt::format("the stop reply in the negotiated dialect (got {})", reply));
  Framer out;
  auto back = out.feed(Framer::encode(reply));
  check(back.size() == 1 && back[0].payload == reply, "the framed reply reads back");
}

// The probe runs in this binary's environment (it forks traced children) and says something.
void probe() {
  auto report = backend::run_probe();
  check(!report.items.empty() && !backend::format_probe(report).empty(), "the probe reports");
}

}  // namespace

const std::vector<SelfTest>& builtin_selftests() {
  static const std::vector<SelfTest> tests = {
      {"protocol-framing", framing},
      {"protocol-round-trip", round_trip},
      {"backend-probe", probe},
  };
  return tests;
}

SelfTestSummary run_selftests(const std::vector<SelfTest>& tests, const std::vector<std::string>& filters) {
  SelfTestSummary summary;
  for (const auto& test : tests) {
    bool selected = filters.empty();
    for (const auto& f : filters) selected = selected || test.name.find(f) != std::string::npos;
    if (!selected) continue;
    summary.output += fmt::format("Running selftest {}.\n", test.name);
    ++summary.ran;
    try {
      test.run();
    } catch (const std::exception& e) {
      ++summary.failed;
      summary.output += fmt::format("Self test failed: {}\n", e.what());
    }
  }
  summary.output += fmt::format("Ran {} unit tests, {} failed\n", summary.ran, summary.failed);
  return summary;
}

}  // namespace server
