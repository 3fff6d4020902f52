#include "backend/ptrace/launch.h"

#include <algorithm>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "backend/ptrace/proc_info.h"
#include "backend/ptrace/terminal.h"

extern char** environ;

namespace backend {

std::string shell_quote(const std::string& word) {
  if (word.empty()) return "''";
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

std::string shell_command(const LaunchOptions& options) {
  std::string cmd = "exec";
  for (const auto& w : options.wrapper) cmd += " " + shell_quote(w);
  for (const auto& a : options.argv) cmd += " " + shell_quote(a);
  return cmd;
}

std::string resolve_program(const std::string& program) {
  auto real = [](const std::string& p) -> std::string {
    char buf[PATH_MAX];
    if (::access(p.c_str(), X_OK) != 0 || !::realpath(p.c_str(), buf)) return {};
    struct stat st;
    if (::stat(buf, &st) != 0 || !S_ISREG(st.st_mode)) return {};
    return buf;
  };
  if (program.find('/') != std::string::npos) return real(program);
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    if (auto r = real(dir + "/" + program); !r.empty()) return r;
    start = end + 1;
  }
  return {};
}

std::string program_path(const std::string& program) {
  if (program.empty() || program.find('/') != std::string::npos) return program;
  struct stat st;
  if (::stat(program.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return program;
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) return program;
  return std::string(cwd) + "/" + program;
}

Result<std::string> expand_tilde(const std::string& path) {
  if (path.empty() || path.front() != '~') return path;
  size_t slash = path.find('/');
  std::string user = path.substr(1, slash == std::string::npos ? std::string::npos : slash - 1);
  std::string rest = slash == std::string::npos ? std::string() : path.substr(slash);
  std::string home;
  if (user.empty()) {
    const char* env = std::getenv("HOME");
    if (env && *env) {
      home = env;
    } else if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) {
      home = pw->pw_dir;
    }
  } else if (const passwd* pw = ::getpwnam(user.c_str()); pw && pw->pw_dir) {
    home = pw->pw_dir;
  }
  if (home.empty()) return Error{ENOENT, fmt::format("Could not find a match for '{}'.", path.substr(0, slash))};
  return home + rest;
}

namespace {

bool is_elf(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char magic[4] = {};
  bool elf = ::read(fd, magic, 4) == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
  ::close(fd);
  return elf;
}

std::vector<std::string> build_environment(const LaunchOptions& o) {
  if (o.exact_environment) return *o.exact_environment;
  // The server's environment in its own order (as gdbserver passes it): the program's stack then
  // holds the same strings at the same places as without a debugger.
  std::vector<std::string> out;
  auto find = [&out](const std::string& key) {
    return std::find_if(out.begin(), out.end(), [&key](const std::string& kv) {
      return kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=';
    });
  };
  for (char** e = environ; e && *e; ++e)
    if (std::strchr(*e, '=')) out.emplace_back(*e);
  for (const auto& [k, v] : o.env_set) {
    auto it = find(k);
    if (it != out.end()) *it = k + "=" + v;
    else out.push_back(k + "=" + v);
  }
  for (const auto& k : o.env_unset)
    if (auto it = find(k); it != out.end()) out.erase(it);
  return out;
}

std::vector<char*> c_array(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Child side; never returns. Only async-signal-safe calls after fork (everything was prepared).
[[noreturn]] void child_exec(const LaunchOptions& o, bool via_shell, const char* shell, char* const* shell_argv,
                             char* const* argv, char* const* envp, const char* dir, bool own_terminal) {
  // The server blocks SIGCHLD (it reads it from a signalfd) and ignores SIGPIPE; the program
  // must start with the defaults, as it would without a debugger.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  terminal_child_setup(own_terminal);
  ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
  if (o.disable_randomization) {
    int current = ::personality(0xffffffff);
    if (current != -1) ::personality(static_cast<unsigned long>(current) | ADDR_NO_RANDOMIZE);
  }
  if (o.trap_tsc) ::prctl(PR_SET_TSC, PR_TSC_SIGSEGV);
  if (o.stdio_is_protocol) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      if (null_fd > 0) ::close(null_fd);
    }
    ::dup2(2, 1);  // the program's output must not corrupt the protocol on our stdout
    // gdbserver says so, and GDB's testsuite (non-existing-program.exp) waits for these words.
    const char* said = "stdin/stdout redirected\n";
    if (o.say_redirected) (void)!::write(2, said, std::strlen(said));
  }
  if (dir && ::chdir(dir) != 0) {
    const char* msg = "Cannot change to the working directory\n";
    (void)!::write(2, msg, std::strlen(msg));
    ::_exit(127);
  }
  environ = const_cast<char**>(envp);
  if (via_shell) {
    ::execv(shell, shell_argv);
  } else {
    ::execvp(argv[0], argv);
  }
  // gdbserver-like message, then 127 (what the shell would return for "not found").
  const char* what = via_shell ? shell : argv[0];
  const char* err = std::strerror(errno);
  (void)!::write(2, "Cannot exec ", 12);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, err, std::strlen(err));
  (void)!::write(2, ".\n", 2);
  ::_exit(127);
}

}  // namespace

Result<pid_t> launch_traced(const LaunchOptions& options) {
  if (options.argv.empty()) return Error{EINVAL, "No program to run."};
  const std::string target = resolve_program(options.argv[0]);

  // Everything the child needs is built before fork.
  std::vector<std::string> env = build_environment(options);
  auto envp = c_array(env);
  const char* shell_env = std::getenv("SHELL");
  std::string shell = (shell_env && *shell_env) ? shell_env : "/bin/sh";
  std::vector<std::string> shell_args = {shell, "-c", shell_command(options)};
  auto shell_argv = c_array(shell_args);
  std::vector<std::string> direct = options.wrapper;
  direct.insert(direct.end(), options.argv.begin(), options.argv.end());
  auto argv = c_array(direct);
  // Expanded here, not in the child: between fork and exec only async-signal-safe calls.
  std::string working_dir;
  if (options.working_dir) {
    auto expanded = expand_tilde(*options.working_dir);
    if (!expanded) return expanded.error();
    working_dir = *expanded;
  }
  const char* dir = options.working_dir ? working_dir.c_str() : nullptr;

  const bool own_terminal = terminal_handover();
  pid_t pid = ::fork();
  if (pid < 0) return errno_error("Cannot fork");
  if (pid == 0) child_exec(options, options.startup_with_shell, shell.c_str(), shell_argv.data(), argv.data(),
                           envp.data(), dir, own_terminal);
  if (own_terminal) hand_terminal_to(pid);

  auto startup_exit = [&](int status) -> Error {
    if (WIFEXITED(status))
      return Error{WEXITSTATUS(status) == 127 ? ENOENT : ECHILD,
                   fmt::format("During startup program exited with code {}.", WEXITSTATUS(status))};
    return Error{ECHILD, fmt::format("During startup program terminated with signal {}.",
                                     sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?")};
  };

  // Where to stop: at the exec whose image is the target program (an ELF we could resolve);
  // otherwise (scripts, unresolvable names) count execs: shell 1, wrapper 1, program 1.
  // The shell's own exec never counts even when the program is that same shell.
  const bool match_by_exe = !target.empty() && is_elf(target);
  const int min_execs = 1 + (options.startup_with_shell ? 1 : 0);
  const int counted_execs = min_execs + (options.wrapper.empty() ? 0 : 1);
  int execs_seen = 0;
  bool options_set = false;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, __WALL) < 0) {
      if (errno == EINTR) continue;
      return errno_error("waitpid during startup");
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) return startup_exit(status);
    if (!WIFSTOPPED(status)) continue;
    int sig = WSTOPSIG(status), event = status >> 16;
    bool exec_stop = (sig == SIGTRAP && (event == PTRACE_EVENT_EXEC || (!options_set && event == 0)));
    if (!options_set) {
      // EXITKILL: if the server dies, what it launched dies too (as gdbserver's inferiors do).
      ::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(PTRACE_O_EXITKILL | PTRACE_O_TRACEEXEC));
      options_set = true;
    }
    if (exec_stop) {
      ++execs_seen;
      bool done;
      if (match_by_exe) {
        auto exe = read_exe_path(pid);
        done = execs_seen >= min_execs && exe.ok() && *exe == target;
      } else {
        done = execs_seen >= counted_execs;
      }
      if (done) return pid;
      ::ptrace(PTRACE_CONT, pid, nullptr, nullptr);
      continue;
    }
    // A signal during startup (shell housekeeping): deliver it and go on.
    int deliver = (event == 0 && sig != SIGTRAP) ? sig : 0;
    ::ptrace(PTRACE_CONT, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(deliver)));
  }
}

bool reap_if_exited(pid_t pid) { return ::waitpid(pid, nullptr, WNOHANG) != 0; }

}  // namespace backend
