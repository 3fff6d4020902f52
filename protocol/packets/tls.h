// Thread-local storage packets (server/handlers/tls.cc answers them).
#pragma once

#include <cstdint>

#include "protocol/packets/packet_list.h"
#include "protocol/thread_id.h"

namespace protocol {

// qGetTLSAddr:<thread>,<offset>,<lm>: address of a thread-local variable (lm: link_map, 0 = static)
struct GetTlsAddress { ThreadId thread; uint64_t offset = 0; uint64_t lm = 0; };

using TlsPackets = PacketList<GetTlsAddress>;

}  // namespace protocol
