// GDB's branch trace packets (server/handlers/btrace.cc); the trace itself is read with
// qXfer:btrace (xfer.h).
#pragma once

#include <string>

#include "protocol/packets/packet_list.h"

namespace protocol {

struct BtraceEnable { std::string format; };          // Qbtrace:bts|pt|off (format "off" = disable)
struct BtraceConf { std::string format; std::string key; std::string value; };  // Qbtrace-conf:bts:size=0x..

using BtracePackets = PacketList<BtraceEnable, BtraceConf>;

}  // namespace protocol
