// sstep_truth: the single-step truth for coverage tests, independent of branchstub's engine.
// Runs PROG (ASLR off, as branchstub runs it) under ptrace and single-steps every thread from
// the first instruction to the exit, following new threads. A block runs from a branch target
// (or a thread's first instruction) to the next taken branch (next pc != pc + length, with
// lengths from capstone); each thread's last block ends at its last instruction.
//
//   sstep_truth OUT PROG [ARGS...]
//
// OUT gets one line per distinct block, "start size count" (hex, hex, decimal), and a last
// line "instructions N". PROG's exit status is passed on.
//
// Lengths come from capstone, and where capstone 4 cannot decode an instruction (some AVX-512
// ones that glibc's string functions use) from LLVM's disassembler (libLLVM, loaded at run time:
// clang's dependency). A wrong length would look like a taken branch here.
#include <capstone/capstone.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

namespace {

struct ThreadState {
  uint64_t block_start = 0;
  uint64_t last_pc = 0;  // the last instruction executed (0: none yet)
  int pending_signal = 0;
};

csh cs;
cs_insn* insn;

// The few functions of LLVM's C disassembler API (llvm-c/Disassembler.h) this tool needs.
struct Llvm {
  void* (*create)(const char*, void*, int, void*, void*) = nullptr;
  size_t (*disasm)(void*, uint8_t*, uint64_t, uint64_t, char*, size_t) = nullptr;
  void* context = nullptr;
  bool load() {
    void* lib = nullptr;
    for (const char* name : {"libLLVM-16.so.1", "libLLVM-15.so.1", "libLLVM-14.so.1"})
      if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) return false;
    using Init = void (*)();
    for (const char* f : {"LLVMInitializeX86TargetInfo", "LLVMInitializeX86TargetMC", "LLVMInitializeX86Disassembler"}) {
      auto init = reinterpret_cast<Init>(dlsym(lib, f));
      if (!init) return false;
      init();
    }
    create = reinterpret_cast<decltype(create)>(dlsym(lib, "LLVMCreateDisasm"));
    disasm = reinterpret_cast<decltype(disasm)>(dlsym(lib, "LLVMDisasmInstruction"));
    if (!create || !disasm) return false;
    context = create("x86_64-linux-gnu", nullptr, 0, nullptr, nullptr);
    return context != nullptr;
  }
  uint32_t length(uint8_t* code, size_t size, uint64_t pc) {
    char text[256];
    return static_cast<uint32_t>(disasm(context, code, size, pc, text, sizeof text));
  }
} llvm;
bool have_llvm = false;
std::unordered_map<uint64_t, uint32_t> lengths;
std::unordered_set<uint64_t> cpuids;  // where a cpuid is (found by length_at)
std::map<std::pair<uint64_t, uint64_t>, uint64_t> blocks;  // (start, size) -> executions
uint64_t instructions = 0;

uint64_t pc_of(pid_t tid) {
  user_regs_struct regs{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0) return 0;
  return regs.rip;
}

uint32_t length_at(pid_t tid, uint64_t pc) {
  auto it = lengths.find(pc);
  if (it != lengths.end()) return it->second;
  uint8_t code[16] = {};
  iovec local{code, sizeof code}, remote{reinterpret_cast<void*>(pc), sizeof code};
  ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
  if (n <= 0) {  // the last page: read what can be read word by word
    for (size_t i = 0; i < sizeof code; i += 8) {
      errno = 0;
      long w = ptrace(PTRACE_PEEKTEXT, tid, reinterpret_cast<void*>(pc + i), nullptr);
      if (errno) break;
      std::memcpy(code + i, &w, 8);
      n = static_cast<ssize_t>(i + 8);
    }
  }
  const uint8_t* p = code;
  size_t size = n > 0 ? static_cast<size_t>(n) : 0;
  uint64_t addr = pc;
  // Capstone first (LLVM's disassembler gives a lock or rep prefix as an instruction of its own),
  // LLVM where capstone gives up.
  size_t bytes = size;
  uint32_t len = cs_disasm_iter(cs, &p, &size, &addr, insn) ? insn->size : 0;
  if (len && insn->id == X86_INS_CPUID) cpuids.insert(pc);
  if (len == 0 && have_llvm && bytes) len = llvm.length(code, bytes, pc);
  if (len == 0) len = 1;
  lengths[pc] = len;
  return len;
}

void close_block(pid_t tid, ThreadState& t) {
  if (!t.block_start || !t.last_pc) return;
  uint64_t size = t.last_pc + length_at(tid, t.last_pc) - t.block_start;
  ++blocks[{t.block_start, size}];
}

// Single-steps tid (about to run about_to_run[tid]), except that a cpuid there is run here,
// this CPU's answer for the thread's leaf and subleaf, and counted as one instruction: some
// hypervisors drop the step's trap after the cpuid they emulate, so the step would also run
// the instruction after it unseen (a branch there would be missed).
void step(pid_t tid, ThreadState& t, std::map<pid_t, uint64_t>& about_to_run) {
  for (;;) {
    uint64_t at = about_to_run[tid];
    uint32_t len = length_at(tid, at);
    user_regs_struct regs{};
    if (!cpuids.count(at) || ptrace(PTRACE_GETREGS, tid, nullptr, &regs) != 0 || regs.rip != at) break;
    unsigned a = 0, b = 0, c = 0, d = 0;
    __cpuid_count(static_cast<unsigned>(regs.rax), static_cast<unsigned>(regs.rcx), a, b, c, d);
    regs.rax = a;
    regs.rbx = b;
    regs.rcx = c;
    regs.rdx = d;
    regs.rip = at + len;
    if (ptrace(PTRACE_SETREGS, tid, nullptr, &regs) != 0) break;
    ++instructions;
    if (t.last_pc == 0 && t.block_start == 0) t.block_start = at;
    t.last_pc = at;
    about_to_run[tid] = at + len;
  }
  ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: sstep_truth OUT PROG [ARGS...]\n");
    return 2;
  }
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return 2;
  insn = cs_malloc(cs);
  have_llvm = llvm.load();
  pid_t child = fork();
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    personality(ADDR_NO_RANDOMIZE);
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) return 2;  // the exec stop
  ptrace(PTRACE_SETOPTIONS, child, nullptr, reinterpret_cast<void*>(PTRACE_O_TRACECLONE | PTRACE_O_EXITKILL));
  std::map<pid_t, ThreadState> threads;
  threads[child].block_start = pc_of(child);
  ptrace(PTRACE_SINGLESTEP, child, nullptr, nullptr);
  int exit_code = 0;
  // The pc a thread stands on before each step is the instruction that step executes.
  std::map<pid_t, uint64_t> about_to_run;
  about_to_run[child] = threads[child].block_start;
  while (!threads.empty()) {
    pid_t tid = waitpid(-1, &status, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    auto it = threads.find(tid);
    if (it == threads.end()) {
      // A new thread's first stop may come before its parent's clone event.
      threads[tid].block_start = 0;
      it = threads.find(tid);
    }
    ThreadState& t = it->second;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      // It died in the instruction it was stepping (exit, exit_group, or killed by another's).
      if (t.block_start && about_to_run.count(tid)) {
        t.last_pc = about_to_run[tid];
        ++instructions;
      }
      close_block(tid, t);
      if (tid == child) exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      threads.erase(it);
      continue;
    }
    if (!WIFSTOPPED(status)) continue;
    int sig = WSTOPSIG(status);
    int event = status >> 16;
    if (sig == SIGTRAP && event == PTRACE_EVENT_CLONE) {
      unsigned long new_tid = 0;
      ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &new_tid);
      ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr);  // the clone syscall completes: same step
      continue;
    }
    uint64_t pc = pc_of(tid);
    length_at(tid, pc);  // decoded while the thread lives (it may die in this instruction)
    siginfo_t si{};
    ptrace(PTRACE_GETSIGINFO, tid, nullptr, &si);
    bool stepped = sig == SIGTRAP && si.si_code != SI_USER && si.si_code != SI_TKILL;
    if (!stepped && !(sig == SIGSTOP && t.last_pc == 0 && t.block_start == 0)) {
      // A signal to deliver with the next step. If the pc moved, the stepped instruction ran
      // first (a syscall, then the signal on its way out); if not, it did not run at all.
      uint64_t ran = about_to_run[tid];
      if (pc != ran) {
        ++instructions;
        t.last_pc = ran;
        if (pc != ran + length_at(tid, ran)) {
          close_block(tid, t);
          t.block_start = pc;
          t.last_pc = 0;
        }
        about_to_run[tid] = pc;
      }
      t.pending_signal = sig;
      ptrace(PTRACE_SINGLESTEP, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig)));
      continue;
    }
    if (sig == SIGSTOP) {
      // A new thread's first stop: it starts here.
      t.block_start = pc;
      about_to_run[tid] = pc;
      step(tid, t, about_to_run);
      continue;
    }
    if (t.pending_signal) {
      // Stopped at the handler's first instruction: the delivery is a branch from the last
      // instruction that ran (a handler that is not caught left the pc where it was).
      t.pending_signal = 0;
      uint64_t at = about_to_run[tid];
      if (pc != at && pc != at + length_at(tid, at)) {
        close_block(tid, t);
        t.block_start = pc;
        t.last_pc = 0;
        about_to_run[tid] = pc;
        step(tid, t, about_to_run);
        continue;
      }
    }
    uint64_t ran = about_to_run[tid];
    if (pc == ran) {
      // A rep-prefixed string instruction traps after each iteration, pc unchanged: it is
      // still the same instruction, no branch.
      step(tid, t, about_to_run);
      continue;
    }
    ++instructions;
    if (t.last_pc == 0 && t.block_start == 0) t.block_start = ran;
    t.last_pc = ran;
    if (pc != ran + length_at(tid, ran)) {
      close_block(tid, t);
      t.block_start = pc;
      t.last_pc = 0;
    }
    about_to_run[tid] = pc;
    step(tid, t, about_to_run);
  }
  FILE* out = std::fopen(argv[1], "w");
  if (!out) return 2;
  for (const auto& [key, count] : blocks)
    std::fprintf(out, "%" PRIx64 " %" PRIx64 " %" PRIu64 "\n", key.first, key.second, count);
  std::fprintf(out, "instructions %" PRIu64 "\n", instructions);
  std::fclose(out);
  return exit_code;
}
