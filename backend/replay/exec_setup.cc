#include "backend/replay/exec_setup.h"

#include <elf.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "backend/ptrace/proc_memory.h"

namespace backend::replay {

Result<std::vector<uint8_t>> read_proc_file(pid_t pid, const std::string& name) {
  std::string path = fmt::format("/proc/{}/{}", pid, name);
  std::ifstream f(path, std::ios::binary);
  if (!f) return errno_error("Cannot read " + path);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

Result<ExecFacts> prepare_exec(pid_t pid, const std::vector<uint8_t>& random) {
  ExecFacts facts;
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
