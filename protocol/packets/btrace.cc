// Parsers and table rows of GDB's branch trace packets.
#include "protocol/packets/btrace.h"

#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using std::string_view;

Request p_btrace(string_view args) { return BtraceEnable{std::string(args)}; }

// Qbtrace-conf:<format>:<key>=<value>; the server validates the names and the value.
Request p_btrace_conf(string_view args) {
  BtraceConf c;
  auto colon = args.find(':');
  c.format = std::string(args.substr(0, colon));
  if (colon != string_view::npos) {
    string_view kv = args.substr(colon + 1);
    auto eq = kv.find('=');
    c.key = std::string(kv.substr(0, eq));
    if (eq != string_view::npos) c.value = std::string(kv.substr(eq + 1));
  }
  return c;
}

constexpr PacketRow kRows[] = {
    {"Qbtrace-conf:", false, p_btrace_conf, Capability::BtraceBts},
    {"Qbtrace:", false, p_btrace, Capability::BtraceBts},
};

}  // namespace

std::span<const PacketRow> btrace_rows() { return kRows; }

}  // namespace protocol
