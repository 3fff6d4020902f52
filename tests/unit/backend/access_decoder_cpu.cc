// The harness that runs AccessDecoder against the real CPU (see access_decoder_cpu.h).
#include "access_decoder_cpu.h"
#include "cpuid_step.h"

#include <catch2/catch.hpp>

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "backend/host/cpu_id.h"

using namespace backend;

namespace access_cpu {

namespace {

// Vector register contents the child loads before it stops (zmm0/zmm1, their ymm/xmm parts).
struct VectorInit {
  alignas(64) uint8_t v0[64];
  alignas(64) uint8_t v1[64];  // dword j: sign bit set for even j (a vpmaskmov/maskmovdqu mask)
  VectorInit() {
    for (int i = 0; i < 64; ++i) v0[i] = static_cast<uint8_t>(0x40 + 3 * i);
    for (int j = 0; j < 16; ++j) {
      uint32_t d = (j % 2 == 0 ? 0x80000000u : 0u) | static_cast<uint32_t>(j + 1);
      std::memcpy(v1 + 4 * j, &d, 4);
    }
  }
};
const VectorInit kVectors;
constexpr uint16_t kMaskK1 = 0x0ff0;  // k1: dwords 4..11

bool cpu_has(unsigned leaf, unsigned sub, int reg, unsigned bit) {
  unsigned r[4] = {};
  if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) return false;
  return (r[reg] >> bit) & 1;
}
// AVX/AVX-512 also need the OS to enable the state (XCR0), which the kernel does when present.
bool has_avx2() { return cpu_has(7, 0, 1, 5) && cpu_has(1, 0, 2, 28) && cpu_has(1, 0, 2, 27); }
bool has_avx512f() { return has_avx2() && cpu_has(7, 0, 1, 16); }

// Loads the vector and x87 state, then stops itself with SIGSTOP without returning to C++
// code that could clobber it. Never returns while a tracer is attached.
[[noreturn]] void stop_with_state(int level) {
  pid_t pid = getpid();
  if (level == 2) {
    asm volatile("vmovdqu64 (%0), %%zmm0\n\tvmovdqu64 (%1), %%zmm1\n\tkmovw %2, %%k1"
                 :: "r"(kVectors.v0), "r"(kVectors.v1), "r"(static_cast<uint32_t>(kMaskK1))
                 : "memory");
  } else if (level == 1) {
    asm volatile("vmovdqu (%0), %%ymm0\n\tvmovdqu (%1), %%ymm1" :: "r"(kVectors.v0), "r"(kVectors.v1)
                 : "memory");
  } else {
    asm volatile("movdqu (%0), %%xmm0\n\tmovdqu (%1), %%xmm1" :: "r"(kVectors.v0), "r"(kVectors.v1)
                 : "memory");
  }
  // mm0/mm1 = the low quadwords of v0/v1 (fninit keeps register contents), st0 = pi for the
  // x87 stores; then kill(getpid(), SIGSTOP) straight from asm.
  asm volatile("movq (%0), %%mm0\n\tmovq (%1), %%mm1" :: "r"(kVectors.v0), "r"(kVectors.v1) : "memory");
  long ret;
  asm volatile("fninit\n\tfldpi\n\tsyscall"
               : "=a"(ret)
               : "a"(long{SYS_kill}), "D"(long{pid}), "S"(long{SIGSTOP})
               : "rcx", "r11", "memory");
  (void)ret;
  _exit(91);
}

void* debugreg(int n) {
  return reinterpret_cast<void*>(offsetof(struct user, u_debugreg) + sizeof(unsigned long) * static_cast<size_t>(n));
}

// Empty when hardware watchpoints fire on this host; otherwise why not (some VMs drop them).
const std::string& dr7_unavailable(int vector_level) {
  static const std::string why = [vector_level]() -> std::string {
    Entry store("mov [rbx], rcx", {0x48, 0x89, 0x0b}, "W8", [](Setup& s) {
      s.regs.rbx = kP1 + 0x40;
      s.regs.rcx = 1;
    });
    Setup s = make_setup(store, false);
    Prot rw[kPages] = {Prot::RW, Prot::RW, Prot::RW};
    StepResult r = run_step(store, s, rw, false, vector_level, {{kP1 + 0x40, true}});
    if (r.signo != SIGTRAP) return "the probe store did not complete";
    if (!(r.dr6 & 1)) return "a write watchpoint on a stored quadword did not fire (DR6 = " + hex(r.dr6) + ")";
    return {};
  }();
  return why;
}

}  // namespace

uint8_t pattern(uint64_t addr, bool inverted) {
  auto i = static_cast<uint32_t>(addr - kScratch);
  uint32_t h = i * 2654435761u;
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= h >> 12;
  auto b = static_cast<uint8_t>(h >> 8);
  return inverted ? static_cast<uint8_t>(~b) : b;
}

std::string missing(Need n) {
  switch (n) {
    case Need::None: return {};
    case Need::Avx2: return has_avx2() ? "" : "avx2";
    case Need::Avx512: return has_avx512f() ? "" : "avx512f";
    case Need::Sse41: return cpu_has(1, 0, 2, 19) ? "" : "sse4.1";
    case Need::Sse42: return cpu_has(1, 0, 2, 20) ? "" : "sse4.2";
    case Need::Movbe: return cpu_has(1, 0, 2, 22) ? "" : "movbe";
    case Need::F16c: return has_avx2() && cpu_has(1, 0, 2, 29) ? "" : "f16c";
    case Need::Clflushopt: return cpu_has(7, 0, 1, 23) ? "" : "clflushopt";
    case Need::Clwb: return cpu_has(7, 0, 1, 24) ? "" : "clwb";
    case Need::Rdpid: return cpu_has(7, 0, 2, 22) ? "" : "rdpid";
  }
  return "?";
}

std::string shape_of(const InsnAccesses& a) {
  if (!a.exact) return "?";
  std::string s;
  for (const MemAccess& m : a.accesses) {
    if (!s.empty()) s += ' ';
    if (m.read) s += 'R';
    if (m.write) s += 'W';
    s += std::to_string(m.size);
  }
  return s;
}

// Runs the entry's instruction once in a fresh child with the scratch pages protected as given.
StepResult run_step(const Entry& e, const Setup& s, const Prot (&prot)[kPages], bool read_memory,
                    int vector_level, const std::vector<Watch>& watches) {
  StepResult res;
  pid_t pid = fork();
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    void* scratch = mmap(reinterpret_cast<void*>(kScratch), kPages * kPage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    void* code = mmap(reinterpret_cast<void*>(kCodePage), kPage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (scratch != reinterpret_cast<void*>(kScratch) || code != reinterpret_cast<void*>(kCodePage))
      _exit(90);
    auto* sp = static_cast<uint8_t*>(scratch);
    for (uint64_t a = kScratch; a < kScratchEnd; ++a) sp[a - kScratch] = s.mem(a);
    auto* cp = static_cast<uint8_t*>(code);
    std::memset(cp, 0xcc, kPage);
    std::memcpy(cp + (kCode - kCodePage), e.bytes.data(), e.bytes.size());
    mprotect(code, kPage, PROT_READ | PROT_EXEC);
    for (int p = 0; p < kPages; ++p) {
      int flags = prot[p] == Prot::RW ? PROT_READ | PROT_WRITE : prot[p] == Prot::Read ? PROT_READ : PROT_NONE;
      mprotect(sp + p * kPage, kPage, flags);
    }
    stop_with_state(vector_level);
  }
  REQUIRE(pid > 0);
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSTOPPED(status));
  REQUIRE(WSTOPSIG(status) == SIGSTOP);

  user_regs_struct u{};
  REQUIRE(ptrace(PTRACE_GETREGS, pid, nullptr, &u) == 0);
  const user_regs_struct& w = s.regs;
  u.rax = w.rax; u.rbx = w.rbx; u.rcx = w.rcx; u.rdx = w.rdx;
  u.rsi = w.rsi; u.rdi = w.rdi; u.rbp = w.rbp; u.rsp = w.rsp;
  u.r8 = w.r8; u.r9 = w.r9; u.r10 = w.r10; u.r11 = w.r11;
  u.r12 = w.r12; u.r13 = w.r13; u.r14 = w.r14; u.r15 = w.r15;
  u.rip = kCode;
  u.eflags = w.eflags;
  if (s.set_fs) u.fs_base = w.fs_base;
  if (s.set_gs) u.gs_base = w.gs_base;
  REQUIRE(ptrace(PTRACE_SETREGS, pid, nullptr, &u) == 0);
  REQUIRE(ptrace(PTRACE_GETREGS, pid, nullptr, &res.before) == 0);  // what the CPU will use
  if (!watches.empty()) {
    REQUIRE(watches.size() <= 4);
    uint64_t dr7 = 0;
    for (size_t i = 0; i < watches.size(); ++i) {
      REQUIRE(ptrace(PTRACE_POKEUSER, pid, debugreg(static_cast<int>(i)), watches[i].addr) == 0);
      uint64_t rw = watches[i].writes_only ? 1 : 3;  // 01 = data writes, 11 = reads or writes
      dr7 |= uint64_t{1} << (2 * i) | rw << (16 + 4 * i) | uint64_t{2} << (18 + 4 * i);  // len 8
    }
    REQUIRE(ptrace(PTRACE_POKEUSER, pid, debugreg(7), dr7) == 0);
  }
  status = cpuid_step::single_step(pid, e.bytes);
  REQUIRE(status != -1);
  REQUIRE(WIFSTOPPED(status));
  res.signo = WSTOPSIG(status);
  if (res.signo != SIGTRAP) {
    siginfo_t si{};
    if (ptrace(PTRACE_GETSIGINFO, pid, nullptr, &si) == 0)
      res.fault_addr = reinterpret_cast<uint64_t>(si.si_addr);
  }
  REQUIRE(ptrace(PTRACE_GETREGS, pid, nullptr, &res.after) == 0);
  REQUIRE(ptrace(PTRACE_GETFPREGS, pid, nullptr, &res.fp_after) == 0);
  if (!watches.empty()) {
    errno = 0;
    long dr6 = ptrace(PTRACE_PEEKUSER, pid, debugreg(6), nullptr);
    REQUIRE(errno == 0);
    res.dr6 = static_cast<uint64_t>(dr6);
  }
  if (read_memory) {
    res.memory.resize(kPages * kPage);
    iovec local{res.memory.data(), res.memory.size()};
    iovec remote{reinterpret_cast<void*>(kScratch), res.memory.size()};
    REQUIRE(process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(res.memory.size()));
  }
  return res;
}

Setup make_setup(const Entry& e, bool inverted) {
  Setup s;
  s.inverted = inverted;
  s.regs.rsp = kP2 + 0x800;  // an unexpected stack access lands in the scratch area, visibly
  s.regs.eflags = 0x202;
  if (e.setup) e.setup(s);
  return s;
}

std::vector<uint8_t> code_bytes(const Entry& e) {
  std::vector<uint8_t> code = e.bytes;
  code.resize(16, 0xcc);  // what the caller passes: 15+ bytes from rip
  return code;
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

std::string describe(const InsnAccesses& a) {
  std::string s = shape_of(a) + " at";
  for (const MemAccess& m : a.accesses) s += " " + hex(m.addr);
  return s;
}

bool in_access(uint64_t addr, const MemAccess& m) { return addr >= m.addr && addr - m.addr < m.size; }

std::vector<std::string> cpu_disagreements(const Entry& e, const InsnAccesses& acc,
                                           const std::vector<bool>& changed, int vector_level) {
  std::vector<std::string> issues;
  const std::string computed = "computed: " + describe(acc);

  // 1. Written bytes: inside computed writes, and (unless the entry writes part) all of them.
  for (uint64_t i = 0; i < changed.size(); ++i) {
    uint64_t addr = kScratch + i;
    bool in_write = false;
    for (const MemAccess& m : acc.accesses) in_write |= m.write && in_access(addr, m);
    if (changed[i] && !in_write) issues.push_back("the CPU wrote " + hex(addr) + "; " + computed);
    if (e.full_write && in_write && !changed[i])
      issues.push_back("the CPU did not write " + hex(addr) + "; " + computed);
  }

  // 2. Page protections: a fault exactly when a computed access needs a protected page.
  std::vector<std::pair<std::string, std::array<Prot, kPages>>> layouts = {
      {"all none", {Prot::None, Prot::None, Prot::None}},
      {"all read-only", {Prot::Read, Prot::Read, Prot::Read}},
  };
  for (int p = 0; p < kPages; ++p) {
    std::array<Prot, kPages> none{Prot::RW, Prot::RW, Prot::RW}, ro = none;
    none[p] = Prot::None;
    ro[p] = Prot::Read;
    layouts.push_back({"page " + std::to_string(p) + " none", none});
    layouts.push_back({"page " + std::to_string(p) + " read-only", ro});
  }
  for (const auto& [what, layout] : layouts) {
    auto forbidden = [&layout = layout](uint64_t addr, const MemAccess& m) {
      Prot p = layout[(addr - kScratch) / kPage];
      return p == Prot::None || (p == Prot::Read && m.write);
    };
    bool expect_fault = false;
    for (const MemAccess& m : acc.accesses)
      for (uint64_t b = m.addr; b < m.addr + m.size; ++b) expect_fault |= forbidden(b, m);
    Setup s = make_setup(e, false);
    Prot prot[kPages] = {layout[0], layout[1], layout[2]};
    StepResult r = run_step(e, s, prot, false, vector_level);
    std::string where = "with " + what + ": ";
    if (r.signo == SIGTRAP) {
      if (expect_fault && !e.superset) issues.push_back(where + "no fault; " + computed);
      continue;
    }
    if (e.probe) {
      uint64_t at = e.probe(r.before);
      if (r.fault_addr >= at && r.fault_addr < at + 8 && layout[(r.fault_addr - kScratch) / kPage] != Prot::RW)
        continue;  // ENTER's write probe
    }
    bool explained = r.signo == SIGSEGV;
    if (explained) {
      explained = false;
      for (const MemAccess& m : acc.accesses) explained |= in_access(r.fault_addr, m) && forbidden(r.fault_addr, m);
    }
    if (!expect_fault || !explained)
      issues.push_back(where + "signal " + std::to_string(r.signo) + " at " + hex(r.fault_addr) + "; " + computed);
  }

  // 3. Hardware watchpoints, where the host delivers them: what we emulate, checked directly.
  // Each aligned quadword near a computed access or near a register that points into the
  // scratch area gets a write watchpoint and an access watchpoint; each must fire exactly when
  // a computed write (any computed access) overlaps it.
  if (!dr7_unavailable(vector_level).empty()) return issues;
  Setup s = make_setup(e, false);
  std::vector<uint64_t> quads;
  auto near = [&](uint64_t from, uint64_t to) {  // [from, to) widened by a quadword each side
    for (uint64_t q = (from & ~uint64_t{7}) - 8; q < to + 8; q += 8)
      if (q >= kScratch && q < kScratchEnd && std::find(quads.begin(), quads.end(), q) == quads.end())
        quads.push_back(q);
  };
  for (const MemAccess& m : acc.accesses) near(m.addr, m.addr + m.size);
  const user_regs_struct& g = s.regs;
  for (uint64_t v : {g.rax, g.rbx, g.rcx, g.rdx, g.rsi, g.rdi, g.rbp, g.rsp, g.r8, g.r9, g.r10, g.r11,
                     g.r12, g.r13, g.r14, g.r15})
    near(v, v + 1);
  std::vector<Watch> all;
  for (uint64_t q : quads) {
    all.push_back({q, true});
    all.push_back({q, false});
  }
  for (size_t i = 0; i < all.size(); i += 4) {
    std::vector<Watch> batch(all.begin() + static_cast<ptrdiff_t>(i),
                             all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), i + 4)));
    Prot rw[kPages] = {Prot::RW, Prot::RW, Prot::RW};
    StepResult r = run_step(e, s, rw, false, vector_level, batch);
    if (r.signo != SIGTRAP) {
      issues.push_back("with watchpoints: signal " + std::to_string(r.signo));
      continue;
    }
    for (size_t k = 0; k < batch.size(); ++k) {
      const Watch& w = batch[k];
      bool expected = false;
      for (const MemAccess& m : acc.accesses)
        expected |= m.addr < w.addr + 8 && w.addr < m.addr + m.size && (m.write || !w.writes_only);
      bool fired = (r.dr6 >> k) & 1;
      if (expected && !fired && e.superset) continue;  // the CPU touched less than computed
      if (fired != expected)
        issues.push_back(std::string(w.writes_only ? "write" : "access") + " watchpoint on " + hex(w.addr) +
                         (fired ? " fired" : " did not fire") + "; " + computed);
    }
  }
  return issues;
}

CpuQuirks host_quirks() { return {.segment_pop_reads_slot = amd_like(read_cpu_id())}; }

void check_entry(const Entry& e, int vector_level) {
  INFO("entry: " << e.name);
  AccessDecoder dec(host_quirks());
  std::vector<uint8_t> code = code_bytes(e);

  if (std::string(e.shape) == "?") {
    Setup s = make_setup(e, false);
    s.regs.rip = kCode;
    InsnAccesses a = dec.decode(code, s.regs);
    CHECK_FALSE(a.exact);
    CHECK(a.accesses.empty());
    return;
  }

  // Writable scratch, pattern and complement: the decoder's answer for the registers the CPU
  // really starts from, and which bytes the CPU wrote.
  std::vector<bool> changed(kPages * kPage, false);
  InsnAccesses acc;
  for (bool inverted : {false, true}) {
    Setup s = make_setup(e, inverted);
    Prot rw[kPages] = {Prot::RW, Prot::RW, Prot::RW};
    StepResult r = run_step(e, s, rw, true, vector_level);
    InsnAccesses a = dec.decode(code, r.before);
    INFO("computed: " << describe(a));
    REQUIRE(a.exact);
    CHECK(a.len == e.bytes.size());
    CHECK(shape_of(a) == e.shape);
    for (const MemAccess& m : a.accesses) {
      INFO("access at 0x" << std::hex << m.addr << " size " << std::dec << m.size);
      REQUIRE(m.addr >= kScratch);  // the table's setups aim every access at the scratch area
      REQUIRE(m.addr + m.size <= kScratchEnd);
    }
    REQUIRE(r.signo == SIGTRAP);
    if (e.advances) CHECK(r.after.rip == kCode + e.bytes.size());
    for (uint64_t i = 0; i < r.memory.size(); ++i)
      if (r.memory[i] != s.mem(kScratch + i)) changed[i] = true;
    if (e.post) e.post(e, s, r, a);
    acc = a;
  }
  for (const std::string& issue : cpu_disagreements(e, acc, changed, vector_level)) FAIL_CHECK(issue);
  const std::string& no_dr7 = dr7_unavailable(vector_level);
  if (!no_dr7.empty()) {
    static bool warned = false;
    if (!warned) WARN("hardware watchpoint checks skipped: " << no_dr7);
    warned = true;
  }
}

int vector_level() { return has_avx512f() ? 2 : has_avx2() ? 1 : 0; }

}  // namespace access_cpu
