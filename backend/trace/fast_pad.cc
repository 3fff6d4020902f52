#include "backend/trace/fast_pad.h"

#include <sys/syscall.h>

#include <cerrno>
#include <map>

#include "backend/btrace/patch/stub_encoder.h"

namespace backend::trace {

namespace {

// Hardware register numbers.
enum Reg : int { RAX = 0, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

// Where the pad's pushes leave each register, from rbx (= rsp after the pushes): r15 first.
int saved_offset(int hw) {
  static const int order[15] = {RAX, RCX, RDX, RBX, RSI, RDI, RBP, R8, R9, R10, R11, R12, R13, R14, R15};
  for (int i = 0; i < 15; ++i)
    if (order[i] == hw) return (14 - i) * 8;
  return -1;
}
constexpr int kSavedFlags = 15 * 8;
constexpr int kSavedRspDelta = 16 * 8 + 128;  // the program's rsp, from rbx

// GDB's register numbers (the tdesc order) of the 18 a pad keeps, as hardware numbers; rsp, rip
// and eflags are special (-1, -2, -3).
int tdesc_to_hw(int regno) {
  static const int map[18] = {RAX, RBX, RCX, RDX, RSI, RDI, RBP, -1, R8, R9, R10, R11, R12, R13, R14, R15, -2, -3};
  return regno >= 0 && regno < 18 ? map[regno] : -100;
}

class Emitter {
 public:
  std::vector<uint8_t> b;
  void byte(uint8_t v) { b.push_back(v); }
  void u16(uint16_t v) { byte(v & 0xff); byte(v >> 8); }
  void u32(uint32_t v) { for (int i = 0; i < 4; ++i) byte(static_cast<uint8_t>(v >> (8 * i))); }
  void u64(uint64_t v) { for (int i = 0; i < 8; ++i) byte(static_cast<uint8_t>(v >> (8 * i))); }
  size_t pos() const { return b.size(); }
  void patch32(size_t at, int32_t v) { for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * i)); }

  void rex(bool w, int reg, int base) {
    uint8_t r = static_cast<uint8_t>(0x40 | (w ? 8 : 0) | ((reg & 8) ? 4 : 0) | ((base & 8) ? 1 : 0));
    if (r != 0x40) byte(r);
  }
  // modrm for [base + disp32] with `reg` in the reg field.
  void mem(int reg, int base, int32_t disp) {
    byte(static_cast<uint8_t>(0x80 | ((reg & 7) << 3) | (base & 7)));
    if ((base & 7) == 4) byte(0x24);  // SIB: base only (rsp, r12)
    u32(static_cast<uint32_t>(disp));
  }
  void push(int r) { if (r & 8) byte(0x41); byte(static_cast<uint8_t>(0x50 + (r & 7))); }
  void pop(int r) { if (r & 8) byte(0x41); byte(static_cast<uint8_t>(0x58 + (r & 7))); }
  void movabs(int r, uint64_t imm) { rex(true, 0, r); byte(static_cast<uint8_t>(0xb8 + (r & 7))); u64(imm); }
  void load(int r, int base, int32_t disp) { rex(true, r, base); byte(0x8b); mem(r, base, disp); }
  void store(int base, int32_t disp, int r) { rex(true, r, base); byte(0x89); mem(r, base, disp); }
  void store32(int base, int32_t disp, int r) { rex(false, r, base); byte(0x89); mem(r, base, disp); }
  void store16(int base, int32_t disp, int r) { byte(0x66); rex(false, r, base); byte(0x89); mem(r, base, disp); }
  void store8_imm(int base, int32_t disp, uint8_t v) { rex(false, 0, base); byte(0xc6); mem(0, base, disp); byte(v); }
  void store32_imm(int base, int32_t disp, uint32_t v) { rex(false, 0, base); byte(0xc7); mem(0, base, disp); u32(v); }
  void store16_imm(int base, int32_t disp, uint16_t v) { byte(0x66); rex(false, 0, base); byte(0xc7); mem(0, base, disp); u16(v); }
  void lea(int r, int base, int32_t disp) { rex(true, r, base); byte(0x8d); mem(r, base, disp); }
  void push_mem(int base, int32_t disp) { rex(false, 0, base); byte(0xff); mem(6, base, disp); }
  // dst op= src (r/m = dst, reg = src): add 01, or 09, and 21, sub 29, xor 31, cmp 39.
  void alu(uint8_t op, int dst, int src) { rex(true, src, dst); byte(op); byte(static_cast<uint8_t>(0xc0 | ((src & 7) << 3) | (dst & 7))); }
  void alu_imm(int ext, int dst, int32_t imm) { rex(true, 0, dst); byte(0x81); byte(static_cast<uint8_t>(0xc0 | (ext << 3) | (dst & 7))); u32(static_cast<uint32_t>(imm)); }
  void mov(int dst, int src) { alu(0x89, dst, src); }
  void jcc(uint8_t cc, size_t& fix) { byte(0x0f); byte(static_cast<uint8_t>(0x80 | cc)); fix = pos(); u32(0); }
  void jmp(size_t& fix) { byte(0xe9); fix = pos(); u32(0); }
  void call(size_t& fix) { byte(0xe8); fix = pos(); u32(0); }
  void bind(size_t fix, size_t target) { patch32(fix, static_cast<int32_t>(target - (fix + 4))); }
};

constexpr uint8_t kJe = 0x4, kJne = 0x5, kJle = 0xe, kJa = 0x7;
constexpr uint32_t kMaxTrace = 4096;  // bytes one `trace` op may keep in a fast frame

// Agent-expression opcodes (GDB's ax.def).
enum Op : uint8_t {
  kAdd = 0x02, kSub, kMul, kDivS, kDivU, kRemS, kRemU, kLsh, kRshS, kRshU, kTrace, kTraceQuick, kLogNot,
  kBitAnd, kBitOr, kBitXor, kBitNot, kEqual, kLessS, kLessU, kExt, kRef8, kRef16, kRef32, kRef64,
  kIfGoto = 0x20, kGoto, kConst8, kConst16, kConst32, kConst64, kReg, kEnd, kDup, kPop, kZeroExt,
  kSwap = 0x2b, kTrace16 = 0x30, kPick = 0x32, kRot = 0x33,
};

int operand_bytes(uint8_t op) {
  switch (op) {
    case kTraceQuick: case kExt: case kConst8: case kZeroExt: case kPick: return 1;
    case kIfGoto: case kGoto: case kConst16: case kReg: case kTrace16: return 2;
    case kConst32: return 4;
    case kConst64: return 8;
    default: return 0;
  }
}
bool known(uint8_t op) {
  switch (op) {
    case kAdd: case kSub: case kMul: case kDivS: case kDivU: case kRemS: case kRemU: case kLsh: case kRshS:
    case kRshU: case kTrace: case kTraceQuick:
    case kLogNot: case kBitAnd: case kBitOr: case kBitXor: case kBitNot: case kEqual: case kLessS: case kLessU:
    case kExt: case kRef8: case kRef16: case kRef32: case kRef64: case kIfGoto: case kGoto: case kConst8:
    case kConst16: case kConst32: case kConst64: case kReg: case kEnd: case kDup: case kPop: case kZeroExt:
    case kSwap: case kTrace16: case kPick: case kRot:
      return true;
    default:
      return false;
  }
}
uint64_t big_endian(std::span<const uint8_t> s) {
  uint64_t v = 0;
  for (uint8_t c : s) v = (v << 8) | c;
  return v;
}

// Checks an expression the pad can run: known ops, forward jumps, no stack underflow, every
// path ending in `end`. Adds the bytes its collection ops may keep to `frame_bytes`.
std::optional<std::string> check_expression(std::span<const uint8_t> code, bool collecting, uint32_t* frame_bytes) {
  std::map<size_t, int> depth_at;  // stack depth on entry, from the jumps seen so far
  int depth = 0;
  std::optional<uint64_t> last_const;  // GDB pushes a `trace` op's size as a constant just before it
  bool reachable = true;
  std::vector<bool> starts(code.size());  // where ops begin: the only places a jump may land
  for (size_t pc = 0; pc < code.size();) {
    uint8_t op = code[pc];
    starts[pc] = true;
    if (!known(op)) return "agent op " + std::to_string(op) + " is not compiled into pads";
    size_t n = static_cast<size_t>(operand_bytes(op));
    if (pc + 1 + n > code.size()) return "truncated agent expression";
    auto operand = code.subspan(pc + 1, n);
    if (auto it = depth_at.find(pc); it != depth_at.end()) {
      last_const.reset();  // a jump lands here: the stack top may come from elsewhere
      if (reachable && it->second != depth) return "stack depth differs where paths meet";
      depth = it->second;
      reachable = true;
    }
    if (!reachable) return "unreachable code in the expression";
    auto need = [&](int k) { return depth >= k; };
    int pops = 0, pushes = 0;
    switch (op) {
      case kAdd: case kSub: case kMul: case kLsh: case kRshS: case kRshU: case kBitAnd: case kBitOr:
      case kBitXor: case kEqual: case kLessS: case kLessU: case kDivS: case kDivU: case kRemS: case kRemU:
        pops = 2; pushes = 1; break;
      case kLogNot: case kBitNot: case kExt: case kZeroExt: case kRef8: case kRef16: case kRef32: case kRef64:
        pops = 1; pushes = 1; break;
      case kConst8: case kConst16: case kConst32: case kConst64: case kReg: pushes = 1; break;
      case kDup: pops = 1; pushes = 2; break;
      case kPop: pops = 1; break;
      case kSwap: pops = 2; pushes = 2; break;
      case kRot: pops = 3; pushes = 3; break;
      case kPick: pops = static_cast<int>(operand[0]) + 1; pushes = pops + 1; break;
      case kTrace: pops = 2; break;
      case kTraceQuick: case kTrace16: pops = 1; pushes = 1; break;
      case kIfGoto: pops = 1; break;
      default: break;
    }
    if (!need(pops)) return "stack underflow in the expression";
    depth += pushes - pops;
    if (depth > 256) return "expression stack too deep for a pad";
    if (op == kReg && tdesc_to_hw(static_cast<int>(big_endian(operand))) == -100)
      return "register " + std::to_string(big_endian(operand)) + " is not kept by pads";
    if (op == kTrace || op == kTraceQuick || op == kTrace16) {
      if (!collecting) return "a collection op in a condition";
      uint64_t size = op == kTrace ? std::min<uint64_t>(last_const.value_or(kMaxTrace), kMaxTrace) : big_endian(operand);
      *frame_bytes += 11 + static_cast<uint32_t>(size);
    }
    last_const.reset();
    if (op == kConst8 || op == kConst16 || op == kConst32 || op == kConst64) last_const = big_endian(operand);
    size_t next = pc + 1 + n;
    if (op == kIfGoto || op == kGoto) {
      size_t target = big_endian(operand);
      if (target <= pc || target >= code.size()) return "backward or outside jump in the expression";
      auto [it, fresh] = depth_at.emplace(target, depth);
      if (!fresh && it->second != depth) return "stack depth differs where paths meet";
      if (op == kGoto) reachable = false;
    }
    if (op == kEnd) {
      if (depth < (collecting ? 0 : 1)) return "no value at end";
      reachable = false;
    }
    pc = next;
  }
  if (reachable) return "expression runs off its end";
  for (const auto& [target, d] : depth_at)
    if (!starts[target]) return "a jump into the middle of an op";
  return std::nullopt;
}

// Static size of a tracepoint's frame, or why it has no pad.
std::optional<std::string> frame_size(const Tracepoint& tp, uint32_t* bytes) {
  *bytes = sizeof(FastFrameHeader) + kFastRegisters * 8;
  if (!tp.condition.empty()) {
    uint32_t none = 0;
    if (auto why = check_expression(tp.condition, false, &none)) return "condition: " + *why;
  }
  for (const auto& a : tp.actions) {
    if (const auto* m = std::get_if<CollectMemory>(&a)) {
      if (m->len > 0xffff) return "a memory range over 64 KiB";
      if (m->basereg >= 0 && tdesc_to_hw(m->basereg) == -100) return "memory relative to a register pads do not keep";
      *bytes += 11 + static_cast<uint32_t>(m->len);
    } else if (const auto* x = std::get_if<CollectExpression>(&a)) {
      if (auto why = check_expression(x->bytecode, true, bytes)) return *why;
    }
  }
  if (*bytes > 1u << 20) return "frame too large for a pad";
  return std::nullopt;
}

// Emits the code of one expression. The value stack is the machine stack (r15 its base);
// `fail` and `done` collect the jumps to the expression's failure (an unreadable address) and
// its `end`. Collection ops write 'M' blocks at r13.
class ExprCompiler {
 public:
  ExprCompiler(Emitter& e, uint64_t site, std::vector<size_t>& calls) : e_(e), site_(site), calls_(calls) {}
  std::vector<size_t> fail, done;

  void reg_value(int regno) {  // rax = the register's value at the site
    int hw = tdesc_to_hw(regno);
    if (hw == -1) e_.lea(RAX, RBX, kSavedRspDelta);
    else if (hw == -2) e_.movabs(RAX, site_);
    else if (hw == -3) e_.load(RAX, RBX, kSavedFlags);
    else e_.load(RAX, RBX, saved_offset(hw));
  }
  // Reads rdx bytes at rsi into rdi; rax = bytes read (or -errno).
  void read() {
    size_t fix;
    e_.call(fix);
    calls_.push_back(fix);  // bound to the subroutine once it is placed
  }
  // An 'M' block at r13 of `len` bytes (in rdx) at the address in rsi; skipped when unreadable.
  void block() {
    e_.store8_imm(R13, 0, 'M');
    e_.store(R13, 1, RSI);
    e_.lea(RDI, R13, 11);
    read();
    e_.alu(0x85, RAX, RAX);  // test rax, rax
    size_t skip;
    e_.jcc(kJle, skip);
    e_.store16(R13, 9, RAX);
    e_.alu(0x01, R13, RAX);       // add r13, rax
    e_.alu_imm(0, R13, 11);       // add r13, 11
    e_.bind(skip, e_.pos());
  }

  void compile(std::span<const uint8_t> code) {
    std::map<size_t, size_t> at;                       // bytecode offset -> code position
    std::vector<std::pair<size_t, size_t>> fixups;     // rel32 position -> bytecode target
    for (size_t pc = 0; pc < code.size();) {
      at[pc] = e_.pos();
      uint8_t op = code[pc];
      size_t n = static_cast<size_t>(operand_bytes(op));
      auto operand = code.subspan(pc + 1, n);
      uint64_t imm = big_endian(operand);
      switch (op) {
        case kConst8: case kConst16: case kConst32: case kConst64:
          e_.movabs(RAX, imm);
          e_.push(RAX);
          break;
        case kReg: reg_value(static_cast<int>(imm)); e_.push(RAX); break;
        case kAdd: case kSub: case kMul: case kBitAnd: case kBitOr: case kBitXor: case kLsh: case kRshS: case kRshU:
        case kEqual: case kLessS: case kLessU:
          e_.pop(RCX);
          e_.pop(RAX);
          switch (op) {
            case kAdd: e_.alu(0x01, RAX, RCX); break;
            case kSub: e_.alu(0x29, RAX, RCX); break;
            case kBitAnd: e_.alu(0x21, RAX, RCX); break;
            case kBitOr: e_.alu(0x09, RAX, RCX); break;
            case kBitXor: e_.alu(0x31, RAX, RCX); break;
            case kMul: e_.byte(0x48); e_.byte(0x0f); e_.byte(0xaf); e_.byte(0xc1); break;  // imul rax, rcx
            case kLsh: e_.byte(0x48); e_.byte(0xd3); e_.byte(0xe0); break;                  // shl rax, cl
            case kRshU: e_.byte(0x48); e_.byte(0xd3); e_.byte(0xe8); break;                 // shr rax, cl
            case kRshS: e_.byte(0x48); e_.byte(0xd3); e_.byte(0xf8); break;                 // sar rax, cl
            default: {
              e_.alu(0x39, RAX, RCX);  // cmp rax, rcx
              uint8_t set = op == kEqual ? 0x94 : op == kLessS ? 0x9c : 0x92;  // sete / setl / setb
              e_.byte(0x0f); e_.byte(set); e_.byte(0xc0);
              e_.byte(0x0f); e_.byte(0xb6); e_.byte(0xc0);  // movzx eax, al
            }
          }
          e_.push(RAX);
          break;
        case kDivS: case kDivU: case kRemS: case kRemU: {
          // Division by zero fails the expression (as the server's evaluator); INT64_MIN / -1
          // wraps instead of trapping (idiv would raise SIGFPE in the program).
          e_.pop(RCX);
          e_.pop(RAX);
          e_.alu(0x85, RCX, RCX);
          size_t zero;
          e_.jcc(kJe, zero);
          fail.push_back(zero);
          bool rem = op == kRemS || op == kRemU;
          if (op == kDivU || op == kRemU) {
            e_.byte(0x31); e_.byte(0xd2);                  // xor edx, edx
            e_.byte(0x48); e_.byte(0xf7); e_.byte(0xf1);   // div rcx
          } else {
            e_.alu_imm(7, RCX, -1);                        // cmp rcx, -1
            size_t normal, joined;
            e_.jcc(kJne, normal);
            if (rem) { e_.byte(0x31); e_.byte(0xd2); }     // the remainder of x / -1 is 0
            else { e_.byte(0x48); e_.byte(0xf7); e_.byte(0xd8); }  // neg rax
            if (!rem) { e_.byte(0x48); e_.byte(0x89); e_.byte(0xc2); }  // mov rdx, rax (unused)
            e_.jmp(joined);
            e_.bind(normal, e_.pos());
            e_.byte(0x48); e_.byte(0x99);                  // cqo
            e_.byte(0x48); e_.byte(0xf7); e_.byte(0xf9);   // idiv rcx
            e_.bind(joined, e_.pos());
          }
          if (rem) { e_.byte(0x48); e_.byte(0x89); e_.byte(0xd0); }  // mov rax, rdx
          e_.push(RAX);
          break;
        }
        case kLogNot:
          e_.pop(RAX);
          e_.alu(0x85, RAX, RAX);
          e_.byte(0x0f); e_.byte(0x94); e_.byte(0xc0);
          e_.byte(0x0f); e_.byte(0xb6); e_.byte(0xc0);
          e_.push(RAX);
          break;
        case kBitNot: e_.pop(RAX); e_.byte(0x48); e_.byte(0xf7); e_.byte(0xd0); e_.push(RAX); break;
        case kExt: case kZeroExt: {
          unsigned bits = operand[0];
          if (bits > 0 && bits < 64) {
            e_.pop(RAX);
            e_.byte(0x48); e_.byte(0xc1); e_.byte(0xe0); e_.byte(static_cast<uint8_t>(64 - bits));       // shl
            e_.byte(0x48); e_.byte(0xc1); e_.byte(op == kExt ? 0xf8 : 0xe8); e_.byte(static_cast<uint8_t>(64 - bits));
            e_.push(RAX);
          }
          break;
        }
        case kRef8: case kRef16: case kRef32: case kRef64: {
          int size = op == kRef8 ? 1 : op == kRef16 ? 2 : op == kRef32 ? 4 : 8;
          e_.pop(RSI);
          e_.byte(0x6a); e_.byte(0x00);  // push 0: the slot, zero-extended
          e_.mov(RDI, RSP);
          e_.byte(0xba); e_.u32(static_cast<uint32_t>(size));  // mov edx, size
          read();
          e_.alu_imm(7, RAX, size);  // cmp rax, size
          size_t f;
          e_.jcc(kJne, f);
          fail.push_back(f);
          break;  // the slot holds the value
        }
        case kIfGoto: {
          e_.pop(RAX);
          e_.alu(0x85, RAX, RAX);
          size_t f;
          e_.jcc(kJne, f);
          fixups.emplace_back(f, imm);
          break;
        }
        case kGoto: {
          size_t f;
          e_.jmp(f);
          fixups.emplace_back(f, imm);
          break;
        }
        case kEnd: {
          size_t f;
          e_.jmp(f);
          done.push_back(f);
          break;
        }
        case kDup: e_.push_mem(RSP, 0); break;
        case kPop: e_.lea(RSP, RSP, 8); break;
        case kSwap: e_.pop(RAX); e_.pop(RCX); e_.push(RAX); e_.push(RCX); break;
        case kRot: e_.pop(RAX); e_.pop(RCX); e_.pop(RDX); e_.push(RAX); e_.push(RDX); e_.push(RCX); break;
        case kPick: e_.push_mem(RSP, 8 * static_cast<int32_t>(operand[0])); break;
        case kTraceQuick: case kTrace16:
          e_.load(RSI, RSP, 0);
          e_.byte(0xba); e_.u32(static_cast<uint32_t>(imm));  // mov edx, n
          block();
          break;
        case kTrace: {
          e_.pop(RDX);
          e_.pop(RSI);
          // At most kMaxTrace bytes (what the frame reserved for this op).
          e_.alu_imm(7, RDX, static_cast<int32_t>(kMaxTrace));
          size_t ok;
          e_.jcc(0x6, ok);  // jbe
          e_.byte(0xba); e_.u32(kMaxTrace);
          e_.bind(ok, e_.pos());
          block();
          break;
        }
        default: break;
      }
      pc += 1 + n;
    }
    for (auto [fix, target] : fixups) e_.bind(fix, at.at(target));
  }

 private:
  Emitter& e_;
  uint64_t site_;
  std::vector<size_t>& calls_;
};

}  // namespace

std::optional<std::string> fast_unsupported(const Tracepoint& tp) {
  if (tp.step_count > 0 || !tp.step_actions.empty()) return "while-stepping needs a stop per step";
  uint32_t bytes = 0;
  return frame_size(tp, &bytes);
}

Result<FastPad> build_fast_pad(const FastPadSpec& spec) {
  const Tracepoint& tp = *spec.tracepoint;
  uint32_t frame_bytes = 0;
  if (auto why = fast_unsupported(tp)) return Error{EOPNOTSUPP, *why};
  (void)frame_size(tp, &frame_bytes);
  frame_bytes = (frame_bytes + 7) & ~7u;

  // The displaced instruction(s): straight-line code covering the jump, all relocatable.
  auto insns = patch::decode_all(spec.code, spec.site);
  if (!insns) return insns.error();
  size_t covered = 0;
  std::vector<patch::Insn> displaced;
  for (const auto& in : *insns) {
    if (covered >= patch::kJmpLen) break;
    if (in.flow) return Error{EOPNOTSUPP, "the instruction at the site moves the pc (no room for a jump)"};
    displaced.push_back(in);
    covered += in.len;
  }
  if (covered < patch::kJmpLen) return Error{EOPNOTSUPP, "not enough instructions at the site"};
  if (displaced.size() > 1) return Error{EOPNOTSUPP, "the instruction at the site is shorter than a jump"};

  Emitter e;
  // Entry: keep the red zone, the flags and every general register.
  e.lea(RSP, RSP, -128);
  e.byte(0x9c);  // pushfq
  for (int r : {RAX, RCX, RDX, RBX, RSI, RDI, RBP, R8, R9, R10, R11, R12, R13, R14, R15}) e.push(r);
  e.mov(RBX, RSP);
  e.byte(0x48); e.byte(0x83); e.byte(0xe4); e.byte(0xf0);  // and rsp, -16
  e.mov(R15, RSP);
  e.movabs(R14, spec.data_addr);

  std::vector<size_t> read_calls;  // calls of the read subroutine, which goes at the end
  std::vector<size_t> skip_jumps;  // to the exit without a frame
  ExprCompiler cond(e, spec.site, read_calls);
  if (!tp.condition.empty()) {
    cond.compile(tp.condition);
    size_t at_end = e.pos();
    for (size_t f : cond.done) e.bind(f, at_end);
    e.pop(RAX);
    e.mov(RSP, R15);
    e.alu(0x85, RAX, RAX);
    size_t f;
    e.jcc(kJe, f);
    skip_jumps.push_back(f);
    for (size_t fl : cond.fail) skip_jumps.push_back(fl);  // an unreadable address: false
  }
  // Reserve the frame (compare-and-swap on head); a full area counts a lost frame.
  size_t retry = e.pos();
  e.load(RAX, R14, 0);
  e.lea(RCX, RAX, static_cast<int32_t>(frame_bytes));
  e.rex(true, RCX, R14); e.byte(0x3b); e.mem(RCX, R14, 8);  // cmp rcx, [r14+8]
  size_t full;
  e.jcc(kJa, full);
  e.byte(0xf0); e.rex(true, RCX, R14); e.byte(0x0f); e.byte(0xb1); e.mem(RCX, R14, 0);  // lock cmpxchg [r14], rcx
  size_t again;
  e.jcc(kJne, again);
  e.bind(again, retry);
  e.lea(R12, R14, 0);
  e.alu(0x01, R12, RAX);  // r12 = frame
  e.store32_imm(R12, 0, frame_bytes);
  bool registers = false;
  for (const auto& a : tp.actions) registers = registers || std::holds_alternative<CollectRegisters>(a);
  e.store16_imm(R12, 10, registers ? kFrameRegisters : 0);
  e.lea(R13, R12, static_cast<int32_t>(sizeof(FastFrameHeader)));
  for (int i = 0; i < static_cast<int>(kFastRegisters); ++i) {
    ExprCompiler regs(e, spec.site, read_calls);
    regs.reg_value(i);
    e.store(R13, 8 * i, RAX);
  }
  e.alu_imm(0, R13, static_cast<int32_t>(kFastRegisters * 8));
  // The actions, in order.
  for (const auto& a : tp.actions) {
    if (const auto* m = std::get_if<CollectMemory>(&a)) {
      ExprCompiler c(e, spec.site, read_calls);
      if (m->basereg >= 0) {
        c.reg_value(m->basereg);
        e.mov(RSI, RAX);
        e.movabs(RAX, m->offset);
        e.alu(0x01, RSI, RAX);
      } else {
        e.movabs(RSI, m->offset);
      }
      e.byte(0xba); e.u32(static_cast<uint32_t>(m->len));
      c.block();
    } else if (const auto* x = std::get_if<CollectExpression>(&a)) {
      ExprCompiler c(e, spec.site, read_calls);
      c.compile(x->bytecode);
      size_t end = e.pos();
      for (size_t f : c.done) e.bind(f, end);
      for (size_t f : c.fail) e.bind(f, end);
      e.mov(RSP, R15);
    }
  }
  // Commit: the size written, then the tracepoint number (what the server waits for).
  e.mov(RAX, R13);
  e.alu(0x29, RAX, R12);
  e.store32(R12, 4, RAX);
  e.store16_imm(R12, 8, static_cast<uint16_t>(tp.number));
  size_t to_exit;
  e.jmp(to_exit);
  skip_jumps.push_back(to_exit);
  // A full area: an int3 the server takes (fast_area_full) to drain it, then back to retry.
  e.bind(full, e.pos());
  size_t full_trap = e.pos();
  e.byte(0xcc);
  size_t back_to_retry;
  e.jmp(back_to_retry);
  e.bind(back_to_retry, retry);
  // Exit: every register back, then the displaced instruction, then back to the program.
  size_t exit = e.pos();
  for (size_t f : skip_jumps) e.bind(f, exit);
  e.mov(RSP, RBX);
  // A debugger single-stepping the pushfq (as the server does to move a thread out of a pad)
  // pushed the trap flag too, and a thread left at the retry label runs on to here on its
  // own: never restore it, or the program would trap after every instruction from then on.
  e.rex(true, 0, RBX); e.byte(0x81); e.mem(4, RBX, kSavedFlags); e.u32(0xfffffeffu);  // and qword [rbx+flags], ~TF
  for (int r : {R15, R14, R13, R12, R11, R10, R9, R8, RBP, RDI, RSI, RBX, RDX, RCX, RAX}) e.pop(r);
  e.byte(0x9d);  // popfq (a stepper does it by hand: backend/ptrace/popf_by_hand.h)
  e.lea(RSP, RSP, 128);
  for (const auto& in : displaced) {
    auto moved = patch::relocate(in, spec.pad_addr + e.pos());
    if (!moved) return Error{EOPNOTSUPP, "the instruction at the site cannot be moved into the pad"};
    e.b.insert(e.b.end(), moved->begin(), moved->end());
  }
  uint64_t resume = spec.site + covered;
  auto back = patch::jmp_rel32(spec.pad_addr + e.pos(), resume);
  if (!back) return Error{ERANGE, "the pad is out of jump range of the site"};
  e.b.insert(e.b.end(), back->begin(), back->end());

  // The read subroutine: process_vm_readv(pid, {rdi, rdx}, 1, {rsi, rdx}, 1, 0).
  size_t read_sub = e.pos();
  e.push(RDX); e.push(RDI);
  e.mov(R8, RSP);
  e.push(RDX); e.push(RSI);
  e.mov(R10, RSP);
  e.mov(RSI, R8);
  e.byte(0xba); e.u32(1);                   // mov edx, 1
  e.byte(0x41); e.byte(0xb8); e.u32(1);     // mov r8d, 1
  e.byte(0x45); e.byte(0x31); e.byte(0xc9); // xor r9d, r9d
  e.byte(0xbf); e.u32(static_cast<uint32_t>(spec.pid));  // mov edi, pid
  e.byte(0xb8); e.u32(SYS_process_vm_readv);             // mov eax, nr
  e.byte(0x0f); e.byte(0x05);                            // syscall
  e.lea(RSP, RSP, 32);
  e.byte(0xc3);
  for (size_t f : read_calls) e.bind(f, read_sub);

  FastPad pad;
  pad.code = std::move(e.b);
  auto jump = patch::jmp_rel32(spec.site, spec.pad_addr);
  if (!jump) return Error{ERANGE, "the pad is out of jump range of the site"};
  pad.jump = *jump;
  pad.original.assign(spec.code.begin(), spec.code.begin() + patch::kJmpLen);
  pad.resume_addr = resume;
  pad.frame_bytes = frame_bytes;
  pad.full_trap = full_trap;
  pad.retry = retry;
  return pad;
}

}  // namespace backend::trace
