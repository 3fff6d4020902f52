// Every feature the server advertises is served: each qSupported row's probe packet, and a read
// of each qXfer object listed, get an answer that is not the empty "unsupported" reply.
#include <catch2/catch.hpp>

#include <sstream>

#include "backend/features.h"
#include "protocol/packets.h"
#include "server/capabilities.h"
#include "protocol/qsupported.h"
#include "tests/unit/server/session_harness.h"

using fake::SessionHarness;

namespace {

std::vector<std::string> listed(const std::string& reply) {
  std::vector<std::string> out;
  std::istringstream in(reply);
  for (std::string f; std::getline(in, f, ';');) out.push_back(f);
  return out;
}

bool has(const std::vector<std::string>& features, std::string_view name) {
  return std::find(features.begin(), features.end(), name) != features.end();
}

void check_every_feature(SessionHarness& h, std::string_view offer) {
  auto features = listed(h.request(std::string(offer)));
  REQUIRE(features.size() > 5);
  int probed = 0;
  for (const auto& row : protocol::feature_rows()) {
    if (!has(features, row.name) || row.probe.empty()) continue;
    INFO("feature " << row.name << ", probe " << row.probe);
    CHECK_FALSE(h.request(std::string(row.probe)).empty());
    ++probed;
  }
  for (const auto& o : protocol::xfer_objects()) {
    std::string name = "qXfer:" + std::string(o.name) + ":read+";
    if (!has(features, name)) continue;
    std::string annex = o.name == "features" ? "target.xml" : o.name == "btrace" ? "all" : "";
    std::string packet = "qXfer:" + std::string(o.name) + ":read:" + annex + ":0,40";
    INFO("feature " << name << ", probe " << packet);
    CHECK_FALSE(h.request(packet).empty());
    ++probed;
  }
  CHECK(probed > 15);
}

}  // namespace

TEST_CASE("capabilities: every feature advertised to GDB answers its packet") {
  SessionHarness h;
  h.add_process(0x64);
  check_every_feature(h, SessionHarness::kGdbOffer);
}

TEST_CASE("capabilities: every feature advertised to LLDB answers its packet") {
  SessionHarness h;
  h.add_process(0x64);
  check_every_feature(h, SessionHarness::kLldbOffer);
}

TEST_CASE("capabilities: target-side conditions and commands follow the backend's features") {
  backend::Features f;
  auto c = server::derive_capabilities(f);
  CHECK_FALSE(c.has(protocol::Capability::ConditionalBreakpoints));
  CHECK_FALSE(c.has(protocol::Capability::BreakpointCommands));
  f.breakpoint_commands = true;  // commands travel in the conditions' Z packets: not alone
  c = server::derive_capabilities(f);
  CHECK_FALSE(c.has(protocol::Capability::BreakpointCommands));
  f.breakpoint_conditions = true;
  c = server::derive_capabilities(f);
  CHECK(c.has(protocol::Capability::ConditionalBreakpoints));
  CHECK(c.has(protocol::Capability::BreakpointCommands));
  // What this backend reports on any machine.
  auto everywhere = backend::supported_features(backend::ProbeReport{});
  CHECK(everywhere.breakpoint_conditions);
  CHECK(everywhere.breakpoint_commands);
}
