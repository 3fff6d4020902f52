// LLDB's own packets (server/handlers/lldb.cc answers them).
#pragma once

#include <cstdint>

#include "protocol/packets/packet_list.h"

namespace protocol {

struct HostInfo {};                                   // qHostInfo
struct ProcessInfo {};                                // qProcessInfo
struct MemoryRegionInfo { uint64_t addr = 0; };       // qMemoryRegionInfo:addr
struct ThreadSuffixSupported {};                      // QThreadSuffixSupported
struct ListThreadsInStopReply {};                     // QListThreadsInStopReply
struct ThreadsInfo {};                                // jThreadsInfo
struct EnableErrorStrings {};                         // QEnableErrorStrings
struct WatchpointSupportInfo {};                      // qWatchpointSupportInfo[:]
struct ThreadStopInfo { int tid = 0; };               // qThreadStopInfo<tid>
struct RegisterInfo { int regno = 0; };               // qRegisterInfo<n>

using LldbPackets = PacketList<HostInfo, ProcessInfo, MemoryRegionInfo, ThreadSuffixSupported,
                               ListThreadsInStopReply, ThreadsInfo, EnableErrorStrings,
                               WatchpointSupportInfo, ThreadStopInfo, RegisterInfo>;

}  // namespace protocol
