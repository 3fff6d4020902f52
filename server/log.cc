#include "server/log.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace server {

Logger::~Logger() {
  if (file_) std::fclose(file_);
}

void Logger::set_file(const std::string& path) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "we");  // close-on-exec
  if (!file_) write(fmt::format("Cannot open {} for writing. {}. Switching to stderr.", path, std::strerror(errno)));
}

void Logger::write(std::string_view line) const {
  FILE* out = file_ ? file_ : stderr;
  if (!file_) {
    pollfd p{STDERR_FILENO, POLLOUT, 0};
    if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)) return;  // would block: drop
  }
  std::string text;
  if (timestamps) {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::steady_clock::now().time_since_epoch()).count();
    text = fmt::format("{}.{:06} ", us / 1000000, us % 1000000);
  }
  text += line;
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  fwrite(text.data(), 1, text.size(), out);
  fflush(out);
}

void Logger::notice(std::string_view line) const {
  std::string text(line);
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  fwrite(text.data(), 1, text.size(), stderr);
  fflush(stderr);
  if (file_) write(line);
}

void Logger::packet(char direction, std::string_view payload) const {
  if (!remote_debug) return;
  constexpr size_t kMax = 512;
  std::string shown;
  for (unsigned char c : payload.substr(0, kMax)) {
    if (c >= 0x20 && c < 0x7f) shown.push_back(static_cast<char>(c));
    else shown += fmt::format("\\x{:02x}", c);
  }
  if (payload.size() > kMax) shown += fmt::format("...[{} bytes omitted]", payload.size() - kMax);
  write(fmt::format("[remote] {} {}", direction == '>' ? "putpkt" : "getpkt", shown));
}

DebugFormat parse_debug_format(std::string_view list) {
  DebugFormat out;
  while (!list.empty() && list.front() == ' ') list.remove_prefix(1);
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view word = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (word == "all") {
      out.timestamps = true;
      out.said += "All extra debug format options enabled.\n";
    } else if (word == "none") {
      out.timestamps = false;
      out.said += "All extra debug format options disabled.\n";
    } else if (word == "timestamp") {
      out.timestamps = true;
      out.said += "Timestamps will be added to debug output.\n";
    } else if (!word.empty()) {
      out.error = fmt::format("Unknown debug-format argument: \"{}\"\n", word);
      return out;
    }
  }
  return out;
}

}  // namespace server
