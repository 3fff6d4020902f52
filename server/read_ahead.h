// Read-ahead for bulk memory reads.
//
// GDB's `dump memory`, a long `x/…` and LLDB's `memory read` arrive as a chain of `m`/`x`
// requests, each for the block right after the last one. The client spends most of each round
// trip decoding the reply it has; meanwhile we prepare the next block, so its reply can leave as
// soon as its request arrives. A prepared reply is served only to the very next packet, and only
// if that packet asks for exactly that block: any other packet (a write, a resume, a register
// read...) drops it, so a reply never predates a packet that could have changed memory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/packets.h"

namespace server {

class ReadAhead {
 public:
  // Requests at least this long are bulk reads worth reading ahead of (GDB's stack and code
  // reads are 64 bytes or a few hundred; its bulk reads are PacketSize/2).
  static constexpr uint64_t kMinLength = 0x1000;

  // The block after `request`, if `request` looks like part of a bulk read.
  static std::optional<protocol::ReadMemory> next_after(const protocol::ReadMemory& request);

  // Keeps `payload` (and its framed bytes) as the reply to `request`.
  void keep(const protocol::ReadMemory& request, std::string payload, std::string framed);
  // The kept reply if `request` is exactly the kept block; the kept reply is gone either way.
  struct Prepared {
    std::string payload;
    std::string framed;
  };
  std::optional<Prepared> take(const protocol::ReadMemory& request);
  void drop() { kept_.reset(); }
  bool holding() const { return kept_.has_value(); }

 private:
  struct Kept {
    protocol::ReadMemory request;
    Prepared reply;
  };
  std::optional<Kept> kept_;
};

}  // namespace server
