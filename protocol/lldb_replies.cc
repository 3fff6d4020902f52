#include "protocol/lldb_replies.h"

#include <fmt/format.h>

#include "protocol/hex.h"

namespace protocol {

std::string encode(const reply::HostInfo& info) {
  return fmt::format("triple:{};ptrsize:8;endian:little;ostype:linux;vendor:pc;os_version:{};hostname:{};"
                     "watchpoint_exceptions_received:after;",
                     to_hex(std::string_view(info.triple)), info.os_version, to_hex(std::string_view(info.hostname)));
}

std::string encode(const reply::ProcessInfo& info) {
  return fmt::format("pid:{:x};parent-pid:{:x};real-uid:{:x};real-gid:{:x};effective-uid:{:x};effective-gid:{:x};"
                     "triple:{};ostype:linux;endian:little;ptrsize:8;",
                     info.pid, info.parent_pid, info.real_uid, info.real_gid, info.effective_uid, info.effective_gid,
                     to_hex(std::string_view(info.triple)));
}

std::string encode(const reply::MemoryRegion& region) {
  std::string out = fmt::format("start:{:x};size:{:x};", region.start, region.size);
  if (!region.permissions.empty()) out += "permissions:" + region.permissions + ";";
  if (!region.name.empty()) out += "name:" + to_hex(std::string_view(region.name)) + ";";
  return out;
}

std::string encode(const reply::WatchpointSlots& slots) { return fmt::format("num:{};", slots.count); }

std::string encode(const reply::ThreadsInfo& info) { return escape_binary(threads_info_json(info.threads)); }

}  // namespace protocol
