#include "backend/engine/path_plan.h"

#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace backend {

Result<void> PathPlan::plan(BlockCache& cache, uint64_t pc, const std::function<bool(uint64_t)>& stop_before) {
  clear();
  uint64_t at = pc;
  for (;;) {
    auto block = cache.block_at(at);
    if (!block) {
      if (segments_.empty()) return block.error();
      // The last direct branch leads to code we cannot decode: stop on that branch instead.
      pending_.pop_back();
      to_next_.pop_back();
      auto prev = cache.block_at(segments_.back().begin);
      if (!prev) return prev.error();
      stop_insn_ = prev->end;
      active_ = true;
      return {};
    }
    segments_.push_back(Segment{at, block->end.addr});
    const FlowInsn& end = block->end;
    bool direct = (end.kind == FlowKind::Jump || end.kind == FlowKind::Call) && end.direct_target;
    if (direct && pending_.size() < kMaxDirectChain && !(stop_before && stop_before(*end.direct_target))) {
      uint64_t target = *end.direct_target;
      // A target already on the path closes a cycle (`jmp .`, a loop of jumps): stop there.
      bool cycle = false;
      for (const auto& s : segments_) cycle = cycle || (target >= s.begin && target <= s.last);
      if (!cycle) {
        pending_.push_back(Branch{end.addr, target});
        to_next_.push_back(target == end.addr + end.len);
        at = target;
        continue;
      }
    }
    stop_insn_ = end;
    active_ = true;
    return {};
  }
}

std::vector<Branch> PathPlan::commit(uint64_t stop_pc, uint64_t& block_start) {
  std::vector<Branch> passed;
  for (size_t k = segments_.size(); k-- > 0;) {
    if (stop_pc < segments_[k].begin || stop_pc > segments_[k].last) continue;
    for (size_t i = 0; i < k; ++i)
      if (!to_next_[i]) passed.push_back(pending_[i]);
    if (k > 0) block_start = segments_[k].begin;
    break;
  }
  clear();
  return passed;
}

void PathPlan::clear() {
  active_ = false;
  pending_.clear();
  to_next_.clear();
  segments_.clear();
}

std::optional<uint64_t> insn_before(BlockCache& cache, uint64_t block_start, uint64_t pc) {
  if (block_start == 0 || pc <= block_start || pc - block_start > 64 * 1024) return std::nullopt;
  uint64_t at = block_start;
  for (int n = 0; n < 8192; ++n) {
    auto insn = cache.insn_at(at);
    if (!insn || insn->first == 0) return std::nullopt;
    uint64_t next = at + insn->first;
    if (next == pc) return at;
    if (next > pc) return std::nullopt;
    // A branch inside [block_start, pc) means pc is not in this straight-line block... unless
    // it is a not-taken conditional branch or a syscall that fell through (the patch source
    // runs those in place); we cannot tell, so only plain instructions pass.
    if (insn->second && insn->second->kind != FlowKind::CondJump && insn->second->kind != FlowKind::Loop &&
        insn->second->kind != FlowKind::Syscall)
      return std::nullopt;
    at = next;
  }
  return std::nullopt;
}

namespace {
// GDB register number -> user_regs_struct field, for GDB's registers 0-17.
constexpr size_t kGprOffsets[18] = {
    offsetof(user_regs_struct, rax), offsetof(user_regs_struct, rbx), offsetof(user_regs_struct, rcx),
    offsetof(user_regs_struct, rdx), offsetof(user_regs_struct, rsi), offsetof(user_regs_struct, rdi),
    offsetof(user_regs_struct, rbp), offsetof(user_regs_struct, rsp), offsetof(user_regs_struct, r8),
    offsetof(user_regs_struct, r9),  offsetof(user_regs_struct, r10), offsetof(user_regs_struct, r11),
    offsetof(user_regs_struct, r12), offsetof(user_regs_struct, r13), offsetof(user_regs_struct, r14),
    offsetof(user_regs_struct, r15), offsetof(user_regs_struct, rip), offsetof(user_regs_struct, eflags)};

uint64_t field(const user_regs_struct& gp, size_t off) {
  uint64_t v;
  std::memcpy(&v, reinterpret_cast<const char*>(&gp) + off, 8);
  return v;
}
void set_field(user_regs_struct& gp, size_t off, uint64_t v) {
  std::memcpy(reinterpret_cast<char*>(&gp) + off, &v, 8);
}
}  // namespace

void gprs_to_file(const user_regs_struct& gp, const RegisterLayout& layout, RegisterFile& out) {
  if (out.bytes.size() != layout.total_bytes) {
    out.bytes.assign(layout.total_bytes, 0);
    out.valid.assign(layout.regs.size(), true);
  }
  for (int r = 0; r < 18; ++r) out.set_u64(layout, r, field(gp, kGprOffsets[r]));
  if (auto fs = layout.find("fs_base")) out.set_u64(layout, *fs, gp.fs_base);
  if (auto gs = layout.find("gs_base")) out.set_u64(layout, *gs, gp.gs_base);
}

void file_to_gprs(const RegisterFile& file, const RegisterLayout& layout, user_regs_struct& gp) {
  // emulate_flow only changes rip, rsp and rcx.
  set_field(gp, kGprOffsets[RegisterLayout::kRip], file.get_u64(layout, RegisterLayout::kRip));
  set_field(gp, kGprOffsets[RegisterLayout::kRsp], file.get_u64(layout, RegisterLayout::kRsp));
  set_field(gp, kGprOffsets[2], file.get_u64(layout, 2));
}

bool signal_is_caught(pid_t pid, int sig) {
  if (sig <= 0 || sig > 64) return false;
  std::string path = "/proc/" + std::to_string(pid) + "/status";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return false;
  char line[256];
  bool caught = false;
  while (std::fgets(line, sizeof line, f)) {
    unsigned long long mask = 0;
    if (std::sscanf(line, "SigCgt: %llx", &mask) == 1) {
      caught = (mask >> (sig - 1)) & 1;
      break;
    }
  }
  std::fclose(f);
  return caught;
}

}  // namespace backend
