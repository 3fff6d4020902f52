// Breakpoint and watchpoint packets: Z and z (server/handlers/breakpoints.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "protocol/packets/packet_list.h"

namespace protocol {

enum class BreakpointType { Software = 0, Hardware = 1, WriteWatch = 2, ReadWatch = 3, AccessWatch = 4 };
// Z<type>,<addr>,<kind>[;X<len>,<hex>[X<len>,<hex>...]][;cmds:<persist>,X<len>,<hex>...]:
// GDB's target-side conditions (any true -> report) and agent-style dprintf commands, as
// agent-expression bytecode (GDB remote.c remote_add_target_side_condition/_commands).
struct InsertBreakpoint {
  struct Commands {
    bool persist = false;  // keep running them while GDB is disconnected
    std::vector<std::vector<uint8_t>> bytecodes;
  };
  BreakpointType type{};
  uint64_t addr = 0;
  uint64_t kind = 1;
  std::vector<std::vector<uint8_t>> conditions;
  std::optional<Commands> commands;

  // The plain {type, addr, kind} form stays valid (and free of missing-initializer warnings).
  InsertBreakpoint() = default;
  InsertBreakpoint(BreakpointType t, uint64_t a, uint64_t k) : type(t), addr(a), kind(k) {}
};
struct RemoveBreakpoint { BreakpointType type{}; uint64_t addr = 0; uint64_t kind = 1; };  // z

using BreakpointsPackets = PacketList<InsertBreakpoint, RemoveBreakpoint>;

}  // namespace protocol
