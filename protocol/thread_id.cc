#include "protocol/thread_id.h"

#include <climits>

#include "protocol/hex.h"

namespace protocol {
namespace {

// One id component: "-1" or 1..8 hex digits that fit an int.
std::optional<int> parse_component(std::string_view text) {
  if (text == "-1") return -1;
  if (text.size() > 8) return std::nullopt;
  auto v = parse_hex_u64(text);
  if (!v || *v > static_cast<uint64_t>(INT_MAX)) return std::nullopt;
  return static_cast<int>(*v);
}

}  // namespace

std::optional<ThreadId> parse_thread_id(std::string_view text) {
  ThreadId id;
  if (!text.empty() && text[0] == 'p') {
    text.remove_prefix(1);
    auto dot = text.find('.');
    auto pid = parse_component(text.substr(0, dot));
    if (!pid) return std::nullopt;
    id.pid = *pid;
    if (dot == std::string_view::npos) {
      id.tid = ThreadId::kAll;  // "p<pid>" = every thread of that process
      return id;
    }
    text.remove_prefix(dot + 1);
  }
  auto tid = parse_component(text);
  if (!tid) return std::nullopt;
  id.tid = *tid;
  return id;
}

std::string format_thread_id(int pid, int tid, bool multiprocess) {
  auto component = [](int v) { return v < 0 ? std::string("-1") : hex_u64(static_cast<uint64_t>(v)); };
  if (multiprocess) return "p" + component(pid) + "." + component(tid);
  return component(tid);
}

}  // namespace protocol
