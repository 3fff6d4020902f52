#include "backend/engine/block_step.h"

#include <fmt/format.h>

#include <csignal>
#include <utility>
#include <vector>

namespace backend {

namespace {

constexpr uint64_t kTf = 0x100;
constexpr int kMaxBlocks = 256;  // a step that fell through more branches than this is not trusted
constexpr uint64_t kDr6Hits = 0xf;  // DR6.B0-B3: a debug-register breakpoint or watchpoint

BlockStepVerdict verdict(BlockStepResult r, std::string why, uint64_t from = 0, uint64_t to = 0) {
  return BlockStepVerdict{r, from, to, std::move(why)};
}

// The opcode byte after legacy and REX prefixes (is_setting_trap_flag() skips the same ones).
std::optional<uint8_t> opcode_after_prefixes(const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = b[i];
    bool prefix = c == 0x66 || c == 0x67 || c == 0x26 || c == 0x2e || c == 0x36 || c == 0x3e ||
                  c == 0x64 || c == 0x65 || c == 0xf0 || c == 0xf2 || c == 0xf3 || (c >= 0x40 && c <= 0x4f);
    if (!prefix) return c;
  }
  return std::nullopt;
}

// `syscall`, `sysenter` and `int 0x80` all return through the kernel's syscall exit, which
// reports the step there.
bool enters_syscall(const FlowInsn& e) {
  if (e.kind == FlowKind::Syscall) return true;
  auto op = opcode_after_prefixes(e.bytes, e.len);
  if (!op) return false;
  size_t at = 0;
  while (at < e.len && e.bytes[at] != *op) ++at;
  if (*op == 0xcd) return at + 1 < e.len && e.bytes[at + 1] == 0x80;
  if (*op == 0x0f) return at + 1 < e.len && (e.bytes[at + 1] == 0x34 || e.bytes[at + 1] == 0x05);
  return false;
}

bool is_iret(const FlowInsn& e) {
  auto op = opcode_after_prefixes(e.bytes, e.len);
  return op && *op == 0xcf;
}

// Bytes popped by `ret imm16` besides the return address (0 for a plain ret).
uint64_t ret_extra_pop(const FlowInsn& e) {
  for (size_t i = 0; i + 2 < e.len; ++i)
    if (e.bytes[i] == 0xc2) return e.bytes[i + 1] | (uint64_t{e.bytes[i + 2]} << 8);
  return 0;
}

std::string hex(uint64_t v) { return fmt::format("{:#x}", v); }

// A call leaves its return address at [rsp]; a ret took it from just below the new rsp. When
// the word is readable and disagrees, the stop did not come from this instruction.
std::optional<std::string> stack_disagrees(const FlowInsn& e, const BlockStepStop& stop, const WordReader& memory) {
  if (!memory) return std::nullopt;
  uint64_t word = 0;
  switch (e.kind) {
    case FlowKind::Call:
    case FlowKind::IndirectCall:
      if (memory(stop.rsp, &word) && word != e.addr + e.len)
        return fmt::format("the call at {} would have pushed {}, but [rsp] is {}", hex(e.addr),
                           hex(e.addr + e.len), hex(word));
      return std::nullopt;
    case FlowKind::Return: {
      uint64_t slot = stop.rsp - 8 - ret_extra_pop(e);
      if (memory(slot, &word) && word != stop.pc)
        return fmt::format("the ret at {} popped {}, not the stop pc {}", hex(e.addr), hex(word), hex(stop.pc));
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

// The instruction at `e` was taken and the stop is at its target: a branch, unless the target
// is the next instruction (stepbranch does not count those) or the stack says otherwise.
BlockStepVerdict taken(const FlowInsn& e, const BlockStepStop& stop, const WordReader& memory) {
  if (stop.pc == e.addr + e.len)
    return verdict(BlockStepResult::NoBranch,
                   fmt::format("the branch at {} goes to the next instruction: not a taken branch for stepbranch", hex(e.addr)),
                   0, stop.pc);
  if (auto why = stack_disagrees(e, stop, memory)) return verdict(BlockStepResult::Untrusted, *why);
  return verdict(BlockStepResult::Branch, fmt::format("branch {} -> {}", hex(e.addr), hex(stop.pc)), e.addr, stop.pc);
}

// Linux single-stepped: the stop is one instruction after the start.
BlockStepVerdict one_instruction(const BlockStepStart& start, const BlockStepStop& stop, BlockCache& code,
                                 bool syscall_exit, const WordReader& memory) {
  auto insn = code.insn_at(start.pc);
  if (!insn || insn->first == 0)
    return verdict(BlockStepResult::Untrusted, fmt::format("no instruction at the start {}", hex(start.pc)));
  const auto& [len, flow] = *insn;
  if (syscall_exit) {
    if (flow && enters_syscall(*flow))
      return verdict(BlockStepResult::NoBranch, "system call exit (not a branch)", 0, stop.pc);
    return verdict(BlockStepResult::Untrusted, fmt::format("a syscall exit stop, but {} is no syscall", hex(start.pc)));
  }
  uint64_t next = start.pc + len;
  if (!flow) {
    if (stop.pc == next) return verdict(BlockStepResult::NoBranch, "single step (the kernel did not arm BTF)", 0, stop.pc);
    return verdict(BlockStepResult::Untrusted,
                   fmt::format("one step from {} should end at {}, not {}", hex(start.pc), hex(next), hex(stop.pc)));
  }
  if (stop.pc == next)
    return verdict(BlockStepResult::NoBranch, "single step (the kernel did not arm BTF): not taken", 0, stop.pc);
  if (flow->direct_target && *flow->direct_target != stop.pc)
    return verdict(BlockStepResult::Untrusted, fmt::format("the branch at {} goes to {}, not to the stop pc {}",
                                                           hex(start.pc), hex(*flow->direct_target), hex(stop.pc)));
  return taken(*flow, stop, memory);
}

}  // namespace

bool kernel_single_steps(const BlockStepStart& start, const CodeReader& bytes) {
  if (start.eflags & kTf) return true;  // TF the program set itself: no block step
  uint8_t b[15] = {};
  size_t n = bytes ? bytes(start.pc, std::span<uint8_t>(b, sizeof b)) : 0;
  auto op = opcode_after_prefixes(b, n);
  return op && (*op == 0x9d || *op == 0xcf);  // popf, iret
}

BlockStepVerdict classify_block_step(const BlockStepStart& start, const BlockStepStop& stop, BlockCache& code,
                                     const CodeReader& bytes, const WordReader& memory) {
  if (stop.signo != SIGTRAP) return verdict(BlockStepResult::NotAStep, fmt::format("signal {}", stop.signo));
  if (stop.si_code == SIGTRAP)  // ptrace_notify() at the first instruction of a signal handler
    return verdict(BlockStepResult::NoBranch, "signal handler entered (not a branch)", 0, stop.pc);
  if (stop.dr6 && (*stop.dr6 & kDr6Hits))
    return verdict(BlockStepResult::NotAStep, fmt::format("debug register hit (DR6 {})", hex(*stop.dr6)));
  bool step_trap = stop.dr6 ? (*stop.dr6 & kDr6SingleStep) != 0 : stop.si_code == kTrapTrace;
  bool syscall_exit = !step_trap && stop.si_code == kTrapBrkpt;
  if (!step_trap && !syscall_exit)
    return verdict(BlockStepResult::NotAStep, fmt::format("SIGTRAP with si_code {:#x} (breakpoint or kill)", stop.si_code));

  if (kernel_single_steps(start, bytes)) return one_instruction(start, stop, code, syscall_exit, memory);

  // Where the walk has been: a stop strictly inside it (past start.pc, up to a block's last
  // instruction) is one BTF would not have made, so an unverifiable branch cannot explain it.
  std::vector<std::pair<uint64_t, uint64_t>> walked;  // [first, last] instruction addresses
  auto on_path = [&](uint64_t pc) {
    for (auto [first, last] : walked)
      if (pc >= first && pc <= last && pc != start.pc) return true;
    return false;
  };
  uint64_t at = start.pc;
  for (int i = 0; i < kMaxBlocks; ++i) {
    auto block = code.block_at(at);
    if (!block) return verdict(BlockStepResult::Untrusted, fmt::format("no code at {} on the path", hex(at)));
    const FlowInsn& e = block->end;
    uint64_t fall = e.addr + e.len;
    walked.emplace_back(at, e.addr);
    if (enters_syscall(e)) {
      if (syscall_exit) return verdict(BlockStepResult::NoBranch, "system call exit (not a branch)", 0, stop.pc);
      return verdict(BlockStepResult::Untrusted,
                     fmt::format("the path passes the syscall at {} but the stop is no syscall exit", hex(e.addr)));
    }
    switch (e.kind) {
      case FlowKind::CondJump:
      case FlowKind::Loop:
        // Taken, it would have stopped the step at its target; so unless the stop is there, it fell through.
        if (!syscall_exit && e.direct_target && *e.direct_target == stop.pc) return taken(e, stop, memory);
        at = fall;
        continue;
      case FlowKind::Jump:
      case FlowKind::Call:
        if (!syscall_exit && e.direct_target && *e.direct_target == stop.pc) return taken(e, stop, memory);
        return verdict(BlockStepResult::Untrusted,
                       fmt::format("the {} at {} goes to {}, which is not where the thread stopped ({})",
                                   e.kind == FlowKind::Call ? "call" : "jmp", hex(e.addr),
                                   e.direct_target ? hex(*e.direct_target) : std::string("?"), hex(stop.pc)));
      case FlowKind::Return:
      case FlowKind::IndirectJump:
      case FlowKind::IndirectCall:
        if (syscall_exit)
          return verdict(BlockStepResult::Untrusted,
                         fmt::format("a syscall exit stop, but the path is taken at {} first", hex(e.addr)));
        if (on_path(stop.pc))
          return verdict(BlockStepResult::Untrusted,
                         fmt::format("the stop {} lies inside the path just walked, before the branch at {}: "
                                     "BTF ignored?", hex(stop.pc), hex(e.addr)));
        return taken(e, stop, memory);
      case FlowKind::Trap:
        if (!syscall_exit && is_iret(e)) return taken(e, stop, memory);
        return verdict(BlockStepResult::Untrusted, fmt::format("the path ends at {} (int, ud2, hlt...)", hex(e.addr)));
      case FlowKind::Syscall:
        break;  // handled above
    }
  }
  return verdict(BlockStepResult::Untrusted, fmt::format("no branch to {} within {} blocks of {}", hex(stop.pc), kMaxBlocks, hex(start.pc)));
}

}  // namespace backend
