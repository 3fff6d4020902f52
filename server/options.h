// The command line, compatible with gdbserver's:
//   branchstub [OPTIONS] COMM PROG [ARGS...]
//   branchstub [OPTIONS] --attach COMM PID     (or COMM --attach PID, gdbserver's old order)
//   branchstub [OPTIONS] --multi COMM
//   branchstub --selftest[=FILTER]
//   branchstub record [-o DIR] PROG [ARGS...]  (runs PROG, writes a trace; no COMM, no client)
//   branchstub replay [OPTIONS] COMM [DIR]     (serves the recorded program; DIR: latest trace)
// "record"/"replay" as the first word are these commands: COMM is never a bare word there.
//   branchstub --coverage FILE [--coverage-format=F] [--svg[=FILE]] PROG [ARGS...]
//                                           (no COMM: records block coverage to exit, no client)
// COMM is HOST:PORT, :PORT (127.0.0.1 only), or "-"/"stdio" for the protocol on stdin/stdout.
// Options come before COMM; an option nobody knows is an error ("Unknown argument: ..."), never
// taken for COMM.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "protocol/disabled_packets.h"

namespace server {

struct ServerOptions {
  std::string comm;
  std::vector<std::string> program;  // PROG ARGS...
  std::optional<pid_t> attach_pid;
  bool multi = false;
  bool once = false;
  bool debug = false;
  bool remote_debug = false;
  bool event_loop_debug = false;
  bool debug_timestamps = false;  // --debug-format=all|timestamp
  std::optional<std::string> debug_file;
  std::vector<std::string> wrapper;
  bool startup_with_shell = true;
  bool disable_randomization = true;
  bool allow_file_writes = true;  // vFile writes and unlinks, as gdbserver; --no-file-writes
  bool probe = false;
  std::string btrace_source = "auto";  // auto | bts | lbr | soft | patch
  std::string watchpoints = "auto";    // auto | hardware | software | steps (see backend/points/watch_emulator.h)
  unsigned busy_poll_us = 200;          // keep polling this long after each event; 0: never
  // --plan-cache=DIR|off: where the block-patching source keeps what it explored between runs
  // (backend/btrace/patch/plan_cache.h); unset: the user's cache directory.
  std::optional<std::string> plan_cache;
  // --synthesize-pt: `record btrace pt` (and so GDB's plain `record btrace`, which asks for PT
  // first) served from the software history as a PT stream where no PT hardware is.
  bool synthesize_pt = false;
  protocol::DisabledPackets disabled_packets;  // --disable-packet=LIST
  bool selftest = false;                // --selftest: run the built-in self-checks and exit
  std::vector<std::string> selftest_filters;  // --selftest=FILTER (substring of a check's name)
  // --coverage FILE: run PROG to its exit with block coverage, write FILE (drcov or lcov, by
  // --coverage-format or else FILE's extension), and exit with PROG's status. No COMM.
  std::optional<std::string> coverage_file;
  std::string coverage_format;          // "", drcov, drcov3, lcov
  std::optional<std::string> svg_file;  // --svg[=FILE]: a flame graph too (default FILE.svg)
  // branchstub record [-o DIR] PROG ARGS: no COMM, no client (docs/record-replay.md).
  bool record = false;
  std::string record_dir;
  bool record_syscall_buffer = false;  // --syscall-buffer=on: non-blocking calls without stops
  // branchstub replay [OPTIONS] COMM [DIR]: the program launched (and run again) is DIR's.
  std::optional<std::string> replay_dir;
};

// What main() should do instead of serving: print `text` (to stdout when code is 0) and exit.
struct EarlyExit {
  int code = 0;
  std::string text;
};

// `extra`, when given, is offered every option before COMM first and takes those it returns
// true for (the test build's --test-* options, tests/support); the shipped binary gives none.
using OptionHook = std::function<bool(const std::string& arg)>;
std::variant<ServerOptions, EarlyExit> parse_command_line(int argc, const char* const* argv,
                                                          const OptionHook& extra = {});

// Listening endpoint from COMM; nullopt host means stdio.
struct ListenAddress {
  bool stdio = false;
  std::string host;  // exactly what will be bound ("127.0.0.1" for ":PORT")
  std::string port;
};
std::optional<ListenAddress> parse_comm(const std::string& comm);

}  // namespace server
