// Parser and table row of the qXfer packets, and the objects they can name.
#include "protocol/packets/xfer.h"

#include <algorithm>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

// qXfer:<object>:read:<annex>:<offset>,<length>
// qXfer:<object>:write:<annex>:<offset>:<data>  (data is binary: it may hold ':' itself, so
// the annex of a write cannot, as in gdbserver's decode_xfer)
Request p_xfer(string_view args) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return malformed("qXfer: missing object");
  string_view object = args.substr(0, colon);
  string_view rest = args.substr(colon + 1);
  if (starts_with(rest, "write:")) {
    rest.remove_prefix(6);
    auto annex_end = rest.find(':');
    if (annex_end == string_view::npos) return malformed("qXfer: missing offset");
    string_view after_annex = rest.substr(annex_end + 1);
    auto offset_end = after_annex.find(':');
    if (offset_end == string_view::npos) return malformed("qXfer: missing data");
    auto offset = parse_hex_u64(after_annex.substr(0, offset_end));
    if (!offset) return malformed("qXfer: bad offset");
    string_view data = after_annex.substr(offset_end + 1);
    return XferWrite{std::string(object), std::string(rest.substr(0, annex_end)), *offset,
                     std::vector<uint8_t>(data.begin(), data.end())};
  }
  if (!starts_with(rest, "read:")) return Unknown{"qXfer:" + std::string(args)};
  rest.remove_prefix(5);
  auto last = rest.rfind(':');
  if (last == string_view::npos) return malformed("qXfer: missing offset");
  auto al = addr_len(rest.substr(last + 1));
  if (!al) return malformed("qXfer: bad offset,length");
  return XferRead{std::string(object), std::string(rest.substr(0, last)), al->first, al->second};
}

constexpr PacketRow kRows[] = {
    {"qXfer:", false, p_xfer},
};

}  // namespace

std::span<const PacketRow> xfer_rows() { return kRows; }

const std::vector<XferObject>& xfer_objects() {
  static const std::vector<XferObject> objects = {
      {"features", false, Capability::Base},       {"auxv", false, Capability::Base},
      {"libraries-svr4", false, Capability::Base}, {"siginfo", true, Capability::Base},
      {"threads", false, Capability::Base},        {"exec-file", false, Capability::Base},
      {"osdata", false, Capability::Base},         {"btrace", false, Capability::BtraceBts},
      {"btrace-conf", false, Capability::BtraceBts},
      {"traceframe-info", false, Capability::Tracepoints},
  };
  return objects;
}

bool xfer_object_served(std::string_view object, bool write, const Capabilities& capabilities) {
  const auto& objects = xfer_objects();
  auto it = std::find_if(objects.begin(), objects.end(), [&](const XferObject& o) { return o.name == object; });
  return it != objects.end() && capabilities.has(it->needs) && (!write || it->writable);
}

}  // namespace protocol
