// qGetTLSAddr: where a thread-local variable of one thread lives, from libthread_db
// (backend/tls/thread_db.h). Replies as gdbserver's (server.cc): the address in hex; E01 with no
// process, for an unknown thread and for every libthread_db failure (GDB then prints "Remote
// target failed to process qGetTLSAddr request"); empty only when the library has no TLS calls.
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

// The process the thread id names; without a pid (no multiprocess), the one that has the thread.
backend::Process* process_of(Session& s, const ThreadId& id) {
  if (id.pid && *id.pid > 0) return s.server().process_for(*id.pid);
  if (auto* p = s.process(); p && p->has_thread(id.tid)) return p;
  for (auto* p : s.server().processes())
    if (p->has_thread(id.tid)) return p;
  return nullptr;
}

}  // namespace

Reply handle(Session& s, const GetTlsAddress& q) {
  if (q.thread.tid <= 0) return no_thread();
  backend::Process* p = process_of(s, q.thread);
  if (!p || !p->alive() || p->running() || !p->has_thread(q.thread.tid)) return no_thread();
  auto addr = s.server().thread_db().tls_address(*p, q.thread.tid, q.offset, q.lm);
  if (!addr) {
    s.server().log().event("qGetTLSAddr thread {} offset {:#x} lm {:#x}: {}", q.thread.tid, q.offset, q.lm,
                           addr.error().message);
    if (addr.error().code == ENOSYS) return reply::Unsupported{};
    return error_reply(addr.error());
  }
  return reply::HexNumber{*addr};
}

}  // namespace server
