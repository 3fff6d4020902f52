// Packets only LLDB sends. Each one also tells us the client is LLDB (see Session::note_lldb).
#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>

#include "protocol/hex.h"
#include "backend/points/debug_registers.h"
#include "backend/ptrace/proc_info.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

constexpr const char* kTriple = "x86_64-pc-linux-gnu";

// "Key:\tvalue..." fields of /proc/PID/status (PPid, Uid, Gid): first number of the field.
std::string region_reply(uint64_t start, uint64_t size, const std::string& permissions, const std::string& name) {
  std::string out = fmt::format("start:{:x};size:{:x};", start, size);
  if (!permissions.empty()) out += "permissions:" + permissions + ";";
  if (!name.empty()) out += "name:" + to_hex(name) + ";";
  return out;
}

}  // namespace

Reply handle(Session& s, const HostInfo&) {
  s.note_lldb();
  utsname u{};
  ::uname(&u);
  return fmt::format("triple:{};ptrsize:8;endian:little;ostype:linux;vendor:pc;os_version:{};hostname:{};"
                     "watchpoint_exceptions_received:after;",
                     to_hex(std::string_view(kTriple)), u.release, to_hex(std::string_view(u.nodename)));
}

Reply handle(Session& s, const ProcessInfo&) {
  s.note_lldb();
  auto* p = s.process();
  if (!p) return no_process(s);
  auto ids = backend::read_process_ids(p->pid());
  return fmt::format("pid:{:x};parent-pid:{:x};real-uid:{:x};real-gid:{:x};effective-uid:{:x};effective-gid:{:x};"
                     "triple:{};ostype:linux;endian:little;ptrsize:8;",
                     p->pid(), ids.ppid, ids.real_uid, ids.real_gid, ids.effective_uid, ids.effective_gid,
                     to_hex(std::string_view(kTriple)));
}

Reply handle(Session& s, const MemoryRegionInfo& m) {
  s.note_lldb();
  auto* p = s.process();
  if (!p) return no_process(s);
  auto regions = p->memory_map();
  if (!regions) return error_reply(s, regions.error());
  uint64_t next_start = 0;
  for (const auto& r : *regions) {
    if (m.addr >= r.start && m.addr < r.end) {
      std::string perms;
      if (r.read) perms += 'r';
      if (r.write) perms += 'w';
      if (r.exec) perms += 'x';
      return region_reply(r.start, r.end - r.start, perms, r.name);
    }
    if (r.start > m.addr && (next_start == 0 || r.start < next_start)) next_start = r.start;
  }
  // Unmapped: report the hole up to the next mapping, with no permissions.
  uint64_t end = next_start ? next_start : ~uint64_t{0};
  return region_reply(m.addr, end - m.addr, "", "");
}

Reply handle(Session& s, const ThreadSuffixSupported&) {
  s.note_lldb();
  return ok();
}

Reply handle(Session& s, const ListThreadsInStopReply&) {
  s.note_lldb();
  s.dialect().list_threads_in_stop = true;
  return ok();
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
  if (!p) return no_process(s);
  std::vector<StopReply> threads;
  for (pid_t tid : p->threads()) threads.push_back(s.describe_stop(stop_of_thread(s, *p, tid)));
  return escape_binary(threads_info_json(threads));
}

Reply handle(Session& s, const EnableErrorStrings&) {
  s.note_lldb();
  s.dialect().error_strings = true;
  return ok();
}

Reply handle(Session& s, const WatchpointSupportInfo&) {
  s.note_lldb();
  auto* p = s.process();
  return fmt::format("num:{};", p ? p->hardware_slots() : backend::DebugRegisters::kSlots);
}

Reply handle(Session& s, const ThreadStopInfo& t) {
  s.note_lldb();
  auto* p = s.process();
  if (!p || !p->has_thread(t.tid)) return no_thread(s);
  return s.stop_reply_for(stop_of_thread(s, *p, t.tid));
}

Reply handle(Session& s, const RegisterInfo&) {
  s.note_lldb();
  return empty();  // registers come from target.xml
}

}  // namespace server
