#include "protocol/framing.h"

#include "protocol/hex.h"

namespace protocol {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string checksum_hex(std::string_view body) {
  unsigned sum = 0;
  for (char c : body) sum += static_cast<uint8_t>(c);
  return to_hex(std::string_view(std::string(1, static_cast<char>(sum & 0xff))));
}

}  // namespace

std::vector<Framer::Event> Framer::feed(std::string_view bytes) {
  std::vector<Event> events;
  for (char c : bytes) {
    switch (state_) {
      case State::Idle:
        if (c == '$') {
          state_ = State::Payload;
          raw_.clear();
          sum_ = 0;
          oversized_ = false;
        } else if (c == '+') {
          events.push_back({Event::Kind::Ack, {}});
        } else if (c == '-') {
          events.push_back({Event::Kind::Nack, {}});
        } else if (c == '\x03') {
          events.push_back({Event::Kind::Interrupt, {}});
        }
        // Anything else between packets is line noise: dropped.
        break;
      case State::Payload:
      case State::Discard:
        if (c == '#') {
          state_ = State::Checksum1;
        } else if (c == '$') {
          // A '$' never appears inside a payload (it is escaped): the sender restarted.
          raw_.clear();
          sum_ = 0;
          oversized_ = false;
          state_ = State::Payload;
        } else if (state_ == State::Payload) {
          if (raw_.size() >= max_packet_) {
            // Report once, then drop bytes until the packet ends; nothing more is buffered.
            events.push_back({Event::Kind::Oversized, {}});
            raw_.clear();
            raw_.shrink_to_fit();
            oversized_ = true;
            state_ = State::Discard;
          } else {
            raw_.push_back(c);
            sum_ += static_cast<uint8_t>(c);
          }
        }
        break;
      case State::Checksum1:
        checksum_hi_ = c;
        state_ = State::Checksum2;
        break;
      case State::Checksum2:
        checksum_lo_ = c;
        state_ = State::Idle;
        finish_packet(events);
        break;
    }
  }
  return events;
}

void Framer::finish_packet(std::vector<Event>& events) {
  if (oversized_) {
    oversized_ = false;
    return;
  }
  int hi = hex_digit(checksum_hi_), lo = hex_digit(checksum_lo_);
  bool good = hi >= 0 && lo >= 0 && static_cast<unsigned>(hi << 4 | lo) == (sum_ & 0xff);
  if (!good && !no_ack_) {
    events.push_back({Event::Kind::BadChecksum, std::move(raw_)});
  } else {
    events.push_back({Event::Kind::Packet, unescape_binary(raw_)});
  }
  raw_.clear();
}

std::string Framer::encode(std::string_view payload, bool rle) {
  std::string body = rle ? rle_compress(payload) : std::string(payload);
  std::string out;
  out.reserve(body.size() + 4);
  out.push_back('$');
  out += body;
  out.push_back('#');
  out += checksum_hex(body);
  return out;
}

std::string Framer::encode_notification(std::string_view name, std::string_view payload) {
  std::string body(name);
  body.push_back(':');
  body += payload;
  std::string out = "%" + body + "#" + checksum_hex(body);
  return out;
}

}  // namespace protocol
