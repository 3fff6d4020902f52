// qXfer packets, and the objects the server can transfer (server/handlers/xfer.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/capabilities.h"
#include "protocol/packets/packet_list.h"

namespace protocol {

// qXfer:<object>:read:<annex>:<offset>,<length>
struct XferRead { std::string object; std::string annex; uint64_t offset = 0; uint64_t length = 0; };
// qXfer:<object>:write:<annex>:<offset>:<binary data>
struct XferWrite { std::string object; std::string annex; uint64_t offset = 0; std::vector<uint8_t> data; };

using XferPackets = PacketList<XferRead, XferWrite>;

// The qXfer objects the server knows, each with the capability it needs (the qSupported
// reply lists them from here).
struct XferObject {
  std::string_view name;
  bool writable = false;
  Capability needs = Capability::Base;
};
const std::vector<XferObject>& xfer_objects();

// Whether a qXfer of that object is served with these capabilities (a write also needs a
// writable object); parse_request answers any other as an unknown packet.
bool xfer_object_served(std::string_view object, bool write, const Capabilities& capabilities);

}  // namespace protocol
