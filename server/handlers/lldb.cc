// Packets only LLDB sends. Each one also tells us the client is LLDB (see Session::note_lldb).
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include "backend/points/debug_registers.h"
#include "backend/ptrace/proc_info.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

constexpr const char* kTriple = "x86_64-pc-linux-gnu";

}  // namespace

Reply handle(Session& s, const HostInfo&) {
  s.note_lldb();
  utsname u{};
  ::uname(&u);
  return reply::HostInfo{.triple = kTriple, .os_version = u.release, .hostname = u.nodename};
}

Reply handle(Session& s, const ProcessInfo&) {
  s.note_lldb();
  auto* p = s.process();
  if (!p) return no_process();
  auto ids = backend::read_process_ids(p->pid());
  return reply::ProcessInfo{.pid = p->pid(),
                            .parent_pid = ids.ppid,
                            .real_uid = ids.real_uid,
                            .real_gid = ids.real_gid,
                            .effective_uid = ids.effective_uid,
                            .effective_gid = ids.effective_gid,
                            .triple = kTriple};
}

Reply handle(Session& s, const MemoryRegionInfo& m) {
  s.note_lldb();
  auto* p = s.process();
  if (!p) return no_process();
  auto regions = p->memory_map();
  if (!regions) return error_reply(regions.error());
  uint64_t next_start = 0;
  for (const auto& r : *regions) {
    if (m.addr >= r.start && m.addr < r.end) {
      std::string perms;
      if (r.read) perms += 'r';
      if (r.write) perms += 'w';
      if (r.exec) perms += 'x';
      return reply::MemoryRegion{r.start, r.end - r.start, perms, r.name};
    }
    if (r.start > m.addr && (next_start == 0 || r.start < next_start)) next_start = r.start;
  }
  // Unmapped: report the hole up to the next mapping, with no permissions.
  uint64_t end = next_start ? next_start : ~uint64_t{0};
  return reply::MemoryRegion{m.addr, end - m.addr, "", ""};
}

Reply handle(Session& s, const ThreadSuffixSupported&) {
  s.note_lldb();
  return reply::Ok{};
}

Reply handle(Session& s, const ListThreadsInStopReply&) {
  s.note_lldb();
  s.dialect().list_threads_in_stop = true;
  return reply::Ok{};
}

// The stop of `tid` for LLDB: the event for the event thread, a plain stop for the others.
static backend::StopEvent stop_of_thread(Session& s, backend::Process& p, pid_t tid) {
  const auto& last = s.server().last_event();
  if (last && last->tid == tid) return *last;
  backend::StopEvent quiet;  // a thread that was merely stopped along with the event thread
  quiet.kind = backend::StopKind::Signal;
  quiet.pid = p.pid();
  quiet.tid = tid;
  quiet.signo = 0;
  return quiet;
}

Reply handle(Session& s, const ThreadsInfo&) {
  s.note_lldb();
  auto* p = s.process();
  if (!p) return no_process();
  reply::ThreadsInfo info;
  for (pid_t tid : p->threads()) info.threads.push_back(s.describe_stop(stop_of_thread(s, *p, tid)));
  return info;
}

Reply handle(Session& s, const EnableErrorStrings&) {
  s.note_lldb();
  s.dialect().error_strings = true;
  return reply::Ok{};
}

Reply handle(Session& s, const WatchpointSupportInfo&) {
  s.note_lldb();
  auto* p = s.process();
  return reply::WatchpointSlots{p ? p->hardware_slots() : backend::DebugRegisters::kSlots};
}

Reply handle(Session& s, const ThreadStopInfo& t) {
  s.note_lldb();
  auto* p = s.process();
  if (!p || !p->has_thread(t.tid)) return no_thread();
  return s.stop_reply_for(stop_of_thread(s, *p, t.tid));
}

Reply handle(Session& s, const RegisterInfo&) {
  s.note_lldb();
  return reply::Unsupported{};  // registers come from target.xml
}

}  // namespace server
