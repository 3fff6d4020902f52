// Server logging to stderr (or --debug-file). Never blocks the server: when stderr is a pipe
// nobody reads, lines are dropped instead of stalling the event loop.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string_view>

namespace server {

class Logger {
 public:
  bool debug = false;         // --debug: server events
  bool remote_debug = false;  // --remote-debug: packets
  FILE* file = nullptr;       // --debug-file, else stderr

  // Lines tools wait for (gdbserver compatible): always printed.
  void notice(std::string_view line) const;
  template <typename... Args>
  void event(fmt::format_string<Args...> f, Args&&... args) const {
    if (debug) write(fmt::format(f, std::forward<Args>(args)...));
  }
  void packet(char direction, std::string_view payload) const;

 private:
  void write(std::string_view line) const;
};

}  // namespace server
