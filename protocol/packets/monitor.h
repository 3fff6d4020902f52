// The monitor command packet (server/handlers/monitor.cc answers it).
#pragma once

#include <string>

#include "protocol/packets/packet_list.h"

namespace protocol {

struct Monitor { std::string command; };                          // qRcmd,hex

using MonitorPackets = PacketList<Monitor>;

}  // namespace protocol
