// Parsers and table rows of LLDB's packets.
#include "protocol/packets/lldb.h"

#include <string>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"
#include "protocol/thread_id.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

Request p_memory_region(string_view args) {
  auto addr = parse_hex_u64(args);
  if (!addr) return malformed("qMemoryRegionInfo: bad address");
  return MemoryRegionInfo{*addr};
}

Request p_watch_info(string_view args) {
  if (args.empty() || args == ":") return WatchpointSupportInfo{};
  return Unknown{"qWatchpointSupportInfo" + std::string(args)};
}

Request p_thread_stop_info(string_view args) {
  auto id = parse_thread_id(args);
  if (!id || id->tid <= 0) return malformed("qThreadStopInfo: bad thread id");
  return ThreadStopInfo{id->tid};
}

Request p_register_info(string_view args) {
  auto n = hex_int(args);
  if (!n) return malformed("qRegisterInfo: bad register number");
  return RegisterInfo{*n};
}

constexpr PacketRow kRows[] = {
    {"qHostInfo", true, make<HostInfo>},
    {"qProcessInfo", true, make<ProcessInfo>},
    {"qMemoryRegionInfo:", false, p_memory_region},
    {"QThreadSuffixSupported", true, make<ThreadSuffixSupported>},
    {"QListThreadsInStopReply", true, make<ListThreadsInStopReply>},
    {"jThreadsInfo", true, make<ThreadsInfo>},
    {"QEnableErrorStrings", true, make<EnableErrorStrings>},
    {"qWatchpointSupportInfo", false, p_watch_info},
    {"qThreadStopInfo", false, p_thread_stop_info},
    {"qRegisterInfo", false, p_register_info},
};

}  // namespace

std::span<const PacketRow> lldb_rows() { return kRows; }

}  // namespace protocol
