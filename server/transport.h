// Byte transports for one client: a TCP socket or the server's own stdin/stdout.
#pragma once

#include <utility>  // Boost 1.74 asio needs std::exchange declared first in C++20
#include <boost/asio.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace server {

class Transport {
 public:
  using ReadHandler = std::function<void(std::string_view bytes)>;
  using CloseHandler = std::function<void()>;
  virtual ~Transport() = default;
  // Starts reading; `on_data` for each chunk, `on_close` once at EOF or error.
  virtual void start(ReadHandler on_data, CloseHandler on_close) = 0;
  // Queues bytes; writes never block the loop.
  virtual void write(std::string bytes) = 0;
  virtual void close() = 0;
  // Asked while the loop is busy with a long synchronous request (a reverse pass): whether the
  // client has since sent an interrupt (Ctrl-C, taken here) or hung up. Any other byte read
  // while looking is handed to the read handler later, in order.
  enum class PeerNews { Nothing, Interrupt, Gone };
  virtual PeerNews poll_peer() { return PeerNews::Nothing; }
};

std::unique_ptr<Transport> make_tcp_transport(boost::asio::ip::tcp::socket socket);
std::unique_ptr<Transport> make_stdio_transport(boost::asio::io_context& io);

}  // namespace server
