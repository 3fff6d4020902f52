#include "server/options.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <filesystem>

#include "server/log.h"

namespace server {

namespace {

constexpr const char* kUsage =
    "Usage:\tbranchstub [OPTIONS] COMM PROG [ARGS ...]\n"
    "\tbranchstub [OPTIONS] --attach COMM PID   (or COMM --attach PID)\n"
    "\tbranchstub [OPTIONS] --multi COMM\n"
    "\tbranchstub --probe\n"
    "\tbranchstub --selftest[=FILTER]\n"
    "\tbranchstub record [-o DIR] [--btrace-source=auto|patch|soft] [--syscall-buffer=on|off] PROG [ARGS ...]\n"
    "\tbranchstub replay [OPTIONS] COMM [DIR]\n"
    "\tbranchstub --coverage FILE [--coverage-format=drcov|drcov3|lcov] [--svg[=FILE]] PROG [ARGS ...]\n"
    "\n"
    "COMM may either be a tty device (for serial debugging),\n"
    "HOST:PORT to listen for a TCP connection (bound exactly to HOST),\n"
    ":PORT to listen on 127.0.0.1 only, or '-' or 'stdio' to use stdin/stdout.\n";

std::optional<pid_t> parse_pid(const std::string& text) {
  pid_t pid = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || ptr != text.data() + text.size() || pid <= 0) return std::nullopt;
  return pid;
}

}  // namespace

std::optional<ListenAddress> parse_comm(const std::string& comm) {
  if (comm == "-" || comm == "stdio") return ListenAddress{true, {}, {}};
  auto colon = comm.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  ListenAddress address;
  address.host = comm.substr(0, colon);
  address.port = comm.substr(colon + 1);
  if (address.port.empty() || address.port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  // gdbserver ignores the host and listens on every interface; we bind loopback unless told.
  if (address.host.empty()) address.host = "127.0.0.1";
  if (address.host.size() > 2 && address.host.front() == '[' && address.host.back() == ']')
    address.host = address.host.substr(1, address.host.size() - 2);
  return address;
}

namespace {

// branchstub record [-o DIR] [--btrace-source=auto|patch|soft] [--syscall-buffer=on|off] PROG [ARGS...]
std::variant<ServerOptions, EarlyExit> parse_record(int argc, const char* const* argv) {
  ServerOptions options;
  options.record = true;
  int i = 2;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-o" || arg == "--output") {
      if (i + 1 >= argc) return EarlyExit{1, "branchstub record: -o needs a directory.\n"};
      options.record_dir = argv[++i];
    } else if (arg.starts_with("--output=")) {
      options.record_dir = arg.substr(9);
    } else if (arg == "--btrace-source=soft" || arg == "--btrace-source=patch" || arg == "--btrace-source=auto") {
      options.btrace_source = arg.substr(16);  // what counts the branches (docs/record-replay.md)
    } else if (arg == "--syscall-buffer=on" || arg == "--syscall-buffer=off") {
      options.record_syscall_buffer = arg.ends_with("on");  // non-blocking calls without stops
    } else if (arg == "--") {
      ++i;
      break;
    } else if (!arg.empty() && arg.front() == '-') {
      return EarlyExit{1, fmt::format("branchstub record: unknown option {}\n", arg)};
    } else {
      break;
    }
  }
  for (; i < argc; ++i) options.program.push_back(argv[i]);
  if (options.program.empty()) return EarlyExit{1, std::string("branchstub record: no program to record.\n") + kUsage};
  return options;
}

}  // namespace

std::variant<ServerOptions, EarlyExit> parse_command_line(int argc, const char* const* argv, const OptionHook& extra) {
  // The record and replay commands. COMM is HOST:PORT, :PORT, - or stdio, never a bare word, so
  // these first words cannot be a COMM; `branchstub :PORT record` still runs a program "record".
  if (argc > 1 && std::string(argv[1]) == "record") return parse_record(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "replay") {
    std::vector<const char*> rest = {argv[0]};
    for (int i = 2; i < argc; ++i) rest.push_back(argv[i]);
    auto parsed = parse_command_line(static_cast<int>(rest.size()), rest.data(), extra);
    if (auto* early = std::get_if<EarlyExit>(&parsed); early && early->text.find("no program to run") != std::string::npos) {
      rest.push_back("");  // COMM alone: "" stands for the latest trace
      parsed = parse_command_line(static_cast<int>(rest.size()), rest.data(), extra);
    }
    auto* options = std::get_if<ServerOptions>(&parsed);
    if (!options) return parsed;
    if (options->attach_pid || options->coverage_file || options->selftest || options->probe)
      return EarlyExit{1, "branchstub replay: COMM [DIR] only (no --attach, --coverage, --probe, --selftest).\n"};
    if (options->program.size() > 1) return EarlyExit{1, "branchstub replay: one trace directory at most.\n"};
    options->replay_dir = options->program.empty() ? std::string() : options->program.front();
    return parsed;
  }
  // Options end at the first argument that is not one (COMM, or "-"); what follows COMM
  // belongs to the program and is never looked at. gdbserver's options whose syntax CLI11
  // does not have (--wrapper ... --, --disable-packet with or without a list, --selftest[=F],
  // --debug-format=LIST) are taken out here; the rest goes to CLI11.
  std::vector<std::string> args;
  ServerOptions options;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.empty() || arg.front() != '-' || arg == "-") break;
    if (extra && extra(arg)) continue;
    if (arg == "--wrapper") {
      int j = i + 1;
      while (j < argc && std::string(argv[j]) != "--") options.wrapper.push_back(argv[j++]);
      if (j >= argc || options.wrapper.empty())
        return EarlyExit{1, "branchstub: --wrapper: expected wrapper arguments followed by --\n"};
      i = j;
    } else if (arg == "--disable-packet") {
      return EarlyExit{0, protocol::disableable_packets_text()};
    } else if (arg.starts_with("--disable-packet=")) {
      std::string bad;
      auto disabled = protocol::parse_disabled_packets(std::string_view(arg).substr(17), &bad);
      if (!disabled)
        return EarlyExit{1, fmt::format("Don't know how to disable \"{}\".\n\n{}", bad,
                                        protocol::disableable_packets_text())};
      options.disabled_packets = *disabled;
    } else if (arg == "--selftest") {
      options.selftest = true;
    } else if (arg.starts_with("--selftest=")) {
      options.selftest = true;
      if (arg.size() == 11) return EarlyExit{1, "Error: selftest filter is empty.\n"};
      options.selftest_filters.push_back(arg.substr(11));
    } else if (arg == "--svg") {
      options.svg_file = std::string();  // named after the coverage file once that is known
    } else if (arg.starts_with("--svg=")) {
      if (arg.size() == 6) return EarlyExit{1, "branchstub: --svg=: empty file name.\n"};
      options.svg_file = arg.substr(6);
    } else if (arg.starts_with("--debug-format=")) {
      auto format = parse_debug_format(std::string_view(arg).substr(15));
      if (!format.error.empty()) return EarlyExit{1, format.error};
      options.debug_timestamps = format.timestamps;
    } else {
      args.push_back(arg);
      // CLI11 also takes "--opt VALUE": the value is not COMM.
      bool value_follows = arg == "--debug-file" || arg == "--btrace-source" || arg == "--busy-poll" ||
                           arg == "--coverage" || arg == "--coverage-format" || arg == "--plan-cache";
      if (value_follows && i + 1 < argc) args.push_back(argv[++i]);
    }
  }
  for (; i < argc; ++i) args.push_back(argv[i]);

  CLI::App app{"branchstub: a gdbserver-compatible debug server with branch tracing", "branchstub"};
  app.prefix_command();  // everything after COMM PROG belongs to the program
  app.set_help_flag();   // our own --help text, gdbserver style
  bool help = false, version = false, attach = false;
  bool no_shell = false, with_shell = false, disable_rand = false, no_disable_rand = false;
  bool allow_writes = false, no_writes = false;
  app.add_flag("--help", help);
  app.add_flag("--version", version);
  app.add_flag("--attach", attach);
  app.add_flag("--multi", options.multi);
  app.add_flag("--once", options.once);
  app.add_flag("--debug", options.debug);
  app.add_flag("--remote-debug", options.remote_debug);
  app.add_flag("--event-loop-debug", options.event_loop_debug);
  app.add_option("--debug-file", options.debug_file);
  app.add_flag("--startup-with-shell", with_shell);
  app.add_flag("--no-startup-with-shell", no_shell);
  app.add_flag("--disable-randomization", disable_rand);
  app.add_flag("--no-disable-randomization", no_disable_rand);
  app.add_flag("--allow-file-writes", allow_writes);  // the default now; still accepted
  app.add_flag("--no-file-writes", no_writes);
  app.add_flag("--probe", options.probe);
  app.add_option("--btrace-source", options.btrace_source)
      ->check(CLI::IsMember({"auto", "bts", "lbr", "soft", "patch"}));
  app.add_option("--busy-poll", options.busy_poll_us)->check(CLI::Range(0u, 100000u));
  app.add_option("--plan-cache", options.plan_cache);
  app.add_flag("--synthesize-pt", options.synthesize_pt);
  app.add_option("--watchpoints", options.watchpoints)->check(CLI::IsMember({"auto", "hardware", "software", "steps"}));
  app.add_option("--coverage", options.coverage_file);
  app.add_option("--coverage-format", options.coverage_format)->check(CLI::IsMember({"drcov", "drcov3", "lcov"}));

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return EarlyExit{2, fmt::format("branchstub: {}\n{}", e.what(), kUsage)};
  }
  if (help) return EarlyExit{0, std::string(kUsage) +
                                    "\nOptions:\n"
                                    "  --help, --version, --attach, --multi, --once\n"
                                    "  --debug, --remote-debug, --event-loop-debug, --debug-file=FILE\n"
                                    "  --debug-format=all|none|timestamp\n"
                                    "  --wrapper WRAPPER ARGS... --\n"
                                    "  --startup-with-shell, --no-startup-with-shell\n"
                                    "  --disable-randomization, --no-disable-randomization\n"
                                    "  --no-file-writes      refuse vFile writes and unlinks (allowed by default,\n"
                                    "                        as in gdbserver; --allow-file-writes is accepted)\n"
                                    "  --btrace-source=auto|bts|lbr|soft|patch\n"
                                    "                        auto: perf BTS where it opens, else patch (the\n"
                                    "                        software tracer with block ends patched to record in\n"
                                    "                        the program); soft: a stop at every block end\n"
                                    "  --plan-cache=DIR|off  where --btrace-source=patch keeps, per module file,\n"
                                    "                        where its exploration had to stop, so that the next\n"
                                    "                        recording explores that at once (default:\n"
                                    "                        $XDG_CACHE_HOME or ~/.cache, /branchstub/plans)\n"
                                    "  --synthesize-pt       where the CPU has no Intel PT, serve `record btrace pt`\n"
                                    "                        (and plain `record btrace`, which asks for PT first)\n"
                                    "                        from the software history as a PT stream: GDB decodes\n"
                                    "                        long histories several times faster than as BTS\n"
                                    "  --watchpoints=auto|hardware|software|steps\n"
                                    "                        hbreak/watch/rwatch/awatch with the debug registers\n"
                                    "                        or emulated by single-stepping (auto: hardware where\n"
                                    "                        the probe sees debug-register traps); a replay's\n"
                                    "                        emulated watchpoints protect the watched pages\n"
                                    "                        instead (steps: never)\n"
                                    "  --busy-poll=USEC      poll this long after each event before sleeping\n"
                                    "                        (default 200; 0 = never; never on one CPU)\n"
                                    "  --probe               print what branch-trace hardware works here\n"
                                    "  --coverage FILE       run PROG to its exit recording block coverage (no COMM,\n"
                                    "                        no client); FILE.drcov: drcov, FILE.info: lcov\n"
                                    "  --coverage-format=drcov|drcov3|lcov\n"
                                    "                        the format whatever FILE's name (drcov: version 2)\n"
                                    "  --svg[=FILE]          with --coverage: a flame graph too (default FILE.svg)\n"
                                    "  --selftest[=FILTER]   run the built-in self-checks and exit\n"
                                    "\nMaintenance options:\n"
                                    "  --disable-packet=OPT1[,OPT2,...]\n"
                                    "                        disable support for RSP packets or features\n"
                                    "                        (--disable-packet alone lists them)\n"};
  if (version)
    return EarlyExit{0, std::string("branchstub ") + BRANCHSTUB_VERSION + "\n"
                        "A gdbserver-compatible remote debug server with branch tracing.\n"};
  if (options.plan_cache) {
    if (options.plan_cache->empty()) return EarlyExit{1, "branchstub: --plan-cache: empty directory name (off turns it off).\n"};
    if (*options.plan_cache != "off" && options.plan_cache->front() != '/') {
      std::error_code ec;
      auto abs = std::filesystem::absolute(*options.plan_cache, ec);
      if (!ec) options.plan_cache = abs.string();
    }
  }
  if (no_shell) options.startup_with_shell = false;
  if (no_disable_rand) options.disable_randomization = false;
  if (no_writes) options.allow_file_writes = false;
  std::vector<std::string> rest = app.remaining();
  // prefix_command() stops at the first argument it does not know: a word starting with '-'
  // there is an option nobody knows, not COMM.
  if (!rest.empty() && rest.front().size() > 1 && rest.front().front() == '-')
    return EarlyExit{1, fmt::format("Unknown argument: {}\n", rest.front())};
  if (options.probe) return options;
  if (options.selftest) return options;  // no COMM needed
  if (options.svg_file && !options.coverage_file)
    return EarlyExit{1, "branchstub: --svg needs --coverage FILE.\n"};
  if (!options.coverage_format.empty() && !options.coverage_file)
    return EarlyExit{1, "branchstub: --coverage-format needs --coverage FILE.\n"};
  if (options.coverage_file) {
    if (options.coverage_file->empty()) return EarlyExit{1, "branchstub: --coverage: empty file name.\n"};
    if (attach || options.multi) return EarlyExit{1, "branchstub: --coverage runs a program: no --attach or --multi.\n"};
    if (rest.empty()) return EarlyExit{1, std::string("branchstub: --coverage: no program to run.\n") + kUsage};
    if (options.svg_file && options.svg_file->empty()) options.svg_file = *options.coverage_file + ".svg";
    options.program = std::move(rest);
    return options;
  }
  if (rest.empty()) return EarlyExit{1, std::string("branchstub: no COMM given.\n") + kUsage};
  options.comm = rest.front();
  rest.erase(rest.begin());
  if (!parse_comm(options.comm))
    return EarlyExit{1, fmt::format("branchstub: bad COMM '{}': use HOST:PORT, :PORT or -\n", options.comm)};
  // gdbserver's old order, still accepted by it: COMM --attach PID.
  if (!rest.empty() && rest.front() == "--attach") {
    attach = true;
    rest.erase(rest.begin());
  }
  if (attach) {
    if (rest.size() != 1) return EarlyExit{1, std::string("branchstub: --attach needs one PID.\n") + kUsage};
    auto pid = parse_pid(rest.front());
    if (!pid) return EarlyExit{1, fmt::format("branchstub: bad PID '{}'\n", rest.front())};
    options.attach_pid = pid;
  } else {
    options.program = std::move(rest);
    if (options.program.empty() && !options.multi)
      return EarlyExit{1, std::string("branchstub: no program to run.\n") + kUsage};
  }
  return options;
}

}  // namespace server
