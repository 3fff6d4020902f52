// A software history as the Intel PT stream a CPU would have written (see pt_synth.h).
#include "backend/btrace/pt_synth.h"

#include <optional>

#include "backend/x86/insn_length.h"

namespace backend {

namespace {

constexpr unsigned kTntMax = 47;  // bits one long TNT packet carries
constexpr uint8_t kIpBytesSext48 = 3 << 5;

}  // namespace

void PtPacketWriter::psb_plus() {
  flush_tnt();
  for (int i = 0; i < 8; ++i) out_.insert(out_.end(), {0x02, 0x82});  // PSB
  out_.insert(out_.end(), {0x99, 0x01});                               // MODE.Exec: CS.L, 64-bit
  out_.insert(out_.end(), {0x02, 0x23});                               // PSBEND
}

void PtPacketWriter::tnt(bool taken) {
  tnt_bits_ = (tnt_bits_ << 1) | (taken ? 1 : 0);
  if (++tnt_count_ == kTntMax) flush_tnt();
}

// Long TNT: 02 a3, then 48 bits: a stop bit above the branches, the oldest branch highest.
void PtPacketWriter::flush_tnt() {
  if (!tnt_count_) return;
  uint64_t payload = (uint64_t{1} << tnt_count_) | tnt_bits_;
  out_.insert(out_.end(), {0x02, 0xa3});
  for (int i = 0; i < 6; ++i) out_.push_back(static_cast<uint8_t>(payload >> (8 * i)));
  tnt_bits_ = 0;
  tnt_count_ = 0;
}

void PtPacketWriter::ip(IpKind kind, uint64_t ip) {
  flush_tnt();
  out_.push_back(static_cast<uint8_t>(kIpBytesSext48 | static_cast<uint8_t>(kind)));
  for (int i = 0; i < 6; ++i) out_.push_back(static_cast<uint8_t>(ip >> (8 * i)));
}

void PtPacketWriter::ip_suppressed(IpKind kind) {
  flush_tnt();
  out_.push_back(static_cast<uint8_t>(kind));
}

std::vector<uint8_t> PtPacketWriter::take() {
  flush_tnt();
  return std::move(out_);
}

namespace {

using IpKind = PtPacketWriter::IpKind;

// Where the walk along a history's fall-through path ended.
enum class Walk {
  AtFlow,  // at the block end that is the branch's `from`
  Inside,  // `from` is an ordinary instruction of the block (a signal came after it)
  Lost,    // the code does not lead there
};

class Synthesizer {
 public:
  Synthesizer(PtPacketWriter& w, BlockCache& code, uint64_t start) : w_(w), code_(code), cur_(start) {}

  void branch(const Branch& b) {
    if (!on_) return on_at(b.to);
    std::optional<FlowInsn> flow;
    switch (walk_to(b.from, flow)) {
      case Walk::AtFlow: return take(*flow, b.to);
      case Walk::Inside:
        if (auto insn = code_.insn_at(b.from); insn && insn->first) {
          interrupted_at(b.from + insn->first, b.to);  // `from` ran, the next one did not
          return;
        }
        [[fallthrough]];
      case Walk::Lost:
        off_at(cur_);
        on_at(b.to);
        return;
    }
  }

  // The thread stopped at end_pc (not executed): an asynchronous exit there.
  void end(uint64_t end_pc) {
    if (!on_) return;
    std::optional<FlowInsn> flow;
    Walk r = end_pc >= cur_ ? walk_to(end_pc, flow, /*inclusive_end=*/true) : Walk::Lost;
    off_at(r == Walk::Lost ? cur_ : end_pc);
  }

 private:
  // Follows the fall-through path from cur_ to `target`, writing what the blocks passed need
  // (a not-taken bit per conditional branch, a disable/enable pair per system call).
  Walk walk_to(uint64_t target, std::optional<FlowInsn>& flow, bool inclusive_end = false) {
    for (;;) {
      if (target < cur_) return Walk::Lost;
      auto block = code_.block_at(cur_);
      if (!block) return Walk::Lost;
      const FlowInsn& f = block->end;
      if (target < f.addr || (inclusive_end && target == f.addr)) return Walk::Inside;
      if (target == f.addr) {
        flow = f;
        return Walk::AtFlow;
      }
      uint64_t next = f.addr + f.len;
      switch (f.kind) {
        case FlowKind::CondJump:
        case FlowKind::Loop:
          w_.tnt(false);
          break;
        case FlowKind::Jump:
        case FlowKind::Call:
          if (f.direct_target != next) return Walk::Lost;  // taken, so it would be in the history
          break;
        case FlowKind::Syscall:  // a call that returned where it was: not a branch in the history
          w_.ip_suppressed(IpKind::TipPgd);
          w_.ip(IpKind::TipPge, next);
          break;
        case FlowKind::Trap:  // a block cut short (no control flow), or a trap that did not trap
          break;
        case FlowKind::Return:
        case FlowKind::IndirectJump:
        case FlowKind::IndirectCall:
          // Not in the history, so it went to the next instruction (a jump table's entry for the
          // case that follows): histories leave out branches to the next instruction.
          w_.ip(IpKind::Tip, next);
          break;
      }
      if (!f.len) {
        uint8_t bytes[16];
        size_t n = code_.reader()(f.addr, bytes);
        auto len = f.kind == FlowKind::Trap ? hint_nop_length(std::span<const uint8_t>(bytes, n)) : std::nullopt;
        if (!len) return Walk::Lost;
        next = f.addr + *len;
      }
      cur_ = next;
    }
  }

  // The branch at `f` went to `to`.
  void take(const FlowInsn& f, uint64_t to) {
    switch (f.kind) {
      case FlowKind::CondJump:
      case FlowKind::Loop:
        w_.tnt(true);
        if (f.direct_target && *f.direct_target != to) return interrupted_at(*f.direct_target, to);
        break;
      case FlowKind::Jump:
      case FlowKind::Call:
        if (!f.direct_target) {
          w_.ip(IpKind::Tip, to);
        } else if (*f.direct_target != to) {
          return interrupted_at(*f.direct_target, to);  // a signal came before the target ran
        }
        break;
      case FlowKind::Return:
      case FlowKind::IndirectJump:
      case FlowKind::IndirectCall:
        w_.ip(IpKind::Tip, to);
        break;
      case FlowKind::Syscall:
      case FlowKind::Trap:
        // rt_sigreturn, a handler entered at the call's exit, a trap's signal: a far branch
        // there, as the history has it (a CPU tracing user mode only would write TIP.PGD and
        // TIP.PGE, which GDB shows as a gap in the trace).
        w_.ip(IpKind::Tip, to);
        break;
    }
    cur_ = to;
  }

  // A signal came before `at` ran and its handler `to` began: an asynchronous branch (FUP,
  // TIP), what a CPU tracing the kernel's entry too would write, and GDB's trace goes on
  // without a gap, as the history does.
  void interrupted_at(uint64_t at, uint64_t to) {
    w_.ip(IpKind::Fup, at);
    w_.ip(IpKind::Tip, to);
    cur_ = to;
  }
  void off_at(uint64_t at) {
    if (!on_) return;
    w_.ip(IpKind::Fup, at);
    w_.ip_suppressed(IpKind::TipPgd);
    on_ = false;
  }
  void on_at(uint64_t at) {
    w_.ip(IpKind::TipPge, at);
    cur_ = at;
    on_ = true;
  }

  PtPacketWriter& w_;
  BlockCache& code_;
  uint64_t cur_;
  bool on_ = true;
};

}  // namespace

std::vector<uint8_t> synthesize_pt(std::span<const Branch> branches, uint64_t start, uint64_t end_pc, BlockCache& code) {
  PtPacketWriter w;
  w.psb_plus();
  if (!start) return w.take();
  w.ip(IpKind::TipPge, start);
  Synthesizer s(w, code, start);
  for (const Branch& b : branches) s.branch(b);
  s.end(end_pc);
  return w.take();
}

}  // namespace backend
