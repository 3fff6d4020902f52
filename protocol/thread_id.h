// Thread ids as RSP writes them: "p<pid>.<tid>" with multiprocess, "<tid>" without.
// -1 means "all", 0 means "any".
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace protocol {

struct ThreadId {
  static constexpr int kAll = -1;
  static constexpr int kAny = 0;
  std::optional<int> pid;  // present when the client wrote "p<pid>."
  int tid = kAny;

  bool is_all() const { return tid == kAll; }
  bool is_any() const { return tid == kAny; }
  bool operator==(const ThreadId&) const = default;
};

// Parses "p1a.1b", "p1a.-1", "p1a" (all threads of pid 0x1a), "-1", "0", "1b".
std::optional<ThreadId> parse_thread_id(std::string_view text);
// Formats a concrete thread: "p<pid>.<tid>" when multiprocess, else "<tid>" (lowercase hex).
std::string format_thread_id(int pid, int tid, bool multiprocess);

}  // namespace protocol
