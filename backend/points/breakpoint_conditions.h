// Target-side breakpoint conditions and commands (issue 17): the agent-expression programs GDB
// sends with a Z0/Z1 (ConditionalBreakpoints+, BreakpointCommands+), kept per client code
// breakpoint, and the decision on each hit. Pure bookkeeping: the inferior is reached through
// the agent::Context the engine builds for the stopped thread; stepping over a breakpoint whose
// hit is not reported is the engine's business (LinuxProcess::pass_client_breakpoint).
//
// The rules, from gdbserver 13.1 (linux-low.cc wait_1's report_to_gdb, mem-break.cc):
// - several conditions at one address (several GDB breakpoints there) are ORed; none =
//   unconditional; a condition that fails to evaluate counts as true (agent::conditions_hold);
// - a Z at an address that already has a breakpoint of that kind replaces its programs, a z
//   forgets them;
// - a hit at a location with commands (dprintf-style agent) is never reported: GDB sends
//   commands only when every breakpoint at the address is a dprintf.
// One deliberate difference: commands run only at hits whose condition holds (GDB's own dprintf
// semantics); gdbserver runs them at every hit (docs/agent-expressions.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/points/agent_expr.h"

namespace backend {

struct BreakpointProgram {
  std::vector<std::vector<uint8_t>> conditions;  // agent expressions, any true -> the hit counts
  std::vector<std::vector<uint8_t>> commands;    // run in order at a hit that counts (printf)
  bool persist = false;                          // GDB's `cmds:1` (dprintf while disconnected)
  bool empty() const { return conditions.empty() && commands.empty(); }
};

struct HitVerdict {
  bool report = true;      // a stop for the client; false: pass the breakpoint and carry on
  bool commands_ran = false;
  std::string output;      // what the commands' printf ops printed
  std::string error;       // the first condition or command that failed to evaluate ("" if none)
};

class BreakpointConditions {
 public:
  // Replaces the programs of the code breakpoint at addr (hardware: Z1); empty erases them.
  void set(uint64_t addr, bool hardware, BreakpointProgram program);
  void erase(uint64_t addr, bool hardware) { table_.erase({addr, hardware}); }
  void clear() { table_.clear(); }
  // Whether a hit at addr needs evaluating at all (the common plain breakpoint does not).
  bool any_at(uint64_t addr) const {
    auto it = table_.lower_bound({addr, false});
    return it != table_.end() && it->first.first == addr;
  }
  const BreakpointProgram* find(uint64_t addr, bool hardware) const;
  size_t size() const { return table_.size(); }

  // One hit at addr of the thread `ctx` reads: evaluates the conditions of both kinds there,
  // runs the commands of each kind whose conditions hold (stopping at the first that fails, as
  // gdbserver does), and says whether the client is told. `ctx.out` is not used: output goes to
  // the verdict.
  HitVerdict hit(uint64_t addr, const agent::Context& ctx, const agent::Limits& limits = {}) const;

 private:
  std::map<std::pair<uint64_t, bool>, BreakpointProgram> table_;
};

}  // namespace backend
