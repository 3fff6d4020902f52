// A family's request types, listed next to their structs; request.h joins every family's
// list into the Request variant, so a new packet is added in its family's header alone.
#pragma once

namespace protocol {

template <typename... Requests>
struct PacketList {};

}  // namespace protocol
