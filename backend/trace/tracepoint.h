// Tracepoint definitions as the client downloads them (QTDP, QTDV): where, when, and what to
// collect. Plain values; the experiment (trace_experiment.h) keeps and runs them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace backend::trace {

// `collect $regs`: the whole register file (gdbserver collects every register whatever the
// mask says; the mask is kept to upload it as it came).
struct CollectRegisters {
  std::vector<uint8_t> mask;  // big-endian bit mask as sent (R<hex>)
};
// `collect var` of a fixed address or register-relative place: len bytes at basereg + offset
// (basereg -1: offset is the address).
struct CollectMemory {
  int basereg = -1;
  uint64_t offset = 0;
  uint64_t len = 0;
};
// `collect expr`: an agent expression whose trace ops say what to keep.
struct CollectExpression {
  std::vector<uint8_t> bytecode;
};
using TraceAction = std::variant<CollectRegisters, CollectMemory, CollectExpression>;

struct Tracepoint {
  uint32_t number = 0;
  uint64_t addr = 0;
  bool enabled = true;
  uint64_t step_count = 0;     // while-stepping: instructions stepped after the hit
  uint64_t pass_count = 0;     // stop the experiment after this many hits (0: never)
  bool fast = false;           // ftrace (F<size> in QTDP)
  uint64_t fast_size = 0;      // bytes the client says the jump may cover
  bool is_static = false;      // strace (S): marker-based, not served
  std::vector<uint8_t> condition;   // agent expression; empty: unconditional
  std::vector<TraceAction> actions;        // at the hit
  std::vector<TraceAction> step_actions;   // at each while-stepping step
  // The client's texts as it sent them (QTDPsrc) and the action strings (qTfP uploads them).
  bool stepping_started = false;  // an 'S' came: later action packets are while-stepping too
  std::vector<std::string> sources;
  std::vector<std::string> action_texts;       // each action as received ("R…", "M…", "X…")
  std::vector<std::string> step_action_texts;  // the while-stepping ones
  // Run-time counts (qTP): hits, and bytes of buffer its frames took.
  uint64_t hits = 0;
  uint64_t bytes_used = 0;
};

struct TraceVariable {
  uint32_t number = 0;
  int64_t initial = 0;
  int64_t value = 0;
  bool builtin = false;
  bool has_value = false;   // set at start (initial) or by an expression
  std::string name;         // as sent (plain text, decoded from hex)
};

}  // namespace backend::trace
