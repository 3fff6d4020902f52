#include "backend/replay/exec_setup.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <tuple>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "backend/ptrace/proc_memory.h"
#include "backend/ptrace/remote_syscall.h"

namespace backend::replay {

Result<std::vector<uint8_t>> read_proc_file(pid_t pid, const std::string& name) {
  std::string path = fmt::format("/proc/{}/{}", pid, name);
  std::ifstream f(path, std::ios::binary);
  if (!f) return errno_error("Cannot read " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

Result<std::vector<int>> open_descriptors(pid_t pid) {
  std::string path = fmt::format("/proc/{}/fd", pid);
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return errno_error("Cannot list " + path);
  std::vector<int> fds;
  while (const dirent* e = ::readdir(dir))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') fds.push_back(std::atoi(e->d_name));
  ::closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

Result<void> match_descriptors(pid_t pid, const std::vector<int>& want) {
  auto have = open_descriptors(pid);
  if (!have) return have.error();
  ProcMemory mem(pid);
  auto call = [&](long nr, std::array<uint64_t, 6> args) -> Result<int64_t> {
    auto r = patch::inject_syscall(pid, pid, mem, nr, args);
    if (r && *r < 0) return Error{static_cast<int>(-*r), fmt::format("system call {} in the program failed", nr)};
    return r;
  };
  for (int fd : *have)
    if (!std::binary_search(want.begin(), want.end(), fd))
      if (auto r = call(SYS_close, {static_cast<uint64_t>(fd), 0, 0, 0, 0, 0}); !r) return r.error();
  std::vector<int> missing;
  for (int fd : want)
    if (!std::binary_search(have->begin(), have->end(), fd)) missing.push_back(fd);
  if (missing.empty()) return {};
  // "/dev/null" below the initial stack (nothing lives there before the first instruction).
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) return errno_error("PTRACE_GETREGS at exec");
  static constexpr char kNull[] = "/dev/null";
  uint64_t name = (regs.rsp - 4096) & ~uint64_t{15};
  if (!mem.write(name, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(kNull), sizeof kNull)))
    return Error{EIO, "Cannot write into the program's stack"};
  for (int fd : missing) {
    auto opened = call(SYS_openat, {static_cast<uint64_t>(AT_FDCWD), name, O_RDWR, 0, 0, 0});
    if (!opened) return opened.error();
    if (*opened == fd) continue;
    if (auto r = call(SYS_dup2, {static_cast<uint64_t>(*opened), static_cast<uint64_t>(fd), 0, 0, 0, 0}); !r)
      return r.error();
    if (auto r = call(SYS_close, {static_cast<uint64_t>(*opened), 0, 0, 0, 0, 0}); !r) return r.error();
  }
  return {};
}

namespace {

// SigIgn / SigBlk of pid's main thread (/proc/PID/status), hex.
Result<std::pair<uint64_t, uint64_t>> signal_state(pid_t pid) {
  auto status = read_proc_file(pid, "status");
  if (!status) return status.error();
  std::string text(status->begin(), status->end());
  auto field = [&](const char* name) -> std::optional<uint64_t> {
    auto at = text.find(std::string("\n") + name + ":");
    if (at == std::string::npos) return std::nullopt;
    return std::strtoull(text.c_str() + at + std::strlen(name) + 2, nullptr, 16);
  };
  auto ignored = field("SigIgn"), blocked = field("SigBlk");
  if (!ignored || !blocked) return Error{EIO, fmt::format("/proc/{}/status has no SigIgn or SigBlk", pid)};
  return std::make_pair(*ignored, *blocked);
}

}  // namespace

Result<void> match_signal_state(pid_t pid, uint64_t ignored, uint64_t blocked) {
  auto now = signal_state(pid);
  if (!now) return now.error();
  if (now->first == ignored && now->second == blocked) return {};
  ProcMemory mem(pid);
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) return errno_error("PTRACE_GETREGS at exec");
  // The kernel's struct sigaction {handler, flags, restorer, mask} or a mask, below the initial
  // stack (nothing lives there before the first instruction).
  uint64_t scratch = (regs.rsp - 8192) & ~uint64_t{15};
  auto call = [&](long nr, std::array<uint64_t, 6> args) -> Result<void> {
    auto r = patch::inject_syscall(pid, pid, mem, nr, args);
    if (!r) return r.error();
    if (*r < 0) return Error{static_cast<int>(-*r), fmt::format("system call {} in the program failed", nr)};
    return {};
  };
  for (int sig = 1; sig <= 64; ++sig) {
    uint64_t bit = uint64_t{1} << (sig - 1);
    if ((now->first & bit) == (ignored & bit) || sig == SIGKILL || sig == SIGSTOP) continue;
    // After exec every disposition is SIG_DFL or SIG_IGN: handlers do not survive it.
    uint64_t action[4] = {(ignored & bit) ? reinterpret_cast<uint64_t>(SIG_IGN) : reinterpret_cast<uint64_t>(SIG_DFL),
                          0, 0, 0};
    if (!mem.write(scratch, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(action), sizeof action)))
      return Error{EIO, "Cannot write into the program's stack"};
    if (auto r = call(SYS_rt_sigaction, {static_cast<uint64_t>(sig), scratch, 0, 8, 0, 0}); !r) return r;
  }
  if (now->second != blocked) {
    if (!mem.write(scratch, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(&blocked), 8)))
      return Error{EIO, "Cannot write into the program's stack"};
    if (auto r = call(SYS_rt_sigprocmask, {SIG_SETMASK, scratch, 0, 8, 0, 0}); !r) return r;
  }
  return {};
}

Result<ExecFacts> prepare_exec(pid_t pid, const std::vector<uint8_t>& random) {
  ExecFacts facts;
  if (auto fds = open_descriptors(pid)) facts.fds = *fds;
  if (auto sigs = signal_state(pid)) std::tie(facts.sig_ignored, facts.sig_blocked) = *sigs;
  auto auxv = read_proc_file(pid, "auxv");
  if (!auxv) return auxv.error();
  facts.auxv = *auxv;
  user_regs_struct regs{};
  if (::ptrace(PTRACE_GETREGS, pid, nullptr, &regs) != 0) return errno_error("PTRACE_GETREGS at exec");
  ProcMemory mem(pid);
  auto word = [&](uint64_t addr) -> Result<uint64_t> {
    uint64_t v = 0;
    auto n = mem.read(addr, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&v), 8));
    if (!n || *n != 8) return Error{EIO, fmt::format("Cannot read the initial stack at {:#x}", addr)};
    return v;
  };
  // The initial stack: argc, argv..., NULL, envp..., NULL, then the auxv pairs.
  auto argc = word(regs.rsp);
  if (!argc) return argc.error();
  uint64_t at = regs.rsp + 8 * (*argc + 2);
  for (;;) {
    auto env = word(at);
    if (!env) return env.error();
    at += 8;
    if (*env == 0) break;
  }
  for (;; at += 16) {
    auto type = word(at);
    if (!type) return type.error();
    if (*type == AT_NULL) break;
    if (*type == AT_SYSINFO_EHDR) {
      uint64_t ignore = AT_IGNORE;
      if (!mem.write(at, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&ignore), 8)))
        return Error{EIO, "Cannot hide the vDSO from the program"};
    } else if (*type == AT_RANDOM) {
      auto value = word(at + 8);
      if (!value) return value.error();
      facts.at_random_addr = *value;
    }
  }
  if (facts.at_random_addr) {
    if (!random.empty()) {
      if (!mem.write(facts.at_random_addr, random)) return Error{EIO, "Cannot write AT_RANDOM's bytes"};
    }
    facts.at_random.resize(16);
    auto n = mem.read(facts.at_random_addr, facts.at_random);
    if (!n || *n != 16) return Error{EIO, "Cannot read AT_RANDOM's bytes"};
  }
  return facts;
}

}  // namespace backend::replay
