// GDB's branch-trace packets: Qbtrace:*, Qbtrace-conf:*, qXfer:btrace(-conf):read documents.
// All of them act on the general (Hg) thread.
#include <cerrno>

#include "backend/host/cpu_id.h"
#include "protocol/btrace_xml.h"
#include "protocol/hex.h"
#include "server/handlers/handlers.h"
#include "server/server.h"

namespace server {

namespace {

std::optional<uint64_t> parse_size(const std::string& text) {
  std::string_view digits = text;
  if (digits.starts_with("0x") || digits.starts_with("0X")) digits.remove_prefix(2);
  return parse_hex_u64(digits);
}

}  // namespace

Reply handle(Session& s, const BtraceEnable& b) {
  auto* p = s.process();
  pid_t tid = s.general_thread();
  if (!p || tid <= 0) return no_thread();
  auto& tracer = p->tracer();
  if (b.format == "off") {
    if (!tracer.enabled(tid)) return error_reply(ENOENT, "Branch tracing not enabled.");
    if (auto r = tracer.disable(tid); !r) return error_reply(r.error().code, "Could not disable branch tracing.");
    p->recording_stopped(tid);
    return reply::Ok{};
  }
  if (b.format != "bts" && b.format != "pt") return error_reply(EINVAL, "Bad Qbtrace operation.  Use bts, pt, or off.");
  // A second enable is refused by the tracer ("Btrace already enabled."), which adopts instead
  // a thread recorded since its creation as a recorded thread's clone (GDB enables each new
  // thread when it learns of it).
  // PT where it can be recorded (the tracer says why not elsewhere; GDB's plain `record btrace`
  // then tries BTS, which branchstub provides on every x86-64 machine).
  auto format = b.format == "pt" ? backend::TraceFormat::Pt : backend::TraceFormat::Bts;
  if (auto r = tracer.enable(tid, format); !r) return error_reply(r.error());
  return reply::Ok{};
}

namespace {

// Qbtrace-conf:pt:ptwrite="yes" and pt:event-tracing="yes" (GDB 15+; gdbserver matches the
// value's start only). Set for the next Qbtrace:pt, which then turns on what the PMU has.
Reply pt_option(Session& s, const BtraceConf& c) {
  bool ptwrite = c.key == "ptwrite";
  bool on = c.value.starts_with("\"yes\"");
  if (!on && !c.value.starts_with("\"no\""))
    return error_reply(EINVAL, ptwrite ? "Bad ptwrite value." : "Bad event-tracing value.");
  if (auto* p = s.process()) {
    // One setting for the process's next PT enables, as gdbserver's: the other option stays.
    backend::PtOptions options = p->tracer().requested_pt_options();
    (ptwrite ? options.ptwrite : options.event_tracing) = on;
    p->tracer().set_pt_options(options);
  }
  return reply::Ok{};
}

}  // namespace

Reply handle(Session& s, const BtraceConf& c) {
  if (c.format == "pt" && (c.key == "ptwrite" || c.key == "event-tracing")) return pt_option(s, c);
  if (c.key != "size" || (c.format != "bts" && c.format != "pt"))
    return error_reply(EINVAL, "Bad Qbtrace configuration option.");
  auto size = parse_size(c.value);
  if (!size) return error_reply(EINVAL, "Bad size value.");
  if (auto* p = s.process())
    p->tracer().set_buffer_size(*size, c.format == "pt" ? backend::TraceFormat::Pt : backend::TraceFormat::Bts);
  return reply::Ok{};
}

std::optional<std::string> btrace_document(Session& s, const std::string& annex, Reply& error_out) {
  auto* p = s.process();
  pid_t tid = s.general_thread();
  if (!p || tid <= 0) {
    error_out = no_thread();
    return std::nullopt;
  }
  auto& tracer = p->tracer();
  if (!tracer.enabled(tid)) {
    error_out = error_reply(ENOENT, "Btrace not enabled.");
    return std::nullopt;
  }
  backend::TraceRead kind;
  if (annex == "all") kind = backend::TraceRead::All;
  else if (annex == "new") kind = backend::TraceRead::New;
  else if (annex == "delta") kind = backend::TraceRead::Delta;
  else {
    error_out = error_reply(EINVAL, "Bad annex.");
    return std::nullopt;
  }
  if (tracer.format(tid) == backend::TraceFormat::Pt) {
    auto pt = tracer.read_pt(tid, kind);
    if (!pt) {
      // gdbserver: every read error but an overflow is "Generic Error." (PT has no delta)
      error_out = error_reply(pt.error().code, pt.error().code == EOVERFLOW ? "Overflow." : "Generic Error.");
      return std::nullopt;
    }
    // A stream we wrote has no CPU's errata: no <cpu>, so that libipt applies no workaround.
    backend::CpuId cpu = pt->synthesized ? backend::CpuId{} : backend::read_cpu_id();
    return btrace_pt_xml(BtracePtCpu{cpu.vendor, cpu.family, cpu.model, cpu.stepping}, pt->raw);
  }
  auto blocks = tracer.read(tid, kind);
  if (!blocks) {
    error_out = error_reply(blocks.error().code, blocks.error().code == EOVERFLOW ? "Overflow." : blocks.error().message);
    return std::nullopt;
  }
  std::vector<BtraceBlockSpec> specs;
  specs.reserve(blocks->size());
  for (const auto& b : *blocks) specs.push_back(BtraceBlockSpec{b.begin, b.end});
  return btrace_xml(specs);
}

std::optional<std::string> btrace_conf_document(Session& s, Reply& error_out) {
  auto* p = s.process();
  pid_t tid = s.general_thread();
  if (!p || tid <= 0 || !p->tracer().enabled(tid)) {
    error_out = error_reply(ENOENT, "Btrace not enabled.");
    return std::nullopt;
  }
  uint64_t size = p->tracer().buffer_size(tid);
  if (p->tracer().format(tid) == backend::TraceFormat::Pt) {
    backend::PtOptions on = p->tracer().pt_options(tid);
    return btrace_conf_xml(std::nullopt, size, BtracePtOptions{on.ptwrite, on.event_tracing});
  }
  return btrace_conf_xml(size, std::nullopt);
}

}  // namespace server
