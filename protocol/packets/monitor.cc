// Parser and table row of the monitor command packet.
#include "protocol/packets/monitor.h"

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

Request p_rcmd(string_view args) {
  auto text = from_hex_string(args);
  if (!text) return malformed("qRcmd: bad hex");
  return Monitor{std::move(*text)};
}

constexpr PacketRow kRows[] = {
    {"qRcmd,", false, p_rcmd},
};

}  // namespace

std::span<const PacketRow> monitor_rows() { return kRows; }

}  // namespace protocol
