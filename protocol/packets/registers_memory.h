// Register and memory packets: g G p P m x M X (server/handlers/registers_memory.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "protocol/packets/packet_list.h"

namespace protocol {

struct ReadRegisters { std::optional<int> thread_suffix; };       // g[;thread:tid;]
struct WriteRegisters { std::vector<uint8_t> data; std::optional<int> thread_suffix; };  // G
struct ReadRegister { int regno = 0; std::optional<int> thread_suffix; };                // p
struct WriteRegister { int regno = 0; std::vector<uint8_t> value; std::optional<int> thread_suffix; };  // P
struct ReadMemory { uint64_t addr = 0; uint64_t length = 0; bool binary = false; };     // m / x
struct WriteMemory { uint64_t addr = 0; std::vector<uint8_t> data; };                   // M / X

using RegistersMemoryPackets =
    PacketList<ReadRegisters, WriteRegisters, ReadRegister, WriteRegister, ReadMemory, WriteMemory>;

}  // namespace protocol
