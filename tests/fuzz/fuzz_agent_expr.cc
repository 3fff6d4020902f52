// libFuzzer entry: hostile bytecode through the agent-expression interpreter
// (backend/points/agent_expr.h) with a fake inferior. It must never crash, hang or allocate without
// bound, and its results must be self-consistent; a violation aborts.
//
// Input: byte 0 picks the limits, the rest is the bytecode. The fake inferior's memory is the
// input itself, mapped at 0x1000 (byte-granular: reads past it fail); registers 0..31 point
// into it, the others are unavailable; trace state variables 0..3 exist.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "backend/points/agent_expr.h"

using namespace backend::agent;

namespace {

void require(bool ok) {
  if (!ok) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t config = data[0];
  std::span<const uint8_t> code(data + 1, size - 1);
  std::span<const uint8_t> memory(data, size);
  constexpr uint64_t kBase = 0x1000;

  Limits limits;
  if (config & 1) limits.max_stack = 8;
  if (config & 2) limits.max_steps = 64;
  if (config & 4) limits.max_output = 32;
  if (config & 8) limits.max_string = 5;
  if (config & 16) limits.max_bytes = 16;

  int64_t tsvs[4] = {0, -1, 7, INT64_MIN};
  std::string output;
  size_t out_calls = 0;
  Context ctx;
  ctx.reg = [&](int regno) -> std::optional<uint64_t> {
    if (regno < 0 || regno >= 32) return std::nullopt;
    return kBase + static_cast<uint64_t>(regno) * 8;
  };
  ctx.read = [&](uint64_t addr, std::span<uint8_t> out) {
    if (addr < kBase || addr - kBase > memory.size() || memory.size() - (addr - kBase) < out.size()) return false;
    for (size_t i = 0; i < out.size(); ++i) out[i] = memory[addr - kBase + i];
    return true;
  };
  ctx.get_tsv = [&](int n) -> std::optional<int64_t> {
    if (n < 0 || n >= 4) return std::nullopt;
    return tsvs[n];
  };
  ctx.set_tsv = [&](int n, int64_t v) {
    if (n < 0 || n >= 4) return false;
    tsvs[n] = v;
    return true;
  };
  ctx.out = [&](std::string_view s) {
    output += s;
    ++out_calls;
  };
  if (config & 32) ctx.out = nullptr;
  if (config & 64) ctx.read = nullptr;

  Evaluation e = evaluate(code, ctx, limits);
  require((e.outcome == Outcome::Error) == (e.fault != Fault::None));
  require(e.value.has_value() == (e.outcome != Outcome::Error));
  require(e.error.empty() == (e.outcome != Outcome::Error));
  if (e.value) require(e.outcome == (*e.value != 0 ? Outcome::True : Outcome::False));
  require(e.steps <= limits.max_steps);
  require(output.size() <= limits.max_output);
  if (!code.empty() && code.size() <= limits.max_bytes) require(e.pc < code.size());
  if (!ctx.out) require(output.empty() && out_calls == 0);
  (void)fault_name(e.fault);

  // The condition rule, and the disassembler on the same bytes.
  std::vector<std::vector<uint8_t>> conds{std::vector<uint8_t>(code.begin(), code.end())};
  int64_t saved[4] = {tsvs[0], tsvs[1], tsvs[2], tsvs[3]};
  tsvs[0] = 0; tsvs[1] = -1; tsvs[2] = 7; tsvs[3] = INT64_MIN;  // the same start as above
  output.clear();
  require(conditions_hold(conds, ctx, limits) == (e.outcome != Outcome::False));
  require(tsvs[0] == saved[0] && tsvs[1] == saved[1] && tsvs[2] == saved[2] && tsvs[3] == saved[3]);
  std::string dis = disassemble(code);
  require(code.empty() == dis.empty());
  return 0;
}
