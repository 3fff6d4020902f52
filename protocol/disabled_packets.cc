#include "protocol/disabled_packets.h"

namespace protocol {

std::optional<DisabledPackets> parse_disabled_packets(std::string_view list, std::string* bad) {
  DisabledPackets d;
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view word = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (word.empty()) continue;
    if (word == "vCont") d.vcont = true;
    else if (word == "Tthread") d.t_thread = true;
    else if (word == "qC") d.qc = true;
    else if (word == "qfThreadInfo") d.qf_thread_info = true;
    else if (word == "T") d.t_stop = true;
    else if (word == "threads") d.vcont = d.t_thread = d.qc = d.qf_thread_info = true;
    else {
      if (bad) *bad = std::string(word);
      return std::nullopt;
    }
  }
  return d;
}

std::string disableable_packets_text() {
  return "Disableable packets:\n"
         "  vCont       \tAll vCont packets\n"
         "  qC          \tQuerying the current thread\n"
         "  qfThreadInfo\tThread listing\n"
         "  Tthread     \tPassing the thread specifier in the T stop reply packet\n"
         "  threads     \tAll of the above\n"
         "  T           \tAll 'T' packets\n";
}

bool is_disabled(const Request& request, const DisabledPackets& d) {
  if (d.vcont && (std::holds_alternative<VContQuery>(request) || std::holds_alternative<VCont>(request) ||
                  std::holds_alternative<VCtrlC>(request)))
    return true;
  // A vCont with bad arguments is not ours to judge either: gdbserver does not look at it.
  if (const auto* bad = std::get_if<Malformed>(&request); d.vcont && bad && bad->what.starts_with("vCont"))
    return true;
  if (d.qc && std::holds_alternative<QueryCurrentThread>(request)) return true;
  if (d.qf_thread_info &&
      (std::holds_alternative<ThreadInfoFirst>(request) || std::holds_alternative<ThreadInfoNext>(request)))
    return true;
  return false;
}

}  // namespace protocol
