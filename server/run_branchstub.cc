#include "server/run_branchstub.h"

#include <cstdio>

#include "backend/probe/probe.h"
#include "backend/replay/recorder.h"
#include "server/options.h"
#include "server/selftest.h"
#include "server/server.h"

namespace server {

int run_branchstub(int argc, const char* const* argv, const MainHooks& hooks) {
  auto parsed = parse_command_line(argc, argv, hooks.take_option);
  if (auto* early = std::get_if<EarlyExit>(&parsed)) {
    std::fputs(early->text.c_str(), early->code == 0 ? stdout : stderr);
    return early->code;
  }
  auto& options = std::get<ServerOptions>(parsed);
  if (options.selftest) {
    // gdbserver prints these lines on its debug output, stderr.
    auto summary = run_selftests(builtin_selftests(), options.selftest_filters);
    std::fputs(summary.output.c_str(), stderr);
    return summary.failed == 0 ? 0 : 1;
  }
  if (options.record)
    return backend::replay::record({options.record_dir, options.program,
                                    options.btrace_source == "soft" ? backend::TraceSource::Software
                                                                    : backend::TraceSource::Auto,
                                    options.record_syscall_buffer});
  if (options.replay_dir) {
    if (options.replay_dir->empty()) options.replay_dir = backend::replay::latest_trace();
    if (options.replay_dir->empty()) {
      std::fprintf(stderr, "branchstub replay: no trace given and no latest trace in %s.\n",
                   backend::replay::default_trace_root().c_str());
      return 1;
    }
    options.program = {*options.replay_dir};  // what the server starts (and `run` starts again)
  }
  if (options.probe) {
    std::fputs(backend::format_probe(backend::run_probe()).c_str(), stdout);
    return 0;
  }
  Server server(std::move(options), hooks.server_hooks ? hooks.server_hooks() : ServerHooks{});
  return server.run();
}

}  // namespace server
