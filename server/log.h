// Server logging to stderr (or --debug-file). Never blocks the server: when stderr is a pipe
// nobody reads, lines are dropped instead of stalling the event loop.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace server {

class Logger {
 public:
  Logger() = default;
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  bool debug = false;         // --debug: server events
  bool remote_debug = false;  // --remote-debug: packets
  bool event_loop = false;    // --event-loop-debug: what wakes the event loop
  bool hw_points = false;     // monitor set debug-hw-points: hardware breakpoints/watchpoints
  bool timestamps = false;    // --debug-format=timestamp: "SECONDS.MICROSECONDS " before each line

  // Debug output goes to PATH from now on (truncated, as gdbserver does); an empty PATH, or one
  // that cannot be opened (said on stderr), means stderr again.
  void set_file(const std::string& path);
  bool to_file() const { return file_ != nullptr; }

  // Lines tools wait for (gdbserver compatible): always printed.
  void notice(std::string_view line) const;
  template <typename... Args>
  void event(fmt::format_string<Args...> f, Args&&... args) const {
    if (debug) write(fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void loop(fmt::format_string<Args...> f, Args&&... args) const {
    if (event_loop) write("[event-loop] " + fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void hw_point(fmt::format_string<Args...> f, Args&&... args) const {
    if (hw_points) write("[hw-points] " + fmt::format(f, std::forward<Args>(args)...));
  }
  void packet(char direction, std::string_view payload) const;

 private:
  void write(std::string_view line) const;
  FILE* file_ = nullptr;  // --debug-file, else stderr
};

// --debug-format=LIST and `monitor set debug-format LIST`: comma-separated all, none,
// timestamp (each word in turn; empty words skipped; anything not listed is off).
struct DebugFormat {
  bool timestamps = false;
  std::string said;   // what `monitor set debug-format` prints, one line per word
  std::string error;  // non-empty: an unknown word, and the setting is left alone
};
DebugFormat parse_debug_format(std::string_view list);

}  // namespace server
