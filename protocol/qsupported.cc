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
        else if (!arch.empty()) c.xml_registers_other = true;
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
    else if (name == "no-resumed") c.no_resumed = true;
    else if (name == "QThreadEvents") c.thread_events = true;
    else if (name == "error-message") c.error_message = true;
  }
  return c;
}

Dialect negotiate(const QuerySupported& q, const Capabilities& server) {
  ClientFeatures c = parse_client_features(q);
  Dialect d;
  d.multiprocess = c.multiprocess;
  d.swbreak = c.swbreak;
  d.hwbreak = c.hwbreak;
  d.fork_events = c.fork_events && server.has(Capability::ForkEvents);
  d.vfork_events = c.vfork_events && server.has(Capability::VforkEvents);
  d.exec_events = c.exec_events && server.has(Capability::ExecEvents);
  d.no_resumed = c.no_resumed && server.has(Capability::NoResumed);
  d.error_message = c.error_message;
  // LLDB lists every architecture it can describe (i386,arm,mips,arc); GDB names only i386
  // (only i386-tdep registers an xmlRegisters name, even in a multi-target GDB). LLDB 21 offers
  // swbreak+ and hwbreak+ too (GDBRemoteCommunicationClient::GetRemoteQSupported), so they
  // cannot tell the two apart.
  d.lldb = c.xml_registers_other;
  return d;
}

Dialect negotiate(const QuerySupported& q) { return negotiate(q, Capabilities::all()); }

namespace {

// Listed when the server has the capability and the dialect agrees.
using Condition = bool (*)(const Dialect&);
constexpr bool always(const Dialect&) { return true; }
constexpr bool gdb_only(const Dialect& d) { return !d.lldb; }

struct Row {
  std::string_view name;
  Capability needs;
  Condition listed;
  std::string_view probe;  // a packet the feature promises to serve ("" when none applies)
};

static_assert(kSupportedThreadOptions == 3, "the QThreadOptions row lists the supported mask");

// Order as gdbserver's reply, roughly; qXfer objects come from the packet layer's table.
constexpr Row kRows[] = {
    {"QPassSignals+", Capability::Base, always, "QPassSignals:"},
    {"QProgramSignals+", Capability::Base, always, "QProgramSignals:"},
    {"QStartupWithShell+", Capability::Base, always, "QStartupWithShell:1"},
    {"QEnvironmentHexEncoded+", Capability::Base, always, "QEnvironmentHexEncoded:413d31"},
    {"QEnvironmentReset+", Capability::Base, always, "QEnvironmentReset"},
    {"QEnvironmentUnset+", Capability::Base, always, "QEnvironmentUnset:41"},
    {"QSetWorkingDir+", Capability::Base, always, "QSetWorkingDir:"},
    // `x` in GDB's format ('b' + data), as gdbserver 16.2+ lists it. Not to LLDB: LLDB 20+ would
    // then expect the 'b' too, LLDB 19 and older never would; lldb-server does not list it.
    {"binary-upload+", Capability::Base, [](const Dialect& d) { return !d.lldb; }, "x0,0"},
    {"QCatchSyscalls+", Capability::CatchSyscalls, always, "QCatchSyscalls:0"},
    {"QStartNoAckMode+", Capability::Base, always, ""},  // switches the session; probed apart
    {"multiprocess+", Capability::Base, [](const Dialect& d) { return d.multiprocess; }, ""},
    {"fork-events+", Capability::ForkEvents, [](const Dialect& d) { return d.fork_events; }, ""},
    {"vfork-events+", Capability::VforkEvents, [](const Dialect& d) { return d.vfork_events; }, ""},
    {"exec-events+", Capability::ExecEvents, [](const Dialect& d) { return d.exec_events; }, ""},
    {"QNonStop+", Capability::NonStop, always, "QNonStop:0"},
    {"QDisableRandomization+", Capability::Base, always, "QDisableRandomization:1"},
    // LLDB reads stop signals as the platform's numbers; say that we send those (lldb-server does).
    {"native-signals+", Capability::Base, [](const Dialect& d) { return d.lldb; }, ""},
    // Served with the Z0/Z1 packets (their ;X and ;cmds: parts): no packet of their own.
    {"ConditionalBreakpoints+", Capability::ConditionalBreakpoints, always, ""},
    {"BreakpointCommands+", Capability::BreakpointCommands, always, ""},
    {"Qbtrace:bts+", Capability::BtraceBts, always, "Qbtrace-conf:bts:size=0x10000"},
    {"Qbtrace-conf:bts:size+", Capability::BtraceBts, always, "Qbtrace-conf:bts:size=0x10000"},
    {"Qbtrace:pt+", Capability::BtracePt, always, "Qbtrace-conf:pt:size=0x4000"},
    {"Qbtrace-conf:pt:size+", Capability::BtracePt, always, "Qbtrace-conf:pt:size=0x4000"},
    // GDB 15+: set for the next Qbtrace:pt, which turns on what the PMU has (as gdbserver 16/17).
    {"Qbtrace-conf:pt:ptwrite+", Capability::BtracePt, always, "Qbtrace-conf:pt:ptwrite=\"no\""},
    {"Qbtrace-conf:pt:event-tracing+", Capability::BtracePt, always, "Qbtrace-conf:pt:event-tracing=\"no\""},
    {"Qbtrace:off+", Capability::BtraceBts, always, "Qbtrace:off"},
    {"swbreak+", Capability::Base, [](const Dialect& d) { return d.swbreak; }, ""},
    {"hwbreak+", Capability::Base, [](const Dialect& d) { return d.hwbreak; }, ""},
    {"vContSupported+", Capability::Base, always, "vCont?"},
    // gdbserver lists the options it supports whatever the client offered (GDB 15 offers
    // QThreadOptions+; older clients ignore the feature).
    {"QThreadOptions=3", Capability::ThreadOptions, always, "QThreadOptions;0"},
    {"QThreadEvents+", Capability::ThreadEvents, always, "QThreadEvents:0"},
    {"no-resumed+", Capability::NoResumed, [](const Dialect& d) { return d.no_resumed; }, ""},
    {"stepbranch+", Capability::StepBranch, always, "stepbranch:1"},
    // Tracepoints as gdbserver lists them (FastTracepoints+ only once fast ones are served).
    {"ConditionalTracepoints+", Capability::Tracepoints, gdb_only, "qTStatus"},
    {"TraceStateVariables+", Capability::Tracepoints, gdb_only, "qTfV"},
    {"TracepointSource+", Capability::Tracepoints, gdb_only, "QTDPsrc:1:0:at:0:0:"},
    {"DisconnectedTracing+", Capability::Tracepoints, gdb_only, "QTDisconnected:0"},
    {"InstallInTrace+", Capability::Tracepoints, gdb_only, "QTinit"},
    // ftrace on jump pads the server writes itself: no agent library, no qRelocInsn needed.
    {"FastTracepoints+", Capability::Tracepoints, gdb_only, "qTMinFTPILen"},
    {"EnableDisableTracepoints+", Capability::Tracepoints, gdb_only, "QTEnable:1:0"},
    {"QTBuffer:size+", Capability::Tracepoints, gdb_only, "QTBuffer:size:-1"},
    {"tracenz+", Capability::Tracepoints, gdb_only, ""},
    {"ReverseContinue+", Capability::Reverse, always, "bc"},
    {"ReverseStep+", Capability::Reverse, always, "bs"},
};

}  // namespace

std::vector<FeatureRow> feature_rows() {
  std::vector<FeatureRow> out;
  for (const Row& r : kRows) out.push_back(FeatureRow{r.name, r.needs, r.probe});
  return out;
}

std::string format_qsupported(const Capabilities& server, const Dialect& dialect) {
  std::string out = "PacketSize=" + hex_u64(kPacketSize);
  auto add = [&out](std::string_view name) {
    out += ';';
    out += name;
  };
  for (const Row& row : kRows)
    if (server.has(row.needs) && row.listed(dialect)) add(row.name);
  for (const XferObject& o : xfer_objects()) {
    if (!server.has(o.needs)) continue;
    add("qXfer:" + std::string(o.name) + ":read+");
    if (o.writable) add("qXfer:" + std::string(o.name) + ":write+");
  }
  return out;
}

}  // namespace protocol
