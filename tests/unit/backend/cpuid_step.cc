#include "cpuid_step.h"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>

#include "backend/probe/probe.h"
#include "backend/x86/nondeterministic.h"

namespace cpuid_step {

bool traps(std::string* why) {
  static const backend::CpuidStepProbe probe = backend::probe_cpuid_step();
  if (why) *why = probe.detail;
  return probe.works;
}

int single_step(pid_t pid, std::span<const uint8_t> code) {
  auto insn = backend::nondeterministic_insn(code);
  if (insn && insn->kind == backend::NondeterministicInsn::Kind::Cpuid && !traps()) {
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, pid, nullptr, &regs) == 0)
      if (auto result = backend::execute_here(*insn, regs)) {
        backend::apply_result(*insn, *result, regs);
        if (ptrace(PTRACE_SETREGS, pid, nullptr, &regs) == 0) return SIGTRAP << 8 | 0x7f;  // as waitpid: stopped, SIGTRAP
      }
  }
  int status = 0;
  if (ptrace(PTRACE_SINGLESTEP, pid, nullptr, nullptr) != 0 || waitpid(pid, &status, 0) != pid) return -1;
  return status;
}

}  // namespace cpuid_step
