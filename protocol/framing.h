// Packet framing: turns the incoming byte stream into events ('$payload#cs' packets, acks,
// interrupts) and wraps outgoing payloads. No I/O: the connection feeds bytes in and writes
// what encode() returns.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace protocol {

class Framer {
 public:
  struct Event {
    enum class Kind {
      Packet,       // payload = unescaped packet payload
      Interrupt,    // raw 0x03 outside a packet
      Ack,          // '+'
      Nack,         // '-'
      BadChecksum,  // ack mode only; payload = what was received (the server should send '-')
      Oversized,    // packet longer than max_packet; discarded (the server should send '-')
    };
    Kind kind;
    std::string payload;
  };

  static constexpr size_t kDefaultMaxPacket = 0x100000;

  explicit Framer(size_t max_packet = kDefaultMaxPacket) : max_packet_(max_packet) {}

  // Consumes bytes (any chunking) and returns every event completed by them, in order.
  std::vector<Event> feed(std::string_view bytes);

  // In no-ack mode checksums are not verified (GDB does not verify them either).
  void set_no_ack(bool no_ack) { no_ack_ = no_ack; }
  bool no_ack() const { return no_ack_; }

  // "$" + rle(payload) + "#" + checksum. The payload must already be binary-escaped where
  // the packet carries binary data.
  static std::string encode(std::string_view payload, bool rle = true);
  // "%" + name + ":" + payload + "#" + checksum (non-stop notifications; no RLE).
  static std::string encode_notification(std::string_view name, std::string_view payload);

 private:
  enum class State { Idle, Payload, Discard, Checksum1, Checksum2 };

  void finish_packet(std::vector<Event>& events);

  size_t max_packet_;
  bool no_ack_ = false;
  State state_ = State::Idle;
  std::string raw_;            // payload bytes as received (escaped)
  unsigned sum_ = 0;           // running checksum over raw_
  char checksum_hi_ = 0;
  char checksum_lo_ = 0;
  bool oversized_ = false;     // the current packet is being discarded
};

}  // namespace protocol
