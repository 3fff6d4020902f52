// gdbserver's maintenance option --disable-packet=LIST: packets and stop-reply parts the server
// leaves out so that a client's fallbacks can be exercised (GDB's testsuite uses it to test its
// handling of 'S' stop replies and of servers that never name threads).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/packets.h"

namespace protocol {

struct DisabledPackets {
  bool vcont = false;           // vCont?, vCont;... and vCtrlC get the empty reply
  bool t_stop = false;          // T stop replies shrink to plain "Sxx"
  bool t_thread = false;        // T stop replies carry no thread: (nor core:)
  bool qc = false;              // qC gets the empty reply
  bool qf_thread_info = false;  // qfThreadInfo and qsThreadInfo get the empty reply

  bool operator==(const DisabledPackets&) const = default;
};

// LIST is comma-separated words: vCont, Tthread, qC, qfThreadInfo, T, and threads (the first
// four together). Empty words are skipped. An unknown word gives nullopt and is put in `bad`.
std::optional<DisabledPackets> parse_disabled_packets(std::string_view list, std::string* bad = nullptr);

// The list of what can be disabled, worded as gdbserver prints it.
std::string disableable_packets_text();

// True when the request's packet is disabled: it is then answered as an unknown packet.
bool is_disabled(const Request& request, const DisabledPackets& disabled);

}  // namespace protocol
