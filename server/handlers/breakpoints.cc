// Z0-Z4 / z0-z4: software and hardware breakpoints, write/read/access watchpoints.
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

backend::BreakpointKind to_backend(BreakpointType type) {
  switch (type) {
    case BreakpointType::Software: return backend::BreakpointKind::Software;
    case BreakpointType::Hardware: return backend::BreakpointKind::Hardware;
    case BreakpointType::WriteWatch: return backend::BreakpointKind::WriteWatch;
    case BreakpointType::ReadWatch: return backend::BreakpointKind::ReadWatch;
    case BreakpointType::AccessWatch: return backend::BreakpointKind::AccessWatch;
  }
  return backend::BreakpointKind::Software;
}

// For breakpoints GDB's "kind" is the instruction size; for watchpoints it is the length.
uint64_t length_of(BreakpointType type, uint64_t kind) {
  return type == BreakpointType::Software || type == BreakpointType::Hardware ? 1 : kind;
}

// `monitor set debug-hw-points 1`: each hardware breakpoint/watchpoint request and its outcome
// (worded like gdbserver's lines).
void log_hw_point(Session& s, bool insert, const InsertBreakpoint& z, const backend::Result<void>& r) {
  const char* type = "hw-breakpoint";
  switch (z.type) {
    case BreakpointType::Software: return;
    case BreakpointType::Hardware: break;
    case BreakpointType::WriteWatch: type = "data-write"; break;
    case BreakpointType::ReadWatch: type = "data-read"; break;
    case BreakpointType::AccessWatch: type = "data-read-write"; break;
  }
  s.server().log().hw_point("{}_{} (addr={:016x}, len={}, type={}): {}", insert ? "insert" : "remove",
                            z.type == BreakpointType::Hardware ? "breakpoint" : "watchpoint", z.addr, z.kind,
                            type, r ? std::string("OK") : r.error().message);
}

}  // namespace

Reply handle(Session& s, const InsertBreakpoint& z) {
  auto* p = s.process();
  if (!p) return no_process();
  auto kind = to_backend(z.type);
  bool code = z.type == BreakpointType::Software || z.type == BreakpointType::Hardware;
  bool program = code && (!z.conditions.empty() || z.commands);
  if (program && !s.server().capabilities().has(Capability::ConditionalBreakpoints))
    return reply::Unsupported{};  // not advertised: GDB evaluates on its side
  if (z.commands && !s.server().capabilities().has(Capability::BreakpointCommands)) return reply::Unsupported{};
  // GDB re-sends a Z for a breakpoint it keeps inserted when its conditions change: the same
  // breakpoint with the new conditions (gdbserver keeps one breakpoint per address and kind).
  // LLDB's Z0s are counted, as lldb-server does.
  bool again = code && !s.dialect().lldb && p->has_client_breakpoint(kind, z.addr);
  if (!again) {
    auto r = p->insert_breakpoint(kind, z.addr, length_of(z.type, z.kind));
    log_hw_point(s, true, z, r);
    // Unsupported kind (read watchpoints on debug registers): GDB then uses an access
    // watchpoint and tells reads from writes by the value, as with gdbserver.
    if (!r && r.error().code == EOPNOTSUPP) return reply::Unsupported{};
    if (!r) return error_reply(r.error());
  }
  if (program || again) {
    backend::BreakpointProgram prog;
    prog.conditions = z.conditions;
    if (z.commands) {
      prog.commands = z.commands->bytecodes;
      prog.persist = z.commands->persist;
    }
    if (auto r = p->set_breakpoint_program(kind, z.addr, std::move(prog)); !r) {
      if (!again) (void)p->remove_breakpoint(kind, z.addr, length_of(z.type, z.kind));
      return error_reply(r.error());
    }
  }
  return reply::Ok{};
}

Reply handle(Session& s, const RemoveBreakpoint& z) {
  auto* p = s.process();
  if (!p) return no_process();
  auto r = p->remove_breakpoint(to_backend(z.type), z.addr, length_of(z.type, z.kind));
  log_hw_point(s, false, InsertBreakpoint{z.type, z.addr, z.kind}, r);
  if (!r) {
    // A fork child's copies of the parent's int3s were taken out when it was forked; the
    // client removing them from the child finds them gone already.
    if (z.type == BreakpointType::Software && s.server().process_table().is_fork_child(p->pid())) return reply::Ok{};
    return error_reply(r.error());
  }
  return reply::Ok{};
}

}  // namespace server
