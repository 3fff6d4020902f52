#include "backend/points/breakpoint_conditions.h"


namespace backend {

void BreakpointConditions::set(uint64_t addr, bool hardware, BreakpointProgram program) {
  if (program.empty()) {
    erase(addr, hardware);
    return;
  }
  table_[{addr, hardware}] = std::move(program);
}

const BreakpointProgram* BreakpointConditions::find(uint64_t addr, bool hardware) const {
  auto it = table_.find({addr, hardware});
  return it == table_.end() ? nullptr : &it->second;
}

HitVerdict BreakpointConditions::hit(uint64_t addr, const agent::Context& ctx, const agent::Limits& limits) const {
  HitVerdict v;
  const BreakpointProgram* programs[] = {find(addr, false), find(addr, true)};
  if (!programs[0] && !programs[1]) return v;  // plain breakpoint (or none): reported

  agent::Context run = ctx;
  run.out = [&v](std::string_view text) { v.output += text; };
  bool counts = false, has_commands = false;
  for (const BreakpointProgram* p : programs) {
    if (!p) continue;
    has_commands = has_commands || !p->commands.empty();
    // As agent::conditions_hold (newest first, the first true or failing one decides), keeping
    // the failure's text for the debug log.
    bool holds = p->conditions.empty();
    for (size_t i = p->conditions.size(); i-- > 0 && !holds;) {
      agent::Evaluation e = agent::evaluate(p->conditions[i], ctx, limits);
      if (e.outcome == agent::Outcome::False) continue;
      holds = true;
      if (e.outcome == agent::Outcome::Error && v.error.empty()) v.error = "condition: " + e.error;
    }
    if (!holds) continue;
    counts = true;
    for (const auto& command : p->commands) {
      v.commands_ran = true;
      agent::Evaluation e = agent::evaluate(command, run, limits);
      if (agent::command_ok(e)) continue;
      if (v.error.empty()) v.error = "command: " + e.error;
      break;  // "stop digging the hole deeper" (gdbserver)
    }
  }
  v.report = counts && !has_commands;
  return v;
}

}  // namespace backend
