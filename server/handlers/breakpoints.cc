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

// `monitor set debug-hw-points 1`: each hardware breakpoint/watchpoint request and its outcome.
void log_hw_point(Session& s, char op, const InsertBreakpoint& z, const backend::Result<void>& r) {
  if (z.type == BreakpointType::Software) return;
  s.server().log().hw_point("{}{} addr={:#x} len={}: {}", op, static_cast<int>(z.type), z.addr, z.kind,
                            r ? std::string("OK") : r.error().message);
}

}  // namespace

Reply handle(Session& s, const InsertBreakpoint& z) {
  auto* p = s.process();
  if (!p) return error(1);
  auto r = p->insert_breakpoint(to_backend(z.type), z.addr, length_of(z.type, z.kind));
  log_hw_point(s, 'Z', z, r);
  if (!r) return error_reply(s, r.error());
  return ok();
}

Reply handle(Session& s, const RemoveBreakpoint& z) {
  auto* p = s.process();
  if (!p) return error(1);
  auto r = p->remove_breakpoint(to_backend(z.type), z.addr, length_of(z.type, z.kind));
  log_hw_point(s, 'z', InsertBreakpoint{z.type, z.addr, z.kind}, r);
  if (!r) {
    // A fork child's copies of the parent's int3s were taken out when it was forked; the
    // client removing them from the child finds them gone already.
    if (z.type == BreakpointType::Software && s.server().is_follower(p->pid())) return ok();
    return error_reply(s, r.error());
  }
  return ok();
}

}  // namespace server
