// The hardware probe: what each branch mechanism needs is in docs/btrace.md; every "no" says
// what was tried and what happened.
#include "backend/probe/probe.h"

#include <asm/prctl.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>

#include "backend/host/cpu_id.h"
#include "backend/btrace/perf/perf_bts.h"
#include "backend/btrace/lbr/lbr_feed.h"
#include "backend/btrace/lbr/lbr_device.h"
#include "backend/btrace/perf/perf_event.h"
#include "backend/btrace/perf/perf_pt.h"
#include "backend/points/debug_registers.h"
#include "backend/ptrace/ptrace_requests.h"

namespace backend {

namespace {

std::string errno_name(int err) {
  const char* n = strerrorname_np(err);
  return n ? n : fmt::format("errno {}", err);
}

// What an errno from perf_event_open usually means, for the probe table.
std::string perf_errno_text(int err) {
  std::string hint;
  switch (err) {
    case ENOENT: hint = "no PMU"; break;
    case EOPNOTSUPP: hint = "not supported by this PMU"; break;
    case EACCES: case EPERM: hint = "not permitted (see perf_event_paranoid)"; break;
    case EBUSY: hint = "in use by another perf/LBR user"; break;
    case EINVAL: hint = "attributes rejected by the PMU"; break;
    default: hint = std::strerror(err); break;
  }
  return errno_name(err) + ", " + hint;
}

// Opens (and closes) a perf event on this thread; nullopt on success, else errno.
std::optional<int> try_perf_open(perf_event_attr attr) {
  attr.size = sizeof attr;
  auto event = PerfEvent::open(attr, 0);
  if (!event) return event.error().code;
  return std::nullopt;
}

ProbeItem perf_item(const std::string& name, const std::string& what, const perf_event_attr& attr) {
  auto err = try_perf_open(attr);
  if (!err) return {name, true, "perf_event_open " + what + ": OK"};
  return {name, false, "perf_event_open " + what + ": " + perf_errno_text(*err)};
}

std::optional<std::string> read_first_line(const char* path, int* err) {
  std::ifstream in(path);
  if (!in) {
    *err = errno ? errno : ENOENT;
    return std::nullopt;
  }
  std::string line;
  std::getline(in, line);
  return line;
}

// Runs the code at `code` in a forked child that stops itself first (traced by us), with the code page
// prepared by the caller; returns the child's pid (or -1).
pid_t fork_stopped_child(void* code) {
  pid_t child = fork();
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    raise(SIGSTOP);
    reinterpret_cast<void (*)()>(code)();
    _exit(0);
  }
  return child;
}

// `code` copied into an executable page and run by a forked child (fork_stopped_child), which
// is stopped at its first int3 when start() succeeds; killed and reaped when this goes.
class CodeChild {
 public:
  ~CodeChild() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, __WALL);
  }
  // "" on success, else what failed.
  std::string start(std::span<const uint8_t> code) {
    void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return "mmap failed: " + errno_name(errno);
    std::memcpy(page, code.data(), code.size());
    if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) {
      int e = errno;
      munmap(page, 4096);
      return "mprotect failed: " + errno_name(e);
    }
    base_ = reinterpret_cast<uint64_t>(page);
    pid_ = fork_stopped_child(page);
    munmap(page, 4096);  // the child keeps its own copy
    if (pid_ < 0) return "fork failed: " + errno_name(errno);
    uint64_t rip = 0;
    if (!stop_rip(&rip)) return "the probe child did not stop";
    ptrace(PTRACE_SETOPTIONS, pid_, nullptr, reinterpret_cast<void*>(PTRACE_O_EXITKILL));
    if (ptrace(PTRACE_CONT, pid_, nullptr, nullptr) != 0 || !stop_rip(&rip) || rip != base_ + 1)
      return "the probe child did not reach its int3";
    return {};
  }
  pid_t pid() const { return pid_; }
  uint64_t base() const { return base_; }
  // Waits for the child's next stop: its pc, and whether it was a SIGTRAP (or SIGSTOP).
  bool stop_rip(uint64_t* rip) {
    int status = 0;
    if (waitpid(pid_, &status, __WALL) != pid_ || !WIFSTOPPED(status)) return false;
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, pid_, nullptr, &regs) != 0) return false;
    *rip = regs.rip;
    return WSTOPSIG(status) == SIGTRAP || WSTOPSIG(status) == SIGSTOP;
  }

 private:
  pid_t pid_ = -1;
  uint64_t base_ = 0;
};

// One block step decides it (hypervisors commonly drop DEBUGCTL.BTF, and the kernel never reads
// the bit back). The child runs:
//   int3; A: nop x4; jmp B; ud2; B: mov ecx,1000; L: nop x3; dec ecx; jnz L; int3
// One PTRACE_SINGLEBLOCK from A stops at B if BTF is honored, at A+1 if it is dropped. Then the
// stops over the 1000-iteration loop are counted (~1000 with BTF, ~5000 without).
using BtfResult = BlockStepProbe;

BtfResult probe_btf() {
  static constexpr uint8_t kCode[] = {
      0xcc,                          // +0  int3
      0x90, 0x90, 0x90, 0x90,        // +1  A: nops
      0xeb, 0x02,                    // +5  jmp B
      0x0f, 0x0b,                    // +7  ud2
      0xb9, 0xe8, 0x03, 0x00, 0x00,  // +9  B: mov ecx, 1000
      0x90, 0x90, 0x90,              // +14 L: nops
      0xff, 0xc9,                    // +17 dec ecx
      0x75, 0xf9,                    // +19 jnz L
      0xcc,                          // +21 E: int3
  };
  constexpr uint64_t kA = 1, kB = 9, kEnd = 22;
  CodeChild child;
  if (std::string failed = child.start(kCode); !failed.empty()) return {false, failed};
  uint64_t base = child.base();
  auto finish = [](bool works, std::string detail) { return BtfResult{works, std::move(detail)}; };
  auto stop_rip = [&](uint64_t* rip) { return child.stop_rip(rip); };
  uint64_t rip = 0;
  if (ptrace(static_cast<__ptrace_request>(kPtraceSingleblock), child.pid(), nullptr, nullptr) != 0)
    return finish(false, "PTRACE_SINGLEBLOCK failed: " + errno_name(errno));
  if (!stop_rip(&rip)) return finish(false, "no stop after PTRACE_SINGLEBLOCK");
  if (rip == base + kA + 1)
    return finish(false, "ignored: the hypervisor drops DEBUGCTL.BTF (SINGLEBLOCK behaved like SINGLESTEP)");
  if (rip != base + kB)
    return finish(false, fmt::format("unknown: the first block step stopped at A+{:#x}", rip - base - kA));

  // Count the stops over the loop to catch a partly working BTF.
  int stops = 1;
  while (rip != base + kEnd && stops < 20000) {
    if (ptrace(static_cast<__ptrace_request>(kPtraceSingleblock), child.pid(), nullptr, nullptr) != 0 ||
        !stop_rip(&rip))
      return finish(false, fmt::format("the probe child was lost after {} block steps", stops));
    ++stops;
  }
  if (stops > 1100)
    return finish(false, fmt::format("partial: first step honored, but {} stops over a 1000-iteration loop "
                                     "(expected about 1001)", stops));
  return finish(true, fmt::format("honored: {} stops over a 1000-iteration loop", stops));
}

}  // namespace

// The child runs, from a code page followed by a data page:
//   +0  mov dword [rip+0xff6], 1   ; writes data+0 (a DR0 write watchpoint, 4 bytes)
//   +10 nop                        ; the write watchpoint traps here (after the write)
//   +11 nop                        ; DR1 execute breakpoint: traps here, before executing it
//   +12 int3                       ; reached only when neither trapped
//   +13 ret
DebugRegisterProbe probe_debug_registers() {
  static constexpr uint8_t kCode[] = {0xc7, 0x05, 0xf6, 0x0f, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
                                      0x90, 0x90, 0xcc, 0xc3};
  constexpr uint64_t kAfterWrite = 10, kExec = 11, kEnd = 13;
  void* area = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (area == MAP_FAILED) return {false, "mmap failed: " + errno_name(errno)};
  std::memcpy(area, kCode, sizeof kCode);
  if (mprotect(area, 4096, PROT_READ | PROT_EXEC) != 0) {
    int e = errno;
    munmap(area, 8192);
    return {false, "mprotect failed: " + errno_name(e)};
  }
  auto base = reinterpret_cast<uint64_t>(area);
  pid_t child = fork_stopped_child(area);
  munmap(area, 8192);  // the child keeps its own copy
  if (child < 0) return {false, "fork failed: " + errno_name(errno)};

  auto finish = [&](bool works, std::string detail) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, __WALL);
    return DebugRegisterProbe{works, std::move(detail)};
  };
  // One stop of the child: its pc, or 0 when it did not stop with SIGTRAP.
  auto next_trap = [&]() -> uint64_t {
    int status = 0;
    if (waitpid(child, &status, __WALL) != child || !WIFSTOPPED(status) || WSTOPSIG(status) != SIGTRAP) return 0;
    user_regs_struct regs{};
    if (ptrace(PTRACE_GETREGS, child, nullptr, &regs) != 0) return 0;
    return regs.rip;
  };
  int status = 0;
  if (waitpid(child, &status, __WALL) != child || !WIFSTOPPED(status)) return finish(false, "the probe child did not stop");
  ptrace(PTRACE_SETOPTIONS, child, nullptr, reinterpret_cast<void*>(PTRACE_O_EXITKILL));

  DebugRegisters dr;
  if (auto r = dr.insert(HwKind::Write, base + 4096, 4); !r) return finish(false, r.error().message);
  if (auto r = dr.insert(HwKind::Execute, base + kExec, 1); !r) return finish(false, r.error().message);
  if (auto r = dr.apply(child); !r) return finish(false, "DR7 cannot be set: " + r.error().message);
  if (ptrace(PTRACE_CONT, child, nullptr, nullptr) != 0) return finish(false, "PTRACE_CONT failed: " + errno_name(errno));
  uint64_t pc = next_trap();
  if (pc == base + kEnd)
    return finish(false, "DR7 set, no trap delivered: the hypervisor drops them");
  if (pc != base + kAfterWrite)
    return finish(false, fmt::format("DR7 set, unexpected stop at +{:#x} instead of the write watchpoint", pc - base));
  auto hit = dr.take_hit(child);  // reads and clears DR6
  if (!hit || hit->kind != HwKind::Write) return finish(false, "the write watchpoint stop does not show in DR6");
  if (ptrace(PTRACE_CONT, child, nullptr, nullptr) != 0) return finish(false, "PTRACE_CONT failed: " + errno_name(errno));
  pc = next_trap();
  if (pc != base + kExec)
    return finish(false, pc == base + kEnd ? "write watchpoints trap, execute breakpoints do not"
                                           : fmt::format("execute breakpoint: unexpected stop at +{:#x}", pc - base));
  return finish(true, "a DR0 write watchpoint and a DR1 execute breakpoint trapped");
}

BlockStepProbe probe_block_step() { return probe_btf(); }

// The child runs: +0 int3; +1 cpuid; +3 nop; +4 nop; +5 int3; +6 ret. One single step from +1
// must stop at +3; a hypervisor that drops the trap after its emulated cpuid stops at +4.
CpuidStepProbe probe_cpuid_step() {
  static constexpr uint8_t kCode[] = {0xcc, 0x0f, 0xa2, 0x90, 0x90, 0xcc, 0xc3};
  constexpr uint64_t kAfter = 3;
  CodeChild child;
  if (std::string failed = child.start(kCode); !failed.empty()) return {false, failed};
  uint64_t base = child.base(), rip = 0;
  auto finish = [](bool works, std::string detail) { return CpuidStepProbe{works, std::move(detail)}; };
  if (ptrace(PTRACE_SINGLESTEP, child.pid(), nullptr, nullptr) != 0 || !child.stop_rip(&rip))
    return finish(false, "PTRACE_SINGLESTEP over cpuid failed: " + errno_name(errno));
  if (rip == base + kAfter) return finish(true, "PTRACE_SINGLESTEP over cpuid stops right after it");
  if (rip > base + kAfter && rip <= base + kAfter + 2)
    return finish(false, fmt::format("PTRACE_SINGLESTEP over cpuid ran {} more instruction(s) (the hypervisor "
                                     "drops the trap after its cpuid): the server steps cpuid itself",
                                     rip - base - kAfter));
  return finish(false, fmt::format("PTRACE_SINGLESTEP over cpuid stopped at +{:#x}, not after it (+3): the server "
                                   "steps cpuid itself", rip - base));
}

// Whether an instruction faults once the process asks for it: a forked child makes the request
// and runs the instruction; SIGSEGV is the answer. record/replay needs neither the rdtsc trap
// (PR_SET_TSC; some hypervisors ignore it) nor CPUID faulting (arch_prctl ARCH_SET_CPUID, Intel
// only, and only where the hypervisor passes it on): the block decoder stops before every rdtsc
// and cpuid on any CPU (docs/record-replay.md). Reported so the table says what this host offers.
static ProbeItem probe_fault(const char* name, bool cpuid) {
  constexpr int kFaulted = 77;
  pid_t child = fork();
  if (child < 0) return {name, false, "fork failed: " + errno_name(errno)};
  if (child == 0) {
    // Handled, so the kernel logs no "general protection fault" line for each probe.
    struct sigaction sa {};
    sa.sa_handler = [](int) { _exit(kFaulted); };
    sigaction(SIGSEGV, &sa, nullptr);
    long r = cpuid ? syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0L)
                   : prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
    if (r != 0) _exit(errno == kFaulted ? EINVAL : errno & 0xff);
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (cpuid)
      asm volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    else
      asm volatile("rdtsc" : "=a"(a), "=d"(d));
    _exit(0);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child) return {name, false, "waitpid failed: " + errno_name(errno)};
  std::string how = cpuid ? "arch_prctl(ARCH_SET_CPUID, 0)" : "prctl(PR_SET_TSC, PR_TSC_SIGSEGV)";
  std::string insn = cpuid ? "cpuid" : "rdtsc";
  if (WIFEXITED(status) && WEXITSTATUS(status) == kFaulted)
    return {name, true, fmt::format("{} then {}: SIGSEGV{}", how, insn,
                                    cpuid ? " (not needed: record/replay decodes cpuid itself)" : "")};
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return {name, false, fmt::format("{}: {}", how, errno_name(WEXITSTATUS(status)))};
  return {name, false, fmt::format("{} succeeded but {} ran without a fault", how, insn)};
}

ProbeReport run_probe(const DebugRegisterProbe* debug_registers, const BlockStepProbe* block_step,
                      const CpuidStepProbe* cpuid_step) {
  ProbeReport r;
  CpuId cpu = read_cpu_id();
  r.items.push_back({"cpu", true,
                     fmt::format("{} family {} model {} stepping {}", cpu.vendor, cpu.family, cpu.model,
                                 cpu.stepping)});
  r.items.push_back({"hypervisor", cpu.hypervisor,
                     cpu.hypervisor ? "CPUID.1:ECX[31] set: running in a virtual machine"
                                    : "CPUID.1:ECX[31] clear: bare metal"});

  int err = 0;
  auto paranoid = read_first_line("/proc/sys/kernel/perf_event_paranoid", &err);
  r.items.push_back({"perf_event_paranoid", paranoid.has_value(),
                     paranoid ? "/proc/sys/kernel/perf_event_paranoid = " + *paranoid
                              : "cannot read /proc/sys/kernel/perf_event_paranoid: " + errno_name(err)});

  perf_event_attr counter{};
  counter.type = PERF_TYPE_HARDWARE;
  counter.config = PERF_COUNT_HW_BRANCH_INSTRUCTIONS;
  counter.exclude_kernel = 1;
  counter.exclude_hv = 1;
  counter.disabled = 1;
  r.items.push_back(perf_item("perf branch counter", "branch-instructions", counter));

  // perf BTS: the text the server would send GDB for `record btrace bts` on this machine.
  ProbeItem bts{"perf BTS", false, ""};
  if (bts_disabled_for_cpu(cpu)) {
    bts.detail = "BTS support has been disabled for the target cpu. (gdbserver's CPU check: AMD, or an "
                 "Intel model with erratum AAJ122)";
  } else if (auto err = try_perf_open(perf_bts_attr())) {
    bts.detail = perf_bts_open_error(*err).message + " [perf_event_open branch-instructions period 1: " +
                 errno_name(*err) + "]";
  } else {
    bts.works = true;
    bts.detail = "perf_event_open branch-instructions period 1 (BTS): OK";
  }
  r.perf_bts_works = bts.works;
  r.items.push_back(bts);

  perf_event_attr lbr{};
  lbr.type = PERF_TYPE_HARDWARE;
  lbr.config = PERF_COUNT_HW_CPU_CYCLES;
  lbr.sample_period = uint64_t{1} << 40;  // never samples; keeps LBR on while the task runs
  lbr.sample_type = PERF_SAMPLE_BRANCH_STACK;
  lbr.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_ANY;
  lbr.exclude_kernel = 1;
  lbr.exclude_hv = 1;
  lbr.disabled = 1;
  r.items.push_back(perf_item("LBR branch stack", "cycles + branch stack USER|ANY", lbr));

  // Intel PT: gdbserver's text when the PMU is missing, and what the CPU says about it.
  PtSupport pt = probe_pt();
  r.pt_works = pt.works;
  if (pt.works) {
    r.items.push_back({"Intel PT", true, fmt::format("intel_pt PMU type {}, a user-mode event opens", pt.type)});
  } else {
    std::string why = pt.why;
    std::string cpu_reason = pt_cpu_reason(cpu);
    if (!cpu_reason.empty()) why += " (" + cpu_reason + ")";
    r.items.push_back({"Intel PT", false, why});
  }

  DebugRegisterProbe dr = debug_registers ? *debug_registers : probe_debug_registers();
  r.debug_registers_work = dr.works;
  r.items.push_back({"debug registers", dr.works, dr.detail});

  r.items.push_back(probe_fault("rdtsc trap (PR_SET_TSC)", false));
  r.items.push_back(probe_fault("CPUID faulting", true));

  BtfResult btf = block_step ? *block_step : probe_btf();
  r.btf_works = btf.works;
  r.items.push_back({"BTF (PTRACE_SINGLEBLOCK)", btf.works, btf.detail});

  CpuidStepProbe step = cpuid_step ? *cpuid_step : probe_cpuid_step();
  r.cpuid_step_traps = step.works;
  r.items.push_back({"single step over cpuid", step.works, step.detail});

  auto helper = LbrDevice::open();
  if (helper) {
    r.lbr_module = true;
    r.items.push_back({"msr_helper (LBR module)", true, lbr_probe_line()});
  } else {
    r.items.push_back({"msr_helper (LBR module)", false,
                       lbr_unavailable_reason(LbrDevice::kDefaultPath, helper.error(), cpu)});
  }

  decide_mechanisms(r);
  return r;
}

void decide_mechanisms(ProbeReport& r) {
  r.best_source = r.perf_bts_works ? "perf-bts" : r.lbr_module ? "lbr" : "patch";
  r.stepbranch_mechanism = r.btf_works ? "singleblock" : "software";
  r.watchpoints = r.debug_registers_work ? "hardware" : "emulated";
}

std::string format_probe(const ProbeReport& report) {
  size_t width = 0;
  for (const auto& item : report.items) width = std::max(width, item.name.size());
  std::string out;
  for (const auto& item : report.items)
    out += fmt::format("{:<{}}  {:<3}  {}\n", item.name, width, item.works ? "yes" : "no", item.detail);
  out += fmt::format("{:<{}}  {}\n", "branch source", width, report.best_source);
  out += fmt::format("{:<{}}  {}\n", "stepbranch", width, report.stepbranch_mechanism);
  out += fmt::format("{:<{}}  {}\n", "watchpoints", width,
                     report.watchpoints == "hardware" ? "hardware (debug registers)"
                                                      : "emulated (single-step, exact accesses; 4 slots as hardware; "
                                                        "in a replay the watched page is protected instead)");
  return out;
}

}  // namespace backend
