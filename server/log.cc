#include "server/log.h"

#include <poll.h>
#include <unistd.h>

namespace server {

void Logger::write(std::string_view line) const {
  FILE* out = file ? file : stderr;
  if (!file) {
    pollfd p{STDERR_FILENO, POLLOUT, 0};
    if (::poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)) return;  // would block: drop
  }
  std::string text(line);
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  fwrite(text.data(), 1, text.size(), out);
  fflush(out);
}

void Logger::notice(std::string_view line) const {
  std::string text(line);
  if (text.empty() || text.back() != '\n') text.push_back('\n');
  fwrite(text.data(), 1, text.size(), stderr);
  fflush(stderr);
  if (file) write(line);
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

}  // namespace server
