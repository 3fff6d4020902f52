// Replies to the packets only LLDB sends (qHostInfo, qProcessInfo, qMemoryRegionInfo,
// qWatchpointSupportInfo, jThreadsInfo): "key:value;" lists and JSON, as lldb-server writes them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/stop_reply.h"

namespace protocol::reply {

// qHostInfo: the host the server runs on (always a little-endian 64-bit Linux).
struct HostInfo {
  std::string triple;      // "x86_64-pc-linux-gnu"
  std::string os_version;  // uname's release
  std::string hostname;
};

// qProcessInfo: the debugged process.
struct ProcessInfo {
  int pid = 0;
  // From /proc: -1 where unreadable (sent as "-1", as it always was).
  long parent_pid = -1, real_uid = -1, real_gid = -1, effective_uid = -1, effective_gid = -1;
  std::string triple;
};

// qMemoryRegionInfo: the mapping that holds an address, or the hole up to the next one (no
// permissions, no name).
struct MemoryRegion {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string permissions;  // "rwx" letters the mapping has; empty: none listed
  std::string name;         // the mapped file; empty: none listed
};

// qWatchpointSupportInfo: how many hardware watchpoints can be set at once.
struct WatchpointSlots { int count = 0; };

// jThreadsInfo: one stop description per thread.
struct ThreadsInfo { std::vector<StopReply> threads; };

}  // namespace protocol::reply

namespace protocol {

std::string encode(const reply::HostInfo& info);
std::string encode(const reply::ProcessInfo& info);
std::string encode(const reply::MemoryRegion& region);
std::string encode(const reply::WatchpointSlots& slots);
std::string encode(const reply::ThreadsInfo& info);  // threads_info_json, binary-escaped

}  // namespace protocol
