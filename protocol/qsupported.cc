#include "protocol/qsupported.h"

#include <string_view>

#include "protocol/hex.h"

namespace protocol {

ClientFeatures parse_client_features(const QuerySupported& q) {
  ClientFeatures c;
  for (std::string_view f : q.features) {
    if (f.starts_with("xmlRegisters=")) {
      // A comma-separated list of architectures ("i386,arm,mips" from LLDB).
      std::string_view list = f.substr(13);
      size_t start = 0;
      while (start <= list.size()) {
        size_t comma = list.find(',', start);
        std::string_view arch = list.substr(start, comma == std::string_view::npos ? comma : comma - start);
        if (arch == "i386") c.xml_registers = true;
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
      continue;
    }
    if (f.empty() || f.back() != '+') continue;
    std::string_view name = f.substr(0, f.size() - 1);
    if (name == "multiprocess") c.multiprocess = true;
    else if (name == "swbreak") c.swbreak = true;
    else if (name == "hwbreak") c.hwbreak = true;
    else if (name == "fork-events") c.fork_events = true;
    else if (name == "vfork-events") c.vfork_events = true;
    else if (name == "exec-events") c.exec_events = true;
    else if (name == "vContSupported") c.vcont_supported = true;
    else if (name == "no-resumed") c.no_resumed = true;
    else if (name == "QThreadEvents") c.thread_events = true;
  }
  return c;
}

Dialect negotiate(const QuerySupported& q, const ServerFeatures& server) {
  ClientFeatures c = parse_client_features(q);
  Dialect d;
  d.multiprocess = c.multiprocess;
  d.swbreak = c.swbreak;
  d.hwbreak = c.hwbreak;
  d.fork_events = c.fork_events && server.fork_events;
  d.vfork_events = c.vfork_events && server.vfork_events;
  d.exec_events = c.exec_events && server.exec_events;
  d.vcont_supported = c.vcont_supported;
  d.no_resumed = c.no_resumed && server.no_resumed;
  d.xml_registers = c.xml_registers;
  return d;
}

Dialect negotiate(const QuerySupported& q) { return negotiate(q, ServerFeatures{}); }

namespace {

// One row per feature: the name as listed and when it is listed.
struct Row {
  std::string_view name;
  bool (*listed)(const ServerFeatures&, const Dialect&);
};

constexpr bool always(const ServerFeatures&, const Dialect&) { return true; }
constexpr bool bts(const ServerFeatures& s, const Dialect&) { return s.btrace; }
constexpr bool pt(const ServerFeatures& s, const Dialect&) { return s.btrace && s.btrace_pt; }

constexpr Row kRows[] = {
    {"QPassSignals+", always},
    {"QProgramSignals+", always},
    {"QStartupWithShell+", always},
    {"QEnvironmentHexEncoded+", always},
    {"QEnvironmentReset+", always},
    {"QEnvironmentUnset+", always},
    {"QSetWorkingDir+", always},
    {"QCatchSyscalls+", always},
    {"qXfer:libraries-svr4:read+", always},
    {"qXfer:auxv:read+", always},
    {"qXfer:siginfo:read+", always},
    {"qXfer:siginfo:write+", always},
    {"qXfer:osdata:read+", always},
    {"qXfer:features:read+", always},
    {"QStartNoAckMode+", always},
    {"multiprocess+", [](const ServerFeatures&, const Dialect& d) { return d.multiprocess; }},
    {"fork-events+", [](const ServerFeatures& s, const Dialect& d) { return s.fork_events && d.fork_events; }},
    {"vfork-events+", [](const ServerFeatures& s, const Dialect& d) { return s.vfork_events && d.vfork_events; }},
    {"exec-events+", [](const ServerFeatures& s, const Dialect& d) { return s.exec_events && d.exec_events; }},
    {"QNonStop+", [](const ServerFeatures& s, const Dialect&) { return s.non_stop; }},
    {"QDisableRandomization+", always},
    {"qXfer:threads:read+", always},
    {"qXfer:exec-file:read+", always},
    // LLDB reads stop signals as the platform's numbers; say that we send those (lldb-server does).
    {"native-signals+", [](const ServerFeatures&, const Dialect& d) { return d.lldb; }},
    {"Qbtrace:bts+", bts},
    {"Qbtrace-conf:bts:size+", bts},
    {"Qbtrace:pt+", pt},
    {"Qbtrace-conf:pt:size+", pt},
    {"Qbtrace:off+", bts},
    {"qXfer:btrace:read+", bts},
    {"qXfer:btrace-conf:read+", bts},
    {"swbreak+", [](const ServerFeatures&, const Dialect& d) { return d.swbreak; }},
    {"hwbreak+", [](const ServerFeatures&, const Dialect& d) { return d.hwbreak; }},
    {"vContSupported+", always},
    {"QThreadEvents+", always},
    {"no-resumed+", [](const ServerFeatures& s, const Dialect& d) { return s.no_resumed && d.no_resumed; }},
    {"stepbranch+", [](const ServerFeatures& s, const Dialect&) { return s.stepbranch; }},
};

}  // namespace

std::string format_qsupported(const ServerFeatures& server, const Dialect& dialect) {
  std::string out = "PacketSize=" + hex_u64(server.packet_size);
  for (const Row& row : kRows) {
    if (!row.listed(server, dialect)) continue;
    out += ';';
    out += row.name;
  }
  return out;
}

}  // namespace protocol
