// branchstub: a gdbserver-compatible remote debug server with branch tracing.
#include <cstdio>

#include "backend/probe/probe.h"
#include "server/options.h"
#include "server/selftest.h"
#include "server/server.h"

int main(int argc, char** argv) {
  auto parsed = server::parse_command_line(argc, argv);
  if (auto* early = std::get_if<server::EarlyExit>(&parsed)) {
    std::fputs(early->text.c_str(), early->code == 0 ? stdout : stderr);
    return early->code;
  }
  auto& options = std::get<server::ServerOptions>(parsed);
  if (options.selftest) {
    // gdbserver prints these lines on its debug output, stderr.
    auto summary = server::run_selftests(server::builtin_selftests(), options.selftest_filters);
    std::fputs(summary.output.c_str(), stderr);
    return summary.failed == 0 ? 0 : 1;
  }
  if (options.probe) {
    std::fputs(backend::format_probe(backend::run_probe()).c_str(), stdout);
    return 0;
  }
  server::Server server(std::move(options));
  return server.run();
}
