// Helpers for the ptrace tests: compile the tiny programs in test_inferiors/ at run time,
// find symbols with nm, wait for stops by polling (no sleeps as synchronisation).
#pragma once

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <optional>
#include <string>

#include "backend/process.h"

namespace bs_test {

inline std::string build_dir() {
  std::string dir = "/tmp/bs_unit_backend_" + std::to_string(getuid());
  ::mkdir(dir.c_str(), 0700);
  return dir;
}

// Compiles test_inferiors/<name>.c, or else the integration tests' tests/inferiors/<name>.c (one
// program for both suites, no copy), non-PIE so nm gives run-time addresses, with extra
// compiler `flags` if given ("-static"). The binary is named after a hash of the source and the
// flags and reused; a temporary name plus rename() keeps concurrent test runs from seeing a
// half-written file.
inline std::string inferior(const std::string& name, const std::string& flags = "") {
  std::string src = std::string(BS_SOURCE_DIR) + "/tests/unit/backend/test_inferiors/" + name + ".c";
  if (::access(src.c_str(), R_OK) != 0) src = std::string(BS_SOURCE_DIR) + "/tests/inferiors/" + name + ".c";
  std::ifstream in(src);
  std::stringstream text;
  text << in.rdbuf();
  std::string out = build_dir() + "/" + name + "-" + std::to_string(std::hash<std::string>{}(text.str() + flags));
  if (::access(out.c_str(), X_OK) == 0) return out;
  std::string tmp = out + ".tmp" + std::to_string(getpid());
  std::string cmd = "cc -g -O0 -no-pie -pthread " + flags + " -o " + tmp + " " + src;
  if (std::system(cmd.c_str()) != 0 || std::rename(tmp.c_str(), out.c_str()) != 0) return {};
  return out;
}

inline uint64_t symbol(const std::string& binary, const std::string& name) {
  std::string cmd = "nm " + binary;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return 0;
  char line[512];
  uint64_t addr = 0;
  while (std::fgets(line, sizeof line, p)) {
    char type;
    char sym[400];
    unsigned long long a;
    if (std::sscanf(line, "%llx %c %399s", &a, &type, sym) == 3 && name == sym) addr = a;
  }
  ::pclose(p);
  return addr;
}

// Polls until the process reports a stop (10 s at most).
inline std::optional<backend::StopEvent> wait_stop(backend::Process& p, double seconds = 10) {
  for (int i = 0; i < static_cast<int>(seconds * 1000); ++i) {
    if (auto ev = p.poll_events()) return ev;
    timespec ts{0, 1000000};
    ::nanosleep(&ts, nullptr);
  }
  return std::nullopt;
}

inline backend::ResumePlan continue_all(int signo = 0) {
  backend::ResumePlan plan;
  plan.others = backend::ResumeAction{backend::ResumeKind::Continue, signo};
  return plan;
}

inline backend::ProcessSettings software_tracing() {
  backend::ProcessSettings s;
  s.trace_source = backend::TraceSource::Software;
  return s;
}

inline backend::ProcessSettings watch_settings(bool emulated) {
  backend::ProcessSettings s;
  s.watch_emulation = emulated;
  return s;
}

inline backend::LaunchOptions options_for(const std::string& program) {
  backend::LaunchOptions o;
  o.argv = {program};
  o.startup_with_shell = false;
  return o;
}

// Thread state letter from /proc (t = traced stop).
inline char thread_state(pid_t pid, pid_t tid) {
  std::string path = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return '?';
  char buf[1024] = {};
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  size_t close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() ? s[close + 2] : '?';
}

}  // namespace bs_test
