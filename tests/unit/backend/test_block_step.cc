// The PTRACE_SINGLEBLOCK bookkeeping (backend/engine/block_step.h) over hand-assembled code.
//
// "Recorded" sequences were taken on a Linux 6.18 KVM guest with a small tracer that clears
// DR6 (u_debugreg[6] = 0), resumes with PTRACE_SINGLEBLOCK (33) and prints WSTOPSIG,
// si_code, the pc and DR6 at every stop. That hypervisor drops DEBUGCTL.BTF, so the CPU
// single-steps; the kernel's own reports (syscall exit, signal handler entry, int3) and its
// popf/iret/TF rules are the same as on bare metal. Sequences marked "BTF" are what the SDM
// and arch/x86/kernel/step.c give on a CPU that honours BTF (no such machine here).
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <map>
#include <vector>

#include "backend/engine/block_step.h"

using namespace backend;

namespace {

constexpr uint64_t kBase = 0x401000;
constexpr uint64_t kDr6Step = 0xffff4ff0;  // recorded DR6 after a step trap (BS + reserved ones)

struct Code {
  std::vector<uint8_t> bytes;
  std::map<uint64_t, uint64_t> stack;  // address -> 8-byte word
  BlockCache cache{reader()};
  explicit Code(std::vector<uint8_t> b) : bytes(std::move(b)) {}
  CodeReader reader() {
    return [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
      if (addr < kBase || addr >= kBase + bytes.size()) return 0;
      size_t n = std::min<size_t>(out.size(), kBase + bytes.size() - addr);
      std::memcpy(out.data(), bytes.data() + (addr - kBase), n);
      return n;
    };
  }
  WordReader memory() {
    return [this](uint64_t addr, uint64_t* v) {
      auto it = stack.find(addr);
      if (it == stack.end()) return false;
      *v = it->second;
      return true;
    };
  }
  BlockStepVerdict step(uint64_t from_off, uint64_t eflags, int si_code, uint64_t stop_off,
                        std::optional<uint64_t> dr6, uint64_t rsp = 0, int signo = SIGTRAP) {
    BlockStepStart s{kBase + from_off, eflags};
    BlockStepStop t{signo, si_code, kBase + stop_off, rsp, dr6};
    return classify_block_step(s, t, cache, reader(), memory());
  }
};

uint64_t at(uint64_t off) { return kBase + off; }

// +0 mov eax,39; +5 syscall; +7 nop; +8 nop; +9 jmp +13; +11 ud2; +13 nop; +14 int3
std::vector<uint8_t> syscall_code() {
  return {0xb8, 0x27, 0, 0, 0, 0x0f, 0x05, 0x90, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0x90, 0xcc};
}

}  // namespace

TEST_CASE("singleblock: a syscall exit ends the step without a branch", "[singleblock]") {
  Code c(syscall_code());
  // recorded: the stop after the syscall has si_code TRAP_BRKPT and leaves DR6 at 0
  auto v = c.step(0, 0x246, kTrapBrkpt, 7, 0);
  CHECK(v.result == BlockStepResult::NoBranch);
  CHECK(v.to == at(7));
  // without DR6 the si_code alone says the same
  CHECK(c.step(0, 0x246, kTrapBrkpt, 7, std::nullopt).result == BlockStepResult::NoBranch);
  // BTF: the next step stops at the jmp's target, and that one is a branch
  v = c.step(7, 0x246, kTrapTrace, 13, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(9));
  CHECK(v.to == at(13));
}

TEST_CASE("singleblock: rt_sigreturn's syscall exit is no branch wherever it lands", "[singleblock]") {
  Code c(syscall_code());
  CHECK(c.step(0, 0x246, kTrapBrkpt, 0x13, 0).result == BlockStepResult::NoBranch);
}

TEST_CASE("singleblock: recorded where BTF is dropped, no stop invents a branch", "[singleblock]") {
  // SINGLEBLOCK behaved like SINGLESTEP: stops at +5 (step), +7 (syscall exit), +8, +9, +13
  Code c(syscall_code());
  struct Rec { uint64_t from, stop; int code; uint64_t dr6; };
  const Rec seq[] = {{0, 5, kTrapTrace, kDr6Step}, {5, 7, kTrapBrkpt, 0}, {7, 8, kTrapTrace, kDr6Step},
                     {8, 9, kTrapTrace, kDr6Step}, {9, 13, kTrapTrace, kDr6Step}};
  std::vector<BlockStepResult> got;
  for (const auto& r : seq) got.push_back(c.step(r.from, 0x246, r.code, r.stop, r.dr6).result);
  // +0 -> +5 passes no branch and stops before the syscall: the model says a step stop cannot be
  // there. The syscall exit is fine. +7 -> +8 and +8 -> +9: no branch can end there. +9 -> +13
  // is the jmp itself, and it was taken.
  CHECK(got == std::vector<BlockStepResult>{BlockStepResult::Untrusted, BlockStepResult::NoBranch,
                                            BlockStepResult::Untrusted, BlockStepResult::Untrusted,
                                            BlockStepResult::Branch});
}

TEST_CASE("singleblock: popf at the start is single-stepped by Linux", "[singleblock]") {
  // +0 pushf; +1 popf; +2 nop; +3 jmp +7; +5 ud2; +7 int3
  Code c({0x9c, 0x9d, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0xcc});
  CHECK(kernel_single_steps({at(1), 0x246}, c.reader()));
  CHECK_FALSE(kernel_single_steps({at(2), 0x246}, c.reader()));
  // recorded: one instruction, then TF stays visible (the program's now: pushf saw ptrace's TF)
  auto v = c.step(1, 0x246, kTrapTrace, 2, kDr6Step);
  CHECK(v.result == BlockStepResult::NoBranch);  // not a branch from the jmp at +3, which never ran
  CHECK(kernel_single_steps({at(2), 0x346}, c.reader()));
  CHECK(c.step(2, 0x346, kTrapTrace, 3, kDr6Step).result == BlockStepResult::NoBranch);
  v = c.step(3, 0x346, kTrapTrace, 7, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(3));
  // with a prefix (o16 popf, rex.w popf) too
  Code p({0x66, 0x9d, 0x90, 0x48, 0x9d, 0x90});
  CHECK(kernel_single_steps({at(0), 0x246}, p.reader()));
  CHECK(kernel_single_steps({at(3), 0x246}, p.reader()));
  CHECK(p.step(0, 0x246, kTrapTrace, 2, kDr6Step).result == BlockStepResult::NoBranch);
  CHECK(p.step(0, 0x246, kTrapTrace, 5, kDr6Step).result == BlockStepResult::Untrusted);
}

TEST_CASE("singleblock: iret is a branch, single-stepped when it is the first instruction", "[singleblock]") {
  // recorded snippet: +0 mov rax,rsp; +3 push 0x2b; +5 push rax; +6 pushf; +7 push 0x33;
  // +9 lea rax,[rip+2]; +16 push rax; +17 iretq; +19 ud2; +21 nop; +22 jmp +26; +24 ud2; +26 int3
  Code c({0x48, 0x89, 0xe0, 0x6a, 0x2b, 0x50, 0x9c, 0x6a, 0x33, 0x48, 0x8d, 0x05, 0x02, 0, 0, 0, 0x50,
          0x48, 0xcf, 0x0f, 0x0b, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0xcc});
  // BTF armed from +0: the CPU traps after the iret, at its target
  auto v = c.step(0, 0x246, kTrapTrace, 21, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(17));
  CHECK(v.to == at(21));
  // iret at the start: Linux single-steps, and the one instruction is the branch
  CHECK(kernel_single_steps({at(17), 0x246}, c.reader()));
  v = c.step(17, 0x246, kTrapTrace, 21, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(17));
  // recorded: after it TF is visible (the pushf pushed it), so steps stay single steps
  CHECK(c.step(21, 0x346, kTrapTrace, 22, kDr6Step).result == BlockStepResult::NoBranch);
  v = c.step(22, 0x346, kTrapTrace, 26, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(22));
}

TEST_CASE("singleblock: a program's own TF turns the step into one instruction", "[singleblock]") {
  // +0 nop; +1 nop; +2 jmp +6; +4 ud2; +6 int3
  Code c({0x90, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0xcc});
  CHECK(kernel_single_steps({at(0), 0x346}, c.reader()));
  // recorded (tf-set): one stop per instruction while TF is the program's
  CHECK(c.step(0, 0x346, kTrapTrace, 1, kDr6Step).result == BlockStepResult::NoBranch);
  // the same stop with TF hidden (ptrace's own TF) would be impossible for a block step
  CHECK(c.step(0, 0x246, kTrapTrace, 1, kDr6Step).result == BlockStepResult::Untrusted);
}

TEST_CASE("singleblock: a jmp to the next instruction is not a taken branch", "[singleblock]") {
  // +0 nop; +1 jmp +3 (eb 00); +3 nop; +4 jmp +8; +6 ud2; +8 int3
  Code c({0x90, 0xeb, 0x00, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0xcc});
  // BTF: the CPU traps after the jmp at +1, at +3
  auto v = c.step(0, 0x246, kTrapTrace, 3, kDr6Step);
  CHECK(v.result == BlockStepResult::NoBranch);
  CHECK(v.to == at(3));
  v = c.step(3, 0x246, kTrapTrace, 8, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(4));
  // call to the next instruction (get-pc idiom): not counted either
  Code g({0xe8, 0, 0, 0, 0, 0x58, 0xcc});
  g.stack[0x7000] = at(5);
  CHECK(g.step(0, 0x246, kTrapTrace, 5, kDr6Step, 0x7000).result == BlockStepResult::NoBranch);
}

TEST_CASE("singleblock: not-taken conditional branches on the way are skipped", "[singleblock]") {
  // +0 test eax,eax; +2 je +0x40; +4 nop; +5 jne +0x50; +7 jmp +0x20
  Code c({0x85, 0xc0, 0x74, 0x3c, 0x90, 0x75, 0x49, 0xeb, 0x17});
  auto v = c.step(0, 0x246, kTrapTrace, 0x20, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(7));
  v = c.step(0, 0x246, kTrapTrace, 0x50, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(5));
  v = c.step(0, 0x246, kTrapTrace, 0x40, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(2));
  // a stop no branch on the path can reach: never guessed
  v = c.step(0, 0x246, kTrapTrace, 0x30, kDr6Step);
  CHECK(v.result == BlockStepResult::Untrusted);
  CHECK(v.from == 0);
}

TEST_CASE("singleblock: call and ret are checked against the stack", "[singleblock]") {
  // +0 call +0x20; +5 ret
  Code c({0xe8, 0x1b, 0, 0, 0, 0xc3});
  c.stack[0x7ff0] = at(5);
  auto v = c.step(0, 0x246, kTrapTrace, 0x20, kDr6Step, 0x7ff0);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(0));
  c.stack[0x7ff0] = 0x1234;  // the return address is not there: the stop is not this call's
  CHECK(c.step(0, 0x246, kTrapTrace, 0x20, kDr6Step, 0x7ff0).result == BlockStepResult::Untrusted);
  // ret: the popped word sits just below the new rsp
  c.stack[0x7ff8] = at(0x200);
  v = c.step(5, 0x246, kTrapTrace, 0x200, kDr6Step, 0x8000);
  INFO(v.why);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(5));
  CHECK(c.step(5, 0x246, kTrapTrace, 0x300, kDr6Step, 0x8000).result == BlockStepResult::Untrusted);
  // without a memory reader nothing is checked, and an indirect target is accepted
  BlockStepStart s{at(5), 0x246};
  BlockStepStop t{SIGTRAP, kTrapTrace, 0x666000, 0x8000, kDr6Step};
  CHECK(classify_block_step(s, t, c.cache, c.reader()).result == BlockStepResult::Branch);
}

TEST_CASE("singleblock: int3, signals, handler entry and debug registers", "[singleblock]") {
  // +0 nop; +1 int3; +2 nop; +3 jmp +7; +5 ud2; +7 int3
  Code c({0x90, 0xcc, 0x90, 0xeb, 0x02, 0x0f, 0x0b, 0xcc});
  // recorded: the int3 stop has si_code SI_KERNEL and DR6 0
  CHECK(c.step(0, 0x246, kSiKernel, 2, 0).result == BlockStepResult::NotAStep);
  // recorded: a signal stops the step (sig 10, si_code 0); the handler entry after delivering
  // it with PTRACE_SINGLEBLOCK has si_code SIGTRAP and DR6 0
  CHECK(c.step(0, 0x246, 0, 0, 0, 0, SIGUSR1).result == BlockStepResult::NotAStep);
  auto v = c.step(0, 0x246, SIGTRAP, 0x7000, 0);
  CHECK(v.result == BlockStepResult::NoBranch);
  CHECK(v.to == at(0x7000));
  // a hardware breakpoint or watchpoint (DR6.B0..B3)
  CHECK(c.step(0, 0x246, kTrapHwBkpt, 2, 0xffff0ff1).result == BlockStepResult::NotAStep);
  // a SIGTRAP sent with kill() (SI_USER)
  CHECK(c.step(0, 0x246, 0, 1, 0).result == BlockStepResult::NotAStep);
}

TEST_CASE("singleblock: a syscall exit that no syscall on the path explains is untrusted", "[singleblock]") {
  // +0 nop; +1 jmp +0x10   (the jmp would have stopped the step first)
  Code c({0x90, 0xeb, 0x0d});
  CHECK(c.step(0, 0x246, kTrapBrkpt, 0x30, 0).result == BlockStepResult::Untrusted);
  // a step trap after passing a syscall: its exit report should have come first
  Code s(syscall_code());
  CHECK(s.step(0, 0x246, kTrapTrace, 13, kDr6Step).result == BlockStepResult::Untrusted);
  // int 0x80 and sysenter are system calls too
  Code i({0xcd, 0x80, 0x90, 0x0f, 0x34, 0x90});
  CHECK(i.step(0, 0x246, kTrapBrkpt, 2, 0).result == BlockStepResult::NoBranch);
  CHECK(i.step(3, 0x246, kTrapBrkpt, 5, 0).result == BlockStepResult::NoBranch);
}

TEST_CASE("singleblock: a stop inside the walked path is not an indirect branch's target", "[singleblock]") {
  // +0 nop; +1 nop; +2 jmp rax (ff e0); +4 ret
  Code c({0x90, 0x90, 0xff, 0xe0, 0xc3});
  // BTF dropped: one instruction later, at +1. The jmp rax cannot be checked, but a block step
  // never stops before the block's end, so this is no branch of its.
  auto v = c.step(0, 0x246, kTrapTrace, 1, kDr6Step);
  INFO(v.why);
  CHECK(v.result == BlockStepResult::Untrusted);
  CHECK(c.step(0, 0x246, kTrapTrace, 2, kDr6Step).result == BlockStepResult::Untrusted);
  // a stop elsewhere is the jmp's target; so is the start itself (a loop through rax)
  v = c.step(0, 0x246, kTrapTrace, 0x40, kDr6Step);
  CHECK(v.result == BlockStepResult::Branch);
  CHECK(v.from == at(2));
  CHECK(c.step(0, 0x246, kTrapTrace, 0, kDr6Step).result == BlockStepResult::Branch);
}
