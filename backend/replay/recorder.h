// `branchstub record`: runs a program under ptrace, stopping at every system call, and writes
// a trace directory (trace_format.h) that `branchstub replay` can run again exactly. No client,
// no server: its own ptrace loop. What it refuses (threads, fork/exec, unknown syscalls)
// stops the recording with a message rather than write a trace that
// could not replay (docs/record-replay.md).
#pragma once

#include <string>
#include <vector>

#include "backend/btrace/branch_tracer.h"

namespace backend::replay {

struct RecordOptions {
  std::string dir;                // "": a new directory under default_trace_root()
  std::vector<std::string> argv;  // PROG ARGS...
  // What counts the branches (--btrace-source): auto/patch, block patching where it works;
  // soft, the software engine alone (a stop per block).
  TraceSource source = TraceSource::Auto;
  // Non-blocking calls (stat, readlink, getxattr...) recorded without a stop by the patched
  // code's system-call buffer (docs/record-replay.md); false (the default): every call stops
  // twice. Not the default yet (docs: a fast timer once ended a buffered recording with SIGTRAP).
  bool syscall_buffer = false;
};

// Where traces go by default: $BRANCHSTUB_TRACE_DIR, else $XDG_DATA_HOME/branchstub, else
// ~/.local/share/branchstub. Its `latest-trace` symlink names the last finished recording.
std::string default_trace_root();
// The trace `branchstub replay` picks without a DIR: the target of ROOT/latest-trace.
std::string latest_trace();

// Records; prints what it refused (and where the trace went) on stderr. Returns the program's
// exit status as a shell reports it (128+N when killed by signal N), or 125 when the program
// could not be recorded.
int record(const RecordOptions& options);

}  // namespace backend::replay
