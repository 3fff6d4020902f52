// Parser and table row of the thread-local storage packets.
#include "protocol/packets/tls.h"

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

// <thread>,<offset>,<lm>: exactly three fields, as gdbserver's parser wants them.
Request p_tls_address(string_view args) {
  auto parts = split(args, ',');
  if (parts.size() != 3) return malformed("qGetTLSAddr: expected thread,offset,lm");
  auto id = parse_thread_id(parts[0]);
  auto offset = parse_hex_u64(parts[1]);
  auto lm = parse_hex_u64(parts[2]);
  if (!id || !offset || !lm) return malformed("qGetTLSAddr: bad thread, offset or lm");
  return GetTlsAddress{*id, *offset, *lm};
}

constexpr PacketRow kRows[] = {
    {"qGetTLSAddr:", false, p_tls_address},
};

}  // namespace

std::span<const PacketRow> tls_rows() { return kRows; }

}  // namespace protocol
