// Starting a program under ptrace the way gdbserver does: fork, PTRACE_TRACEME, personality,
// working directory, environment, stdio, the terminal (terminal.h); exec directly or through
// the shell, with a wrapper; then run through the shell's/wrapper's execs until the real
// program's exec.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backend/error.h"

namespace backend {

struct LaunchOptions {
  std::vector<std::string> argv;          // argv[0] = program
  std::vector<std::string> wrapper;       // --wrapper args (run as: wrapper... program args...)
  bool startup_with_shell = true;         // run through $SHELL -c exec prog args (like gdbserver)
  bool disable_randomization = true;      // personality(ADDR_NO_RANDOMIZE)
  std::optional<std::string> working_dir;
  std::map<std::string, std::string> env_set;   // applied on top of the server's environment
  std::set<std::string> env_unset;
  bool say_redirected = true;             // with stdio_is_protocol: say so (a replay restarted: once)
  bool stdio_is_protocol = false;         // server speaks RSP on stdio: child's stdin</dev/null, stdout->stderr
  bool trap_tsc = false;                  // PR_SET_TSC(PR_TSC_SIGSEGV) before exec: rdtsc faults (record/replay)
  // The whole environment in its order, instead of the server's with env_set/env_unset (a replay:
  // as recorded, so the program's stack holds the same strings at the same addresses).
  std::optional<std::vector<std::string>> exact_environment;
};

// Quotes one word for `sh -c` (single quotes; a ' becomes '\'').
std::string shell_quote(const std::string& word);
// The command line given to the shell: "exec wrapper... prog args..." quoted.
std::string shell_command(const LaunchOptions& options);
// Absolute path of the program as execvp would find it ("" if not found).
std::string resolve_program(const std::string& program);
// gdbserver's rule for the program to start: a bare name (no '/') that is a regular file in
// the current directory means that file (made absolute); anything else is left as it is, and
// a bare name is then looked up in PATH.
std::string program_path(const std::string& program);
// "~" or "~/..." -> $HOME (else the user's passwd entry); "~user[/...]" -> that user's home;
// anything else unchanged. Error for an unknown user, or no home at all (GDB expands the
// inferior's working directory this way before it starts the program).
Result<std::string> expand_tilde(const std::string& path);

// Forks and execs; on success the child is ptrace-stopped right after the real program's
// exec (ld.so entry), with PTRACE_O_EXITKILL|TRACEEXEC set. Error if the program could not
// start ("During startup program exited with code 127.").
Result<pid_t> launch_traced(const LaunchOptions& options);

// A program we launched and no longer trace (detached) is still our child: true once it has
// exited and its status is collected (or it is not ours to wait for).
bool reap_if_exited(pid_t pid);

}  // namespace backend
