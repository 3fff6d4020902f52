// GDB agent-expression interpreter; see agent_expr.h for the rules and their sources.
#include "backend/points/agent_expr.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <limits>

namespace backend::agent {
namespace {

// Opcode values from GDB's manual ("Bytecode Descriptions"), the same as gdbsupport/ax.def.
enum Op : uint8_t {
  kFloat = 0x01, kAdd = 0x02, kSub = 0x03, kMul = 0x04, kDivSigned = 0x05, kDivUnsigned = 0x06,
  kRemSigned = 0x07, kRemUnsigned = 0x08, kLsh = 0x09, kRshSigned = 0x0a, kRshUnsigned = 0x0b,
  kTrace = 0x0c, kTraceQuick = 0x0d, kLogNot = 0x0e, kBitAnd = 0x0f, kBitOr = 0x10,
  kBitXor = 0x11, kBitNot = 0x12, kEqual = 0x13, kLessSigned = 0x14, kLessUnsigned = 0x15,
  kExt = 0x16, kRef8 = 0x17, kRef16 = 0x18, kRef32 = 0x19, kRef64 = 0x1a, kRefFloat = 0x1b,
  kRefDouble = 0x1c, kRefLongDouble = 0x1d, kLToD = 0x1e, kDToL = 0x1f, kIfGoto = 0x20,
  kGoto = 0x21, kConst8 = 0x22, kConst16 = 0x23, kConst32 = 0x24, kConst64 = 0x25, kReg = 0x26,
  kEnd = 0x27, kDup = 0x28, kPop = 0x29, kZeroExt = 0x2a, kSwap = 0x2b, kGetv = 0x2c,
  kSetv = 0x2d, kTracev = 0x2e, kTracenz = 0x2f, kTrace16 = 0x30, kInvalid2 = 0x31,
  kPick = 0x32, kRot = 0x33, kPrintf = 0x34,
};

struct OpInfo {
  const char* name = nullptr;  // nullptr: not an opcode
  uint8_t operand_bytes = 0;   // printf: the fixed part (nargs, string length); the string follows
};

constexpr std::array<OpInfo, 0x35> kOps = [] {
  std::array<OpInfo, 0x35> t{};
  auto set = [&t](Op op, const char* name, uint8_t n) { t[op] = OpInfo{name, n}; };
  set(kFloat, "float", 0); set(kAdd, "add", 0); set(kSub, "sub", 0); set(kMul, "mul", 0);
  set(kDivSigned, "div_signed", 0); set(kDivUnsigned, "div_unsigned", 0);
  set(kRemSigned, "rem_signed", 0); set(kRemUnsigned, "rem_unsigned", 0); set(kLsh, "lsh", 0);
  set(kRshSigned, "rsh_signed", 0); set(kRshUnsigned, "rsh_unsigned", 0);
  set(kTrace, "trace", 0); set(kTraceQuick, "trace_quick", 1); set(kLogNot, "log_not", 0);
  set(kBitAnd, "bit_and", 0); set(kBitOr, "bit_or", 0); set(kBitXor, "bit_xor", 0);
  set(kBitNot, "bit_not", 0); set(kEqual, "equal", 0); set(kLessSigned, "less_signed", 0);
  set(kLessUnsigned, "less_unsigned", 0); set(kExt, "ext", 1); set(kRef8, "ref8", 0);
  set(kRef16, "ref16", 0); set(kRef32, "ref32", 0); set(kRef64, "ref64", 0);
  set(kRefFloat, "ref_float", 0); set(kRefDouble, "ref_double", 0);
  set(kRefLongDouble, "ref_long_double", 0); set(kLToD, "l_to_d", 0); set(kDToL, "d_to_l", 0);
  set(kIfGoto, "if_goto", 2); set(kGoto, "goto", 2); set(kConst8, "const8", 1);
  set(kConst16, "const16", 2); set(kConst32, "const32", 4); set(kConst64, "const64", 8);
  set(kReg, "reg", 2); set(kEnd, "end", 0); set(kDup, "dup", 0); set(kPop, "pop", 0);
  set(kZeroExt, "zero_ext", 1); set(kSwap, "swap", 0); set(kGetv, "getv", 2);
  set(kSetv, "setv", 2); set(kTracev, "tracev", 2); set(kTracenz, "tracenz", 0);
  set(kTrace16, "trace16", 2); set(kPick, "pick", 1); set(kRot, "rot", 0);
  set(kPrintf, "printf", 3);
  return t;  // invalid2 (0x31) stays unnamed: the manual reserves it, GDB never emits it
}();

const OpInfo* op_info(uint8_t op) {
  if (op >= kOps.size() || kOps[op].name == nullptr) return nullptr;
  return &kOps[op];
}

// Operands are big-endian (the manual; ax-general.c writes them so).
uint64_t big_endian(std::span<const uint8_t> b) {
  uint64_t v = 0;
  for (uint8_t byte : b) v = (v << 8) | byte;
  return v;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, v);
  return buf;
}

// ---- printf (the agent form: GDB's format text as typed, escapes unprocessed) ----

enum class ArgClass { Int, Long, LongLong, SizeT, Pointer, String };

struct Piece {
  std::string text;        // literal text ("%%" already reduced), or a directive's C spec
  bool directive = false;
  ArgClass cls = ArgClass::Int;
};

// The escapes GDB's format parser (gdbsupport/format.cc) accepts; the text ends at an
// unescaped '"' or its end.
bool unescape_format(std::string_view raw, std::string& out, std::string& err) {
  for (size_t i = 0; i < raw.size() && raw[i] != '"'; ++i) {
    char c = raw[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == raw.size()) {
      err = "printf: format string ends in a backslash";
      return false;
    }
    switch (raw[i]) {
      case '\\': out += '\\'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'e': out += '\x1b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'v': out += '\v'; break;
      case '"': out += '"'; break;
      default:
        err = std::string("printf: unrecognized escape character \\") + raw[i] + " in format string";
        return false;
    }
  }
  return true;
}

// Splits a format into literal pieces and directives with GDB's rules (format.cc: C89
// conversions plus ll and z). What gdbserver's ax_printf cannot print faults here: floating
// point (GDB's agent compiler has no floating-point values), %ls/%lc, and the decimal-float
// and %I64 modifiers. %p is printed (as glibc and GDB's own printf do: 0x... or (nil));
// gdbserver errors out on it and exits.
bool parse_format(std::string_view f, size_t max_field, std::vector<Piece>& pieces,
                  std::string& err, Fault& fault) {
  fault = Fault::PrintfFormat;
  std::string literal;
  size_t i = 0;
  auto number = [&](std::string& spec) {
    size_t v = 0;
    while (i < f.size() && f[i] >= '0' && f[i] <= '9') {
      v = std::min<size_t>(v * 10 + static_cast<size_t>(f[i] - '0'), max_field + 1);
      spec += f[i++];
    }
    return v;
  };
  while (i < f.size()) {
    char c = f[i++];
    if (c != '%') {
      literal += c;
      continue;
    }
    if (i < f.size() && f[i] == '%') {
      literal += '%';
      ++i;
      continue;
    }
    if (!literal.empty()) pieces.push_back({std::move(literal), false});
    literal.clear();

    size_t start = i - 1;
    std::string spec = "%";
    bool hash = false, zero = false, space = false, plus = false;
    while (i < f.size() && std::string_view("0-+ #").find(f[i]) != std::string_view::npos) {
      hash |= f[i] == '#';
      zero |= f[i] == '0';
      space |= f[i] == ' ';
      plus |= f[i] == '+';
      spec += f[i++];
    }
    size_t width = number(spec);
    bool prec = false;
    size_t precision = 0;
    if (i < f.size() && f[i] == '.') {
      prec = true;
      spec += f[i++];
      precision = number(spec);
    }
    if (width > max_field || precision > max_field) {
      err = "printf: field width or precision over the output limit";
      fault = Fault::OutputLimit;
      return false;
    }
    int lcount = 0;
    bool h = false, big_l = false, decimal_float = false, z = false, i64 = false;
    if (i < f.size()) {
      switch (f[i]) {
        case 'h': h = true; ++i; break;
        case 'l':
          ++i;
          ++lcount;
          if (i < f.size() && f[i] == 'l') ++i, ++lcount;
          break;
        case 'L': big_l = true; ++i; break;
        case 'H': decimal_float = true; ++i; break;
        case 'D':
          decimal_float = true;
          ++i;
          if (i < f.size() && f[i] == 'D') ++i;
          break;
        case 'z': z = true; ++i; break;
        case 'I':
          if (f.substr(i + 1, 2) == "64") i += 3, i64 = true;
          break;
      }
    }
    if (i == f.size()) {
      err = "printf: incomplete format specifier at end of format string";
      return false;
    }
    char conv = f[i++];
    bool bad = false;
    ArgClass cls = ArgClass::Int;
    bool unsupported = false;
    switch (conv) {
      case 'u':
      case 'o':
      case 'x':
      case 'X':
      case 'd':
      case 'i':
        bad = (conv == 'u' && hash) || (conv != 'd' && conv != 'i' && (space || plus)) || big_l;
        cls = z ? ArgClass::SizeT : lcount == 0 ? ArgClass::Int : lcount == 1 ? ArgClass::Long : ArgClass::LongLong;
        unsupported = decimal_float || i64;
        break;
      case 'c':
        bad = lcount > 1 || h || big_l || prec || zero || space || plus;
        unsupported = lcount == 1 || decimal_float || z || i64;  // %lc: wide character
        break;
      case 'p':
        bad = lcount || h || big_l || prec || hash || zero || space || plus;
        cls = ArgClass::Pointer;
        unsupported = decimal_float || z || i64;
        break;
      case 's':
        bad = lcount > 1 || h || big_l || zero || space || plus;
        cls = ArgClass::String;
        unsupported = lcount == 1 || decimal_float || z || i64;  // %ls: wide string
        break;
      case 'e':
      case 'f':
      case 'g':
      case 'E':
      case 'G':
        bad = lcount || h;
        unsupported = true;
        break;
      case '*':
        err = "printf: `*' not supported for precision or width";
        return false;
      case 'n':
        err = "printf: format specifier `n' not supported";
        return false;
      default:
        err = std::string("printf: unrecognized format specifier '") + conv + "'";
        return false;
    }
    if (bad) {
      err = std::string("printf: inappropriate modifiers to format specifier '") + conv + "'";
      return false;
    }
    if (unsupported) {
      err = "printf: format directive '" + std::string(f.substr(start, i - start)) +
            "' is not supported in agent printf";
      return false;
    }
    if (h) spec += 'h';
    if (lcount == 1) spec += 'l';
    if (lcount == 2) spec += "ll";
    if (z) spec += 'z';
    spec += conv;
    pieces.push_back({std::move(spec), true, cls});
  }
  if (!literal.empty()) pieces.push_back({std::move(literal), false});
  return true;
}

template <typename T>
std::string c_format(const std::string& spec, T value) {
  int n = std::snprintf(nullptr, 0, spec.c_str(), value);
  if (n <= 0) return {};
  std::string s(static_cast<size_t>(n), '\0');
  std::snprintf(s.data(), s.size() + 1, spec.c_str(), value);
  return s;
}

// ---- the machine ----

class Machine {
 public:
  Machine(std::span<const uint8_t> code, const Context& ctx, const Limits& limits)
      : code_(code), ctx_(ctx), limits_(limits) {}

  Evaluation run() {
    if (code_.empty()) return fail(Fault::EmptyBytecode, "empty agent expression");
    if (code_.size() > limits_.max_bytes)
      return fail(Fault::TooLong, "agent expression of " + std::to_string(code_.size()) +
                                      " bytes is over the limit of " + std::to_string(limits_.max_bytes));
    while (true) {
      if (pc_ >= code_.size()) return fail(Fault::RanOffEnd, "agent expression has no end op");
      if (r_.steps >= limits_.max_steps)
        return fail(Fault::StepLimit, "agent expression ran over " + std::to_string(limits_.max_steps) + " steps");
      ++r_.steps;
      op_pc_ = pc_;
      uint8_t op = code_[pc_];
      const OpInfo* info = op_info(op);
      if (info == nullptr) return fail(Fault::BadOpcode, "unrecognized agent expression op " + hex(op));
      if (code_.size() - pc_ - 1 < info->operand_bytes)
        return fail(Fault::Truncated, std::string(info->name) + ": operands run past the end");
      std::span<const uint8_t> operand = code_.subspan(pc_ + 1, info->operand_bytes);
      pc_ += 1 + info->operand_bytes;
      if (op == kEnd) {
        if (stack_.empty()) return fail(Fault::EmptyStack, "end: the stack is empty, no value");
        r_.value = stack_.back();
        r_.outcome = *r_.value != 0 ? Outcome::True : Outcome::False;
        r_.pc = op_pc_;
        return r_;
      }
      if (!step(static_cast<Op>(op), info->name, operand)) return r_;
    }
  }

 private:
  Evaluation fail(Fault fault, std::string message) {
    r_.outcome = Outcome::Error;
    r_.fault = fault;
    r_.error = std::move(message) + " (at offset " + std::to_string(op_pc_) + ")";
    r_.value.reset();
    r_.pc = op_pc_;
    return r_;
  }
  bool stop(Fault fault, std::string message) {
    fail(fault, std::move(message));
    return false;
  }
  bool need(size_t n, const char* name) {
    if (stack_.size() >= n) return true;
    return stop(Fault::StackUnderflow, std::string(name) + ": needs " + std::to_string(n) +
                                           " values, the stack has " + std::to_string(stack_.size()));
  }
  bool push(uint64_t v, const char* name) {
    if (stack_.size() >= limits_.max_stack)
      return stop(Fault::StackOverflow, std::string(name) + ": stack over " + std::to_string(limits_.max_stack) + " values");
    stack_.push_back(v);
    return true;
  }
  uint64_t pop() {
    uint64_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  bool jump_target(std::span<const uint8_t> operand, const char* name, size_t& target) {
    target = big_endian(operand);
    if (target < code_.size()) return true;
    return stop(Fault::BadJump, std::string(name) + ": target " + std::to_string(target) +
                                    " is outside the expression (" + std::to_string(code_.size()) + " bytes)");
  }
  bool read(uint64_t addr, std::span<uint8_t> out) {
    return ctx_.read && ctx_.read(addr, out);
  }

  bool binary(Op op, const char* name) {
    if (!need(2, name)) return false;
    uint64_t b = pop();
    uint64_t a = pop();
    int64_t sa = static_cast<int64_t>(a), sb = static_cast<int64_t>(b);
    uint64_t r = 0;
    switch (op) {
      case kAdd: r = a + b; break;
      case kSub: r = a - b; break;
      case kMul: r = a * b; break;
      case kDivSigned:
      case kDivUnsigned:
      case kRemSigned:
      case kRemUnsigned:
        if (b == 0) return stop(Fault::DivideByZero, std::string(name) + ": division by zero");
        if (op == kDivUnsigned) r = a / b;
        else if (op == kRemUnsigned) r = a % b;
        // INT64_MIN / -1 overflows (a trap on x86): wraps to INT64_MIN, remainder 0.
        else if (sb == -1) r = op == kDivSigned ? 0 - a : 0;
        else r = static_cast<uint64_t>(op == kDivSigned ? sa / sb : sa % sb);
        break;
      // The count is taken modulo 64, as the x86 shift instructions gdbserver's C compiles
      // to do (C leaves counts >= 64 undefined).
      case kLsh: r = a << (b & 63); break;
      case kRshSigned: r = static_cast<uint64_t>(sa >> (b & 63)); break;
      case kRshUnsigned: r = a >> (b & 63); break;
      case kBitAnd: r = a & b; break;
      case kBitOr: r = a | b; break;
      case kBitXor: r = a ^ b; break;
      case kEqual: r = a == b; break;
      case kLessSigned: r = sa < sb; break;
      case kLessUnsigned: r = a < b; break;
      default: break;
    }
    stack_.push_back(r);
    return true;
  }

  bool ref(unsigned size, const char* name) {
    if (!need(1, name)) return false;
    uint64_t addr = stack_.back();
    std::array<uint8_t, 8> buf{};
    if (!read(addr, std::span<uint8_t>(buf.data(), size)))
      return stop(Fault::MemoryUnreadable, std::string(name) + ": cannot read memory at " + hex(addr));
    uint64_t v = 0;
    for (unsigned i = size; i-- > 0;) v = (v << 8) | buf[i];  // little-endian (x86-64)
    stack_.back() = v;
    return true;
  }

  bool step(Op op, const char* name, std::span<const uint8_t> operand) {
    switch (op) {
      case kAdd: case kSub: case kMul: case kDivSigned: case kDivUnsigned: case kRemSigned:
      case kRemUnsigned: case kLsh: case kRshSigned: case kRshUnsigned: case kBitAnd:
      case kBitOr: case kBitXor: case kEqual: case kLessSigned: case kLessUnsigned:
        return binary(op, name);
      case kLogNot:
        if (!need(1, name)) return false;
        stack_.back() = stack_.back() == 0;
        return true;
      case kBitNot:
        if (!need(1, name)) return false;
        stack_.back() = ~stack_.back();
        return true;
      case kExt: {
        if (!need(1, name)) return false;
        unsigned bits = operand[0];
        if (bits == 0) return stop(Fault::BadOperand, "ext: width 0");
        if (bits < 64) {  // sign-extend from bit (bits - 1); 64 and more leave the value as is
          uint64_t mask = uint64_t{1} << (bits - 1);
          uint64_t v = stack_.back() & ((uint64_t{1} << bits) - 1);
          stack_.back() = (v ^ mask) - mask;
        }
        return true;
      }
      case kZeroExt:
        if (!need(1, name)) return false;
        if (operand[0] < 64) stack_.back() &= (uint64_t{1} << operand[0]) - 1;
        return true;
      case kRef8: return ref(1, name);
      case kRef16: return ref(2, name);
      case kRef32: return ref(4, name);
      case kRef64: return ref(8, name);
      case kIfGoto: {
        size_t target = 0;
        if (!need(1, name) || !jump_target(operand, name, target)) return false;
        if (pop() != 0) pc_ = target;
        return true;
      }
      case kGoto: {
        size_t target = 0;
        if (!jump_target(operand, name, target)) return false;
        pc_ = target;
        return true;
      }
      case kConst8: case kConst16: case kConst32: case kConst64:
        return push(big_endian(operand), name);  // zero-extended; GDB emits ext for negatives
      case kReg: {
        int regno = static_cast<int>(big_endian(operand));
        std::optional<uint64_t> v;
        if (ctx_.reg) v = ctx_.reg(regno);
        if (!v) return stop(Fault::RegisterUnavailable, "reg: register " + std::to_string(regno) + " is unavailable");
        return push(*v, name);
      }
      case kDup:
        if (!need(1, name)) return false;
        return push(stack_.back(), name);
      case kPop:
        if (!need(1, name)) return false;
        stack_.pop_back();
        return true;
      case kSwap:
        if (!need(2, name)) return false;
        std::swap(stack_[stack_.size() - 1], stack_[stack_.size() - 2]);
        return true;
      case kRot: {  // a b c => c a b (c the top)
        if (!need(3, name)) return false;
        size_t n = stack_.size();
        std::rotate(stack_.begin() + static_cast<ptrdiff_t>(n - 3), stack_.begin() + static_cast<ptrdiff_t>(n - 1), stack_.end());
        return true;
      }
      case kPick: {  // pick 0 = dup
        size_t depth = operand[0];
        if (!need(depth + 1, name)) return false;
        return push(stack_[stack_.size() - 1 - depth], name);
      }
      case kGetv: {
        int tsv = static_cast<int>(big_endian(operand));
        std::optional<int64_t> v;
        if (ctx_.get_tsv) v = ctx_.get_tsv(tsv);
        if (!v) return stop(Fault::TsvUnavailable, "getv: no trace state variable " + std::to_string(tsv));
        return push(static_cast<uint64_t>(*v), name);
      }
      case kSetv: {  // the value stays on the stack, for enclosing expressions
        int tsv = static_cast<int>(big_endian(operand));
        if (!need(1, name)) return false;
        if (!ctx_.set_tsv || !ctx_.set_tsv(tsv, static_cast<int64_t>(stack_.back())))
          return stop(Fault::TsvUnavailable, "setv: no trace state variable " + std::to_string(tsv));
        return true;
      }
      case kPrintf: return printf_op(operand);
      case kTrace: case kTraceQuick: case kTrace16: case kTracev: case kTracenz:
        return trace_op(op, name, operand);
      case kFloat: case kRefFloat: case kRefDouble: case kRefLongDouble: case kLToD: case kDToL:
        return stop(Fault::Unsupported, std::string(name) + ": floating point is not supported");
      default:
        return stop(Fault::BadOpcode, std::string(name) + ": not handled");
    }
  }

  // Collection ops: trace (addr size =>), trace_quick n / trace16 n (addr => addr),
  // tracenz (addr limit =>), tracev n (=>).
  bool trace_op(Op op, const char* name, std::span<const uint8_t> operand) {
    if (!(op == kTracev ? static_cast<bool>(ctx_.collect_variable)
                        : op == kTracenz ? static_cast<bool>(ctx_.collect_string) : static_cast<bool>(ctx_.collect_memory)))
      return stop(Fault::Unsupported, std::string(name) + ": a tracepoint collection op, not valid in a condition or command");
    switch (op) {
      case kTracev:
        if (ctx_.collect_variable(static_cast<int>(big_endian(operand)))) return true;
        return stop(Fault::TsvUnavailable, "tracev: no trace state variable " + std::to_string(big_endian(operand)));
      case kTraceQuick: case kTrace16:
        if (!need(1, name)) return false;
        if (!ctx_.collect_memory(stack_.back(), big_endian(operand)))
          return stop(Fault::MemoryUnreadable, std::string(name) + ": cannot read memory at " + hex(stack_.back()));
        return true;
      default: {  // trace, tracenz
        if (!need(2, name)) return false;
        uint64_t len = pop(), addr = pop();
        if (op == kTrace ? ctx_.collect_memory(addr, len) : ctx_.collect_string(addr, len)) return true;
        return stop(Fault::MemoryUnreadable, std::string(name) + ": cannot read memory at " + hex(addr));
      }
    }
  }

  // printf <nargs:1> <len:2> <format:len bytes, NUL-terminated>. GDB (ax-gdb.c gen_printf)
  // pushes the arguments last to first, then the channel and the function (both 0, unused
  // here as in gdbserver): so the top is the function and the first argument comes third.
  bool printf_op(std::span<const uint8_t> operand) {
    size_t nargs = operand[0];
    size_t len = big_endian(operand.subspan(1, 2));
    if (code_.size() - pc_ < len) return stop(Fault::Truncated, "printf: format string runs past the end");
    std::span<const uint8_t> text = code_.subspan(pc_, len);
    pc_ += len;
    if (len == 0 || text.back() != 0) return stop(Fault::BadOperand, "printf: unterminated format string");
    if (!need(nargs + 2, "printf")) return false;
    stack_.pop_back();  // function
    stack_.pop_back();  // channel
    std::vector<uint64_t> args(nargs);
    for (size_t i = 0; i < nargs; ++i) args[i] = pop();

    std::string_view raw(reinterpret_cast<const char*>(text.data()), text.size());
    raw = raw.substr(0, raw.find('\0'));
    std::string format, err;
    if (!unescape_format(raw, format, err)) return stop(Fault::PrintfFormat, err);
    std::vector<Piece> pieces;
    Fault fault = Fault::PrintfFormat;
    if (!parse_format(format, limits_.max_output, pieces, err, fault)) return stop(fault, err);
    size_t wanted = static_cast<size_t>(std::count_if(pieces.begin(), pieces.end(), [](const Piece& p) { return p.directive; }));
    if (wanted != nargs)
      return stop(Fault::PrintfFormat, "printf: wrong number of arguments for the format string (" +
                                           std::to_string(nargs) + " given, " + std::to_string(wanted) + " wanted)");

    // Everything is checked before anything is written: a failing printf prints nothing.
    std::string out;
    size_t arg = 0;
    for (const Piece& p : pieces) {
      if (!p.directive) {
        out += p.text;
      } else {
        uint64_t v = args[arg++];
        switch (p.cls) {
          case ArgClass::Int: out += c_format(p.text, static_cast<int>(static_cast<uint32_t>(v))); break;
          case ArgClass::Long: out += c_format(p.text, static_cast<long>(v)); break;
          case ArgClass::LongLong: out += c_format(p.text, static_cast<long long>(v)); break;
          case ArgClass::SizeT: out += c_format(p.text, static_cast<size_t>(v)); break;
          case ArgClass::Pointer: out += c_format(p.text, reinterpret_cast<void*>(static_cast<uintptr_t>(v))); break;
          case ArgClass::String: {
            std::string s;
            if (v == 0) s = "(null)";  // as gdbserver's ax_printf
            else if (!read_string(v, s)) return stop(Fault::MemoryUnreadable, "printf: cannot read the %s string at " + hex(v));
            out += c_format(p.text, s.c_str());
            break;
          }
        }
      }
      if (output_ + out.size() > limits_.max_output)
        return stop(Fault::OutputLimit, "printf: output over " + std::to_string(limits_.max_output) + " bytes");
    }
    if (!ctx_.out) return stop(Fault::Unsupported, "printf: no output channel");
    output_ += out.size();
    ctx_.out(out);
    return true;
  }

  // A NUL-terminated string of at most max_string bytes (longer ones are cut there). Read in
  // pieces that never cross a page, so a string ending just before an unmapped page reads;
  // a piece that fails is read again byte by byte, for readers finer than pages.
  bool read_string(uint64_t addr, std::string& s) {
    std::array<uint8_t, 256> buf{};
    while (s.size() < limits_.max_string) {
      uint64_t to_page_end = 4096 - (addr & 4095);
      size_t n = static_cast<size_t>(std::min<uint64_t>({buf.size(), to_page_end, limits_.max_string - s.size()}));
      if (!read(addr, std::span<uint8_t>(buf.data(), n))) {
        for (size_t i = 0; i < n; ++i, ++addr) {
          if (!read(addr, std::span<uint8_t>(buf.data(), 1))) return false;
          if (buf[0] == 0) return true;
          s += static_cast<char>(buf[0]);
        }
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        if (buf[i] == 0) return true;
        s += static_cast<char>(buf[i]);
      }
      addr += n;
    }
    return true;
  }

  std::span<const uint8_t> code_;
  const Context& ctx_;
  const Limits& limits_;
  std::vector<uint64_t> stack_;
  size_t pc_ = 0;
  size_t op_pc_ = 0;
  size_t output_ = 0;
  Evaluation r_;
};

}  // namespace

Evaluation evaluate(std::span<const uint8_t> bytecode, const Context& ctx, const Limits& limits) {
  return Machine(bytecode, ctx, limits).run();
}

bool conditions_hold(std::span<const std::vector<uint8_t>> conditions, const Context& ctx,
                     const Limits& limits) {
  if (conditions.empty()) return true;
  for (size_t i = conditions.size(); i-- > 0;) {
    Evaluation e = evaluate(conditions[i], ctx, limits);
    if (e.outcome != Outcome::False) return true;
  }
  return false;
}

std::string disassemble(std::span<const uint8_t> code) {
  std::string out;
  size_t pc = 0;
  char line[64];
  while (pc < code.size()) {
    uint8_t op = code[pc];
    const OpInfo* info = op_info(op);
    std::snprintf(line, sizeof line, "%04zx ", pc);
    out += line;
    if (info == nullptr) {
      out += "?? " + hex(op) + "\n";
      ++pc;
      continue;
    }
    out += info->name;
    if (code.size() - pc - 1 < info->operand_bytes) {
      out += " (truncated)\n";
      break;
    }
    auto operand = code.subspan(pc + 1, info->operand_bytes);
    pc += 1 + info->operand_bytes;
    if (op == kPrintf) {
      size_t len = big_endian(operand.subspan(1, 2));
      out += " " + std::to_string(operand[0]) + " args";
      if (code.size() - pc < len) {
        out += " (truncated)\n";
        break;
      }
      std::string_view s(reinterpret_cast<const char*>(code.data() + pc), len);
      out += " \"" + std::string(s.substr(0, s.find('\0'))) + "\"";
      pc += len;
    } else if (info->operand_bytes > 0) {
      uint64_t v = big_endian(operand);
      out += (op == kIfGoto || op == kGoto) ? " " + hex(v) : " " + std::to_string(v);
    }
    out += "\n";
  }
  return out;
}

std::string_view fault_name(Fault fault) {
  switch (fault) {
    case Fault::None: return "none";
    case Fault::EmptyBytecode: return "empty bytecode";
    case Fault::TooLong: return "too long";
    case Fault::BadOpcode: return "bad opcode";
    case Fault::Unsupported: return "unsupported";
    case Fault::Truncated: return "truncated";
    case Fault::BadOperand: return "bad operand";
    case Fault::BadJump: return "bad jump";
    case Fault::RanOffEnd: return "ran off the end";
    case Fault::StackUnderflow: return "stack underflow";
    case Fault::StackOverflow: return "stack overflow";
    case Fault::StepLimit: return "step limit";
    case Fault::DivideByZero: return "divide by zero";
    case Fault::MemoryUnreadable: return "memory unreadable";
    case Fault::RegisterUnavailable: return "register unavailable";
    case Fault::TsvUnavailable: return "trace state variable unavailable";
    case Fault::PrintfFormat: return "printf format";
    case Fault::OutputLimit: return "output limit";
    case Fault::EmptyStack: return "empty stack";
  }
  return "?";
}

}  // namespace backend::agent
