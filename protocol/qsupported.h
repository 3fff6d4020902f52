// qSupported negotiation: what the client offered, what we turn on, and our feature list.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/capabilities.h"
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
  bool no_resumed = false;
  bool thread_events = false;
  bool xml_registers = false;
  bool xml_registers_other = false;  // xmlRegisters also named a non-x86 architecture (LLDB)
  bool error_message = false;        // error-message+ (GDB 16+)
};

ClientFeatures parse_client_features(const QuerySupported& q);

// The dialect from what the client offered and what the server can do: the one place where
// GDB and LLDB are told apart (LLDB lists every architecture it knows in xmlRegisters; GDB
// names only i386 on x86), and where fork/vfork/exec events and 'N' are turned on (both sides
// must have them).
Dialect negotiate(const QuerySupported& q, const Capabilities& server);
// With every capability (tests).
Dialect negotiate(const QuerySupported& q);

// The qSupported reply: every feature whose capability the server has (and, for the
// client-dependent ones, that the dialect turned on).
std::string format_qsupported(const Capabilities& server, const Dialect& dialect);

// One listed feature and a packet that exercises it (tests send each one and expect an
// answer that is not "unsupported").
struct FeatureRow {
  std::string_view name;
  Capability needs;
  std::string_view probe;  // a packet the feature promises to serve ("" when none applies)
};
std::vector<FeatureRow> feature_rows();

constexpr uint32_t kPacketSize = 0x20000;

}  // namespace protocol
