// The packet table (every family's rows, joined) and parse_request.
#include "protocol/packets.h"

#include <vector>

#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {

std::span<const PacketRow> packet_table() {
  // The first row that matches wins. The one-letter commands (H, g, c, Z...) are tried after
  // every longer name, so that a name sharing their first letter is not read as one of them
  // ("stepbranch" is not "s" with the argument "tepbranch"); otherwise the families' rows keep
  // their own order, in this order of families.
  static const std::vector<PacketRow> table = [] {
    const std::span<const PacketRow> families[] = {
        general_rows(),     monitor_rows(), tls_rows(),     registers_memory_rows(), execution_rows(),
        breakpoints_rows(), xfer_rows(),    host_io_rows(), btrace_rows(),           lldb_rows(),
        tracepoints_rows(),
    };
    auto one_letter = [](const PacketRow& row) {
      char c = row.name.empty() ? '\0' : row.name[0];
      return row.name.size() == 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
    };
    std::vector<PacketRow> rows;
    for (bool letters : {false, true})
      for (std::span<const PacketRow> family : families)
        for (const PacketRow& row : family)
          if (one_letter(row) == letters) rows.push_back(row);
    return rows;
  }();
  return table;
}

Request parse_request(std::string_view payload, const Capabilities& capabilities) {
  for (const PacketRow& e : packet_table()) {
    if (!(e.exact ? payload == e.name : packet_args::starts_with(payload, e.name))) continue;
    if (!capabilities.has(e.needs)) return Unknown{std::string(payload)};
    Request r = e.parse(payload.substr(e.name.size()));
    // A qXfer object is served only with its capability, and written only where writable.
    if (auto* x = std::get_if<XferRead>(&r); x && !xfer_object_served(x->object, false, capabilities))
      return Unknown{std::string(payload)};
    if (auto* x = std::get_if<XferWrite>(&r); x && !xfer_object_served(x->object, true, capabilities))
      return Unknown{std::string(payload)};
    return r;
  }
  return Unknown{std::string(payload)};
}

Request parse_request(std::string_view payload) { return parse_request(payload, Capabilities::all()); }

}  // namespace protocol
