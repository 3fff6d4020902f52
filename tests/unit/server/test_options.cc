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
  auto patch = parse({"--btrace-source=patch", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(patch));
  CHECK(std::get<ServerOptions>(patch).btrace_source == "patch");
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

TEST_CASE("plan-cache option: unset, a directory (made absolute), off, empty refused") {
  auto d = parse({":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(d));
  CHECK_FALSE(std::get<ServerOptions>(d).plan_cache);
  auto abs = parse({"--plan-cache=/var/tmp/plans", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(abs));
  CHECK(std::get<ServerOptions>(abs).plan_cache == "/var/tmp/plans");
  auto rel = parse({"--plan-cache", "plans", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(rel));
  auto& o = std::get<ServerOptions>(rel);
  REQUIRE(o.plan_cache);
  CHECK(o.plan_cache->front() == '/');
  CHECK(o.plan_cache->ends_with("/plans"));
  CHECK(o.program == std::vector<std::string>{"p"});
  auto off = parse({"--plan-cache=off", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(off));
  CHECK(std::get<ServerOptions>(off).plan_cache == "off");
  CHECK(std::holds_alternative<EarlyExit>(parse({"--plan-cache=", ":1", "p"})));
}

TEST_CASE("unknown options are refused with gdbserver's words, not taken for COMM") {
  auto r = parse({"--once", "--no-such-option", ":1", "prog"});
  REQUIRE(std::holds_alternative<EarlyExit>(r));
  CHECK(std::get<EarlyExit>(r).code == 1);
  CHECK(std::get<EarlyExit>(r).text == "Unknown argument: --no-such-option\n");
  auto eq = parse({"--frob=3", ":1", "prog"});
  REQUIRE(std::holds_alternative<EarlyExit>(eq));
  CHECK(std::get<EarlyExit>(eq).text == "Unknown argument: --frob=3\n");
  CHECK(std::get<EarlyExit>(parse({"-x", ":1", "prog"})).text == "Unknown argument: -x\n");
  // After COMM everything is the program's, options or not.
  auto prog = parse({":1", "prog", "--no-such-option"});
  REQUIRE(std::holds_alternative<ServerOptions>(prog));
  CHECK(std::get<ServerOptions>(prog).program == std::vector<std::string>{"prog", "--no-such-option"});
  // "-" is COMM (stdio), not an option.
  auto stdio = parse({"-", "prog"});
  REQUIRE(std::holds_alternative<ServerOptions>(stdio));
  CHECK(std::get<ServerOptions>(stdio).comm == "-");
}

TEST_CASE("option disable-packet: a list, the list of lists, or an error") {
  auto r = parse({"--once", "--disable-packet=Tthread,qC", ":1", "prog"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto d = std::get<ServerOptions>(r).disabled_packets;
  CHECK(d.t_thread);
  CHECK(d.qc);
  CHECK_FALSE(d.t_stop);
  CHECK_FALSE(d.vcont);
  auto threads = parse({"--disable-packet=threads", ":1", "prog"});
  REQUIRE(std::holds_alternative<ServerOptions>(threads));
  CHECK(std::get<ServerOptions>(threads).disabled_packets.vcont);
  CHECK(std::get<ServerOptions>(threads).disabled_packets.qf_thread_info);
  auto list = parse({"--disable-packet"});
  REQUIRE(std::holds_alternative<EarlyExit>(list));
  CHECK(std::get<EarlyExit>(list).code == 0);
  CHECK(std::get<EarlyExit>(list).text.rfind("Disableable packets:\n", 0) == 0);
  auto bad = parse({"--disable-packet=Tthreads", ":1", "prog"});
  REQUIRE(std::holds_alternative<EarlyExit>(bad));
  CHECK(std::get<EarlyExit>(bad).code == 1);
  CHECK(std::get<EarlyExit>(bad).text.rfind("Don't know how to disable \"Tthreads\".\n\nDisableable packets:\n", 0) == 0);
  // In the program's arguments it is the program's.
  auto prog = parse({":1", "prog", "--disable-packet=bogus"});
  REQUIRE(std::holds_alternative<ServerOptions>(prog));
  CHECK(std::get<ServerOptions>(prog).disabled_packets == protocol::DisabledPackets{});
}

TEST_CASE("COMM --attach PID, gdbserver's old order") {
  auto r = parse({"--once", "localhost:2346", "--attach", "4321"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK(o.attach_pid == 4321);
  CHECK(o.program.empty());
  CHECK(o.comm == "localhost:2346");
  CHECK(std::holds_alternative<EarlyExit>(parse({":1", "--attach"})));
  CHECK(std::holds_alternative<EarlyExit>(parse({":1", "--attach", "1", "2"})));
  // Only right after COMM: later it is an argument of the program.
  auto prog = parse({":1", "prog", "--attach", "5"});
  REQUIRE(std::holds_alternative<ServerOptions>(prog));
  CHECK_FALSE(std::get<ServerOptions>(prog).attach_pid);
}

TEST_CASE("option wrapper is looked for only among the options") {
  auto r = parse({":1", "prog", "--wrapper", "x", "--"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK(o.wrapper.empty());
  CHECK(o.program == std::vector<std::string>{"prog", "--wrapper", "x", "--"});
  // A separate option value is not COMM.
  auto df = parse({"--debug-file", "/tmp/x", ":1", "prog"});
  REQUIRE(std::holds_alternative<ServerOptions>(df));
  CHECK(std::get<ServerOptions>(df).debug_file == "/tmp/x");
  CHECK(std::get<ServerOptions>(df).comm == ":1");
}

TEST_CASE("option selftest needs no COMM, an empty filter is refused") {
  auto r = parse({"--selftest"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  CHECK(std::get<ServerOptions>(r).selftest);
  CHECK(std::get<ServerOptions>(r).selftest_filters.empty());
  auto f = parse({"--selftest=packets", "--selftest=framing"});
  REQUIRE(std::holds_alternative<ServerOptions>(f));
  CHECK(std::get<ServerOptions>(f).selftest_filters == std::vector<std::string>{"packets", "framing"});
  auto empty = parse({"--selftest="});
  REQUIRE(std::holds_alternative<EarlyExit>(empty));
  CHECK(std::get<EarlyExit>(empty).text == "Error: selftest filter is empty.\n");
}

TEST_CASE("file writes: allowed by default, --no-file-writes refuses, --allow-file-writes accepted") {
  auto d = parse({":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(d));
  CHECK(std::get<ServerOptions>(d).allow_file_writes);
  auto no = parse({"--no-file-writes", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(no));
  CHECK_FALSE(std::get<ServerOptions>(no).allow_file_writes);
  auto yes = parse({"--allow-file-writes", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(yes));
  CHECK(std::get<ServerOptions>(yes).allow_file_writes);
}

TEST_CASE("gdbserver's debug options: --event-loop-debug, --debug-format") {
  auto r = parse({"--event-loop-debug", "--debug-format=timestamp", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  CHECK(std::get<ServerOptions>(r).event_loop_debug);
  CHECK(std::get<ServerOptions>(r).debug_timestamps);
  auto none = parse({"--debug-format=all,none", ":1", "p"});
  REQUIRE(std::holds_alternative<ServerOptions>(none));
  CHECK_FALSE(std::get<ServerOptions>(none).debug_timestamps);
  auto bad = parse({"--debug-format=colour", ":1", "p"});
  REQUIRE(std::holds_alternative<EarlyExit>(bad));
  CHECK(std::get<EarlyExit>(bad).text == "Unknown debug-format argument: \"colour\"\n");
}

TEST_CASE("the shipped parser knows no --test-* option, a hook takes its own before COMM") {
  for (const char* opt : {"--test-bts-ring=/tmp/r", "--test-pt-aux=/tmp/a", "--test-lbr-snapshots=/tmp/s",
                          "--test-singleblock", "--test-patch-ring=4096", "--test-history-piece=64"}) {
    auto r = parse({opt, ":1234", "./prog"});
    REQUIRE(std::holds_alternative<EarlyExit>(r));
    CHECK(std::get<EarlyExit>(r).code == 1);
    CHECK(std::get<EarlyExit>(r).text == std::string("Unknown argument: ") + opt + "\n");
  }
  // The test build's hook (tests/support/branchstub_test_main.cc) sees every option before COMM,
  // and only those: what follows COMM is the program's.
  std::vector<std::string> taken;
  OptionHook hook = [&](const std::string& arg) {
    if (!arg.starts_with("--test-")) return false;
    taken.push_back(arg);
    return true;
  };
  std::vector<const char*> args = {"branchstub", "--once", "--test-bts-ring=/tmp/r", "--debug-file", "/tmp/log",
                                   "--test-singleblock", ":1234", "./prog", "--test-pt-aux=/tmp/a"};
  auto r = parse_command_line(static_cast<int>(args.size()), args.data(), hook);
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& o = std::get<ServerOptions>(r);
  CHECK(taken == std::vector<std::string>{"--test-bts-ring=/tmp/r", "--test-singleblock"});
  CHECK(o.once);
  CHECK(o.debug_file == "/tmp/log");
  CHECK(o.program == std::vector<std::string>{"./prog", "--test-pt-aux=/tmp/a"});
  // not advertised
  auto help = parse({"--help"});
  CHECK(std::get<EarlyExit>(help).text.find("--test-") == std::string::npos);
}

TEST_CASE("record and replay commands, a program named record after COMM is a program") {
  auto r = parse({"record", "-o", "/tmp/t", "./prog", "-o", "x"});
  REQUIRE(std::holds_alternative<ServerOptions>(r));
  auto& rec = std::get<ServerOptions>(r);
  CHECK(rec.record);
  CHECK(rec.record_dir == "/tmp/t");
  CHECK(rec.program == std::vector<std::string>{"./prog", "-o", "x"});
  auto plain = std::get<ServerOptions>(parse({"record", "prog"}));
  CHECK(plain.record_dir.empty());
  CHECK(std::holds_alternative<EarlyExit>(parse({"record"})));
  CHECK(std::holds_alternative<EarlyExit>(parse({"record", "--bogus", "prog"})));
  // What counts the branches: patch (auto) or the software engine alone.
  auto soft = std::get<ServerOptions>(parse({"record", "--btrace-source=soft", "-o", "d", "prog", "--btrace-source=x"}));
  CHECK(soft.btrace_source == "soft");
  CHECK(soft.record_dir == "d");
  CHECK(soft.program == std::vector<std::string>{"prog", "--btrace-source=x"});
  CHECK(std::get<ServerOptions>(parse({"record", "--btrace-source=patch", "prog"})).btrace_source == "patch");
  CHECK(std::get<ServerOptions>(parse({"record", "prog"})).btrace_source == "auto");
  CHECK(std::holds_alternative<EarlyExit>(parse({"record", "--btrace-source=bts", "prog"})));

  auto rp = std::get<ServerOptions>(parse({"replay", "--once", ":2345", "/tmp/t"}));
  CHECK(rp.replay_dir == std::optional<std::string>("/tmp/t"));
  CHECK(rp.once);
  CHECK(rp.comm == ":2345");
  auto latest = std::get<ServerOptions>(parse({"replay", ":2345"}));
  CHECK(latest.replay_dir == std::optional<std::string>(""));  // the latest trace
  CHECK(std::holds_alternative<EarlyExit>(parse({"replay", ":1", "a", "b"})));
  CHECK(std::holds_alternative<EarlyExit>(parse({"replay", "--attach", ":1", "12"})));

  auto program = std::get<ServerOptions>(parse({":2345", "record", "arg"}));
  CHECK(!program.record);
  CHECK(!program.replay_dir);
  CHECK(program.program == std::vector<std::string>{"record", "arg"});
}
