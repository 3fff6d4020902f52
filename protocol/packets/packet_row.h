// PacketRow: one row of the packet table (a name, how it matches, its parser, the capability
// it needs). Each family exposes its rows; packets.cc joins them into the table.
#pragma once

#include <span>
#include <string_view>

#include "protocol/capabilities.h"
#include "protocol/packets/request.h"

namespace protocol {

struct PacketRow {
  std::string_view name;
  bool exact;  // exact: the whole payload; else a prefix whose remainder is the arguments
  Request (*parse)(std::string_view args);
  Capability needs = Capability::Base;  // without it the packet is unknown (empty reply)
};

// Each family's rows, in the order they are tried (packets/<family>.cc).
std::span<const PacketRow> general_rows();
std::span<const PacketRow> monitor_rows();
std::span<const PacketRow> tls_rows();
std::span<const PacketRow> registers_memory_rows();
std::span<const PacketRow> execution_rows();
std::span<const PacketRow> breakpoints_rows();
std::span<const PacketRow> xfer_rows();
std::span<const PacketRow> host_io_rows();
std::span<const PacketRow> btrace_rows();
std::span<const PacketRow> lldb_rows();
std::span<const PacketRow> tracepoints_rows();

// Every family's rows joined, in the order parse_request tries them (packets.cc).
std::span<const PacketRow> packet_table();

}  // namespace protocol
