// Request: what a client asked for, parsed from one packet payload. It is every family's
// packets joined (each family lists its own in its header), plus the two answers a parse can
// give when no family's packet fits.
#pragma once

#include <string>
#include <variant>

#include "protocol/packets/breakpoints.h"
#include "protocol/packets/btrace.h"
#include "protocol/packets/execution.h"
#include "protocol/packets/general.h"
#include "protocol/packets/host_io.h"
#include "protocol/packets/lldb.h"
#include "protocol/packets/monitor.h"
#include "protocol/packets/packet_list.h"
#include "protocol/packets/registers_memory.h"
#include "protocol/packets/tls.h"
#include "protocol/packets/tracepoints.h"
#include "protocol/packets/xfer.h"

namespace protocol {

// A packet we recognise by name but whose arguments were malformed.
struct Malformed { std::string what; };
// A packet we do not know: answered with an empty reply.
struct Unknown { std::string payload; };

namespace detail {
// Concatenates PacketLists into one std::variant.
template <typename... Lists>
struct JoinPackets;
template <typename... Requests>
struct JoinPackets<PacketList<Requests...>> {
  using Variant = std::variant<Requests...>;
};
template <typename... First, typename... Second, typename... Rest>
struct JoinPackets<PacketList<First...>, PacketList<Second...>, Rest...>
    : JoinPackets<PacketList<First..., Second...>, Rest...> {};
}  // namespace detail

using Request = detail::JoinPackets<GeneralPackets, MonitorPackets, TlsPackets, RegistersMemoryPackets,
                                    ExecutionPackets, BreakpointsPackets, XferPackets, HostIoPackets,
                                    BtracePackets, LldbPackets, TracepointsPackets, PacketList<Malformed, Unknown>>::Variant;

}  // namespace protocol
