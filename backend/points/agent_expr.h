// GDB agent expressions: the bytecode GDB sends with a Z0/Z1 breakpoint when the server
// evaluates breakpoint conditions (ConditionalBreakpoints+) and agent-style dprintf commands
// (BreakpointCommands+). Opcodes and operand layout as in GDB's manual, appendix "Agent
// Expressions" (gdbsupport/ax.def). Pure code: the inferior is reached only through Context,
// every step is bounded by Limits, and bad bytecode gives an Evaluation with a Fault, never a
// crash or an exception.
//
// Error rule (gdbserver 13, mem-break.cc gdb_condition_true_at_breakpoint_z_type): a condition
// that fails to evaluate counts as TRUE, so the hit is reported and GDB, which evaluates every
// reported hit's condition again on its side, decides (and shows the user the error). Here
// every fault is Outcome::Error, and conditions_hold() treats it as true. Where gdbserver has
// no error but reads garbage or crashes (an unreadable address for ref*/printf %s, a register
// wider than 8 bytes, an unknown trace state variable, INT64_MIN / -1, printf %p), this code
// faults instead, so the same rule applies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backend::agent {

// What an expression may touch. Any member may be empty: the ops that need it then fault.
struct Context {
  // A register by GDB's remote register number (the target description's order, as the 'p'
  // packet numbers them: GDB compiles `reg` with gdbarch_remote_register_number), zero-extended
  // to 64 bits. nullopt when unavailable or wider than 8 bytes (x87/SSE registers).
  std::function<std::optional<uint64_t>(int regno)> reg;
  // Inferior memory as the program sees it (breakpoint shadows removed); false if short.
  std::function<bool(uint64_t addr, std::span<uint8_t> out)> read;
  // Trace state variables (getv/setv). nullopt / false: no such variable.
  std::function<std::optional<int64_t>(int tsv)> get_tsv;
  std::function<bool(int tsv, int64_t value)> set_tsv;
  // printf output, one call per printf op with its whole text (dprintf-style agent).
  std::function<void(std::string_view text)> out;
  // Tracepoint collection (trace, trace_quick, trace16, tracenz, tracev), set only while a
  // tracepoint's actions run; unset, those ops fault (never valid in a condition or command).
  // collect_string keeps the bytes up to the first NUL, at most `limit`.
  std::function<bool(uint64_t addr, uint64_t len)> collect_memory;
  std::function<bool(uint64_t addr, uint64_t limit)> collect_string;
  std::function<bool(int tsv)> collect_variable;
};

struct Limits {
  size_t max_stack = 1024;       // values on the stack (gdbserver: 98)
  size_t max_steps = 100000;     // ops executed (DWARF-compiled locations may jump backwards)
  size_t max_bytes = 64 * 1024;  // bytecode length (jump targets are 16-bit anyway)
  size_t max_string = 4096;      // bytes printf %s reads from the inferior (longer: truncated)
  size_t max_output = 64 * 1024; // printf text per evaluation
};

enum class Outcome { True, False, Error };

enum class Fault {
  None,
  EmptyBytecode,        // length 0
  TooLong,              // over Limits::max_bytes
  BadOpcode,            // not an opcode (0x00, invalid2 0x31, above printf 0x34)
  Unsupported,          // trace*, float ops: valid, but never in a condition or dprintf
  Truncated,            // operands run past the end
  BadOperand,           // ext 0, a printf format that is not NUL-terminated
  BadJump,              // goto/if_goto target outside the bytecode
  RanOffEnd,            // no `end` before the last byte
  StackUnderflow,
  StackOverflow,        // over Limits::max_stack
  StepLimit,            // over Limits::max_steps
  DivideByZero,
  MemoryUnreadable,     // ref8..ref64, printf %s
  RegisterUnavailable,
  TsvUnavailable,
  PrintfFormat,         // bad format, wrong argument count, unsupported conversion
  OutputLimit,          // over Limits::max_output
  EmptyStack,           // `end` with nothing on the stack: no value (normal for dprintf)
};

struct Evaluation {
  Outcome outcome = Outcome::Error;
  Fault fault = Fault::None;
  std::string error;               // a sentence naming the op and its offset
  std::optional<uint64_t> value;   // the stack top at `end`
  size_t pc = 0;                   // offset of the `end` or of the op that faulted
  size_t steps = 0;                // ops executed
};

// Runs one expression from offset 0 to its `end`.
Evaluation evaluate(std::span<const uint8_t> bytecode, const Context& ctx, const Limits& limits = {});

// A breakpoint location's target-side conditions: true when any condition is true or fails to
// evaluate; an empty list is true (unconditional). Evaluated as gdbserver does: most recently
// received first (its list is built by prepending), stopping at the first true or failing one.
bool conditions_hold(std::span<const std::vector<uint8_t>> conditions, const Context& ctx,
                     const Limits& limits = {});

// A dprintf command ran as intended: GDB compiles it to leave nothing on the stack, so
// `end` with an empty stack is success here (gdbserver counts it as an error, which makes it
// run only the first command of a list; see docs).
inline bool command_ok(const Evaluation& e) {
  return e.fault == Fault::None || e.fault == Fault::EmptyStack;
}

// One line per op ("0003 const8 3"), for debug logs and test messages.
std::string disassemble(std::span<const uint8_t> bytecode);

std::string_view fault_name(Fault fault);

}  // namespace backend::agent
