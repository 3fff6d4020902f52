#include <catch2/catch.hpp>

#include "server/options.h"

using namespace server;

namespace {
std::variant<ServerOptions, EarlyExit> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "branchstub");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}
}  // namespace

TEST_CASE("COMM forms: loopback by default, exact host otherwise, stdio") {
  auto a = parse_comm(":1234");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == "1234");
  CHECK(parse_comm("0.0.0.0:99")->host == "0.0.0.0");
  CHECK(parse_comm("[::1]:99")->host == "::1");
  CHECK(parse_comm("-")->stdio);
  CHECK(parse_comm("stdio")->stdio);
  CHECK_FALSE(parse_comm("nocolon"));
  CHECK_FALSE(parse_comm("host:"));
  CHECK_FALSE(parse_comm("host:12ab"));
}

TEST_CASE("program and its arguments stay together, options before COMM") {
  auto r = parse({"--once", "--debug", ":2345", "./prog", "--once", "-x"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK(o.once);
  CHECK(o.debug);
  CHECK(o.comm == ":2345");
  CHECK(o.program == std::vector<std::string>{"./prog", "--once", "-x"});
}

TEST_CASE("attach and multi command lines") {
  auto r = parse({"--attach", ":1", "4321"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  CHECK(std::get<ServerOptions>(r).attach_pid == 4321);
  auto bad = parse({"--attach", ":1", "12x"});
  CHECK(std::holds_alternative<EarlyExit>(bad));
  auto m = parse({"--multi", ":1"});
  REQUIRE(std::holds_alternative<ServerOptions>(m));
  CHECK(std::get<ServerOptions>(m).multi);
  CHECK(std::get<ServerOptions>(m).program.empty());
}

TEST_CASE("wrapper arguments run up to the double dash") {
  auto r = parse({"--wrapper", "env", "A=1", "--", ":1", "prog"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK(o.wrapper == std::vector<std::string>{"env", "A=1"});
  CHECK(o.program == std::vector<std::string>{"prog"});
  CHECK(std::holds_alternative<EarlyExit>(parse({"--wrapper", "env", ":1", "prog"})));
}

TEST_CASE("shell, randomization, btrace source, version and help") {
  auto r = parse({"--no-startup-with-shell", "--no-disable-randomization", "--btrace-source=soft", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK_FALSE(o.startup_with_shell);
  CHECK_FALSE(o.disable_randomization);
  CHECK(o.btrace_source == "soft");
  CHECK(std::holds_alternative<EarlyExit>(parse({"--btrace-source=magic", ":1", "p"})));
  auto v = parse({"--version"});
  REQUIRE(std::holds_alternative<EarlyExit>(v));
  CHECK(std::get<EarlyExit>(v).code == 0);
  CHECK(std::get<EarlyExit>(v).text.find("branchstub") != std::string::npos);
  CHECK(std::get<EarlyExit>(parse({"--help"})).code == 0);
  CHECK(std::get<EarlyExit>(parse({})).code != 0);
  CHECK(std::get<EarlyExit>(parse({":1"})).code != 0);  // no program, not --multi
}

TEST_CASE("busy-poll option: default, explicit, off, bad values") {
  auto d = parse({":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(d));
  CHECK(std::get<ServerOptions>(d).busy_poll_us == 200);
  auto r = parse({"--busy-poll=50", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  CHECK(std::get<ServerOptions>(r).busy_poll_us == 50);
  auto off = parse({"--busy-poll", "0", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(off));
  CHECK(std::get<ServerOptions>(off).busy_poll_us == 0);
  CHECK(std::holds_alternative<EarlyExit>(parse({"--busy-poll=-1", ":1", "p"})));
  CHECK(std::holds_alternative<EarlyExit>(parse({"--busy-poll=soon", ":1", "p"})));
  CHECK(std::holds_alternative<EarlyExit>(parse({"--busy-poll=1000000", ":1", "p"})));
}
