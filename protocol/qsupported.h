// qSupported negotiation: what the client offered, what we turn on, and our feature list.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/packets.h"
#include "protocol/replies.h"

namespace protocol {

// Features the client listed with '+' (or xmlRegisters=... naming i386).
struct ClientFeatures {
  bool multiprocess = false;
  bool swbreak = false;
  bool hwbreak = false;
  bool fork_events = false;
  bool vfork_events = false;
  bool exec_events = false;
  bool vcont_supported = false;
  bool no_resumed = false;
  bool thread_events = false;
  bool xml_registers = false;
};

ClientFeatures parse_client_features(const QuerySupported& q);

// Dialect from what the client offered. LLDB-ness is not decided here (see Dialect::lldb).
// fork/vfork/exec events are only turned on when the server lists them too.
struct ServerFeatures;
Dialect negotiate(const QuerySupported& q);
Dialect negotiate(const QuerySupported& q, const ServerFeatures& server);

// What this server can do; the qSupported reply is built from it.
struct ServerFeatures {
  uint32_t packet_size = 0x20000;
  bool btrace = true;                   // Qbtrace:* and qXfer:btrace* (BTS)
  // Qbtrace:pt+ and Qbtrace-conf:pt:size+: only where Intel PT can really be recorded (the
  // server sets it from its PT check). GDB's plain `record btrace` tries pt first, then bts.
  bool btrace_pt = false;
  bool stepbranch = true;               // our "stepbranch" packet
  bool extended_remote_allowed = true;  // reserved: the '!' packet is not a qSupported feature
  bool fork_events = true;              // fork stops; the child is held until D;<child>
  bool vfork_events = true;             // vfork and vforkdone stops
  bool exec_events = true;              // an exec stop says "exec:<path>" (LLDB: reason:exec)
  bool no_resumed = true;               // 'N' when every resumed thread has exited
  bool non_stop = false;                // QNonStop+
};

std::string format_qsupported(const ServerFeatures& server, const Dialect& dialect);

}  // namespace protocol
