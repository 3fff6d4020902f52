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

}  // namespace

Reply handle(Session& s, const InsertBreakpoint& z) {
  auto* p = s.process();
  if (!p) return error(1);
  if (auto r = p->insert_breakpoint(to_backend(z.type), z.addr, length_of(z.type, z.kind)); !r) {
    // Unsupported kind (read watchpoints on debug registers): GDB then uses an access
    // watchpoint and tells reads from writes by the value, as with gdbserver.
    if (r.error().code == EOPNOTSUPP) return empty();
    return error_reply(s, r.error());
  }
  return ok();
}

Reply handle(Session& s, const RemoveBreakpoint& z) {
  auto* p = s.process();
  if (!p) return error(1);
  if (auto r = p->remove_breakpoint(to_backend(z.type), z.addr, length_of(z.type, z.kind)); !r) {
    // A fork child's copies of the parent's int3s were taken out when it was forked; the
    // client removing them from the child finds them gone already.
    if (z.type == BreakpointType::Software && s.server().is_follower(p->pid())) return ok();
    return error_reply(s, r.error());
  }
  return ok();
}

}  // namespace server
