// qXfer:<object>:read — each document is built when offset 0 is asked for, and later chunks
// are served from that snapshot (GDB reads 0x1000 bytes at a time).
// qXfer:<object>:write — only siginfo can be written (GDB's `set $_siginfo...`).
#include <algorithm>

#include "backend/host/osdata.h"
#include "protocol/target_xml.h"
#include "protocol/xml.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

std::string target_description(backend::Process& p) {
  std::vector<RegisterSpec> specs;
  for (const auto& r : p.register_layout().regs)
    specs.push_back(RegisterSpec{r.name, r.bitsize, r.type, r.group, r.feature, r.regnum});
  return target_xml(specs);
}

// The new threads of clone stops (QThreadOptions) whose parents have not run on since: as
// gdbserver, left out of the list until then (GDB adds such a thread when it follows the clone).
std::vector<pid_t> unfollowed_clones(backend::Process& p) {
  std::vector<pid_t> out;
  for (const auto& ev : p.stopped_threads())
    if (ev.kind == backend::StopKind::Clone) out.push_back(ev.child_pid);
  return out;
}

std::string threads_document(Session& s) {
  std::vector<ThreadEntry> threads;
  for (auto* p : s.server().processes()) {
    if (!p->alive()) continue;
    auto hidden = unfollowed_clones(*p);
    for (pid_t tid : p->threads())
      if (std::find(hidden.begin(), hidden.end(), tid) == hidden.end())
        threads.push_back(ThreadEntry{p->pid(), tid, p->thread_core(tid), p->thread_name(tid)});
  }
  return threads_xml(threads, s.dialect().multiprocess);
}

// Builds the whole document, or sets `error_out` to the reply to send instead.
std::optional<std::string> build_document(Session& s, const XferRead& x, Reply& error_out) {
  auto* p = s.process();
  if (x.object == "btrace") return btrace_document(s, x.annex, error_out);
  if (x.object == "btrace-conf") return btrace_conf_document(s, error_out);
  if (x.object == "traceframe-info") return traceframe_info_document(s, error_out);
  if (x.object == "osdata") {
    // System-wide, no process needed. An unknown type is an empty document (gdbserver).
    auto table = backend::read_osdata(x.annex);
    return table ? osdata_xml(table->type, table->items) : std::string();
  }
  if (!p) {
    error_out = no_process();
    return std::nullopt;
  }
  if (x.object == "features") {
    if (x.annex != "target.xml") {
      error_out = error_reply(ENOENT, "No such target description.");
      return std::nullopt;
    }
    return target_description(*p);
  }
  if (x.object == "auxv") {
    auto auxv = p->auxv();
    if (!auxv) { error_out = error_reply(auxv.error()); return std::nullopt; }
    return std::string(auxv->begin(), auxv->end());
  }
  if (x.object == "exec-file") {
    auto path = p->exe_path();
    if (!path) { error_out = error_reply(path.error()); return std::nullopt; }
    return *path;
  }
  if (x.object == "threads") return threads_document(s);
  if (x.object == "libraries-svr4") {
    uint64_t main_lm = 0;
    auto libs = p->libraries(&main_lm);
    // No DT_DEBUG: E01, so that GDB looks for the loader's r_debug itself (as with gdbserver).
    if (!libs) {
      error_out = error_reply(libs.error());
      return std::nullopt;
    }
    std::vector<LibraryEntry> entries;
    for (const auto& l : *libs) entries.push_back(LibraryEntry{l.name, l.lm, l.l_addr, l.l_ld, l.lmid});
    // LLDB 14/16 misread main-lm as the r_debug address and lose every library: omit it there.
    std::optional<uint64_t> lm;
    if (!s.dialect().lldb && main_lm) lm = main_lm;
    return libraries_svr4_xml(entries, lm);
  }
  if (x.object == "siginfo") {
    auto info = p->siginfo(s.general_thread());
    if (!info) { error_out = error_reply(info.error()); return std::nullopt; }
    return std::string(info->begin(), info->end());
  }
  error_out = reply::Unsupported{};
  return std::nullopt;
}

}  // namespace

Reply handle(Session& s, const XferRead& x) {
  std::string key = x.object + ":" + x.annex;
  std::string& snapshot = s.xfer_snapshot(key);
  // GDB reads one field of $_siginfo at its own offset, with no read at 0 before it: the
  // siginfo (small, changed by every stop and every write) is read afresh each time.
  if (x.offset == 0 || x.object == "siginfo") {
    Reply error_out;
    auto document = build_document(s, x, error_out);
    if (!document) {
      snapshot.clear();
      return error_out;
    }
    snapshot = std::move(*document);
  }
  return xfer_reply(snapshot, x.offset, x.length);
}

Reply handle(Session& s, const XferWrite& x) {
  if (x.object != "siginfo") return reply::Unsupported{};  // gdbserver: no other object is writable
  auto* p = s.process();
  pid_t tid = s.general_thread();
  if (!p || tid <= 0) return no_thread();
  auto info = p->siginfo(tid);
  if (!info) return error_reply(info.error());
  if (x.offset >= info->size()) return error_reply(EINVAL, "Past the end of the siginfo.");
  // What does not fit in the siginfo is dropped; the reply says how much was taken.
  size_t n = std::min<size_t>(x.data.size(), info->size() - x.offset);
  std::copy_n(x.data.begin(), n, info->begin() + static_cast<long>(x.offset));
  if (auto r = p->set_siginfo(tid, *info); !r) return error_reply(r.error());
  return reply::HexNumber{n};
}

}  // namespace server
