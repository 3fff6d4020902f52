// What the client negotiated: the one place where GDB and LLDB differ on the wire. Every
// reply is encoded in a dialect (protocol/replies.h: encode).
#pragma once

#include "protocol/disabled_packets.h"

namespace protocol {

struct Dialect {
  bool multiprocess = false;
  bool swbreak = false;        // client offered swbreak+ (GDB); LLDB never does
  bool hwbreak = false;
  bool fork_events = false;
  bool vfork_events = false;
  bool exec_events = false;
  bool no_resumed = false;
  bool lldb = false;           // LLDB (negotiate(): its qSupported offer), or an LLDB-only packet seen
  bool list_threads_in_stop = false;  // LLDB QListThreadsInStopReply accepted
  bool error_strings = false;  // LLDB QEnableErrorStrings
  // GDB offered error-message+ (GDB 16 and later): `m` and qRcmd may then fail with "E.text",
  // which older GDBs do not take from those two packets.
  bool error_message = false;
  // Not negotiated: what the server was started with (--disable-packet); kept across qSupported.
  DisabledPackets disabled;
};

}  // namespace protocol
