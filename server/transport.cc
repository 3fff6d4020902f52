#include "server/transport.h"

#include <fcntl.h>
#include <poll.h>

#include <unistd.h>

#include <array>

namespace server {

namespace asio = boost::asio;

namespace {

// Reads from one stream, writes to another (the same socket for TCP; fd 0 and fd 1 for stdio).
template <typename ReadStream, typename WriteStream>
class StreamTransport : public Transport {
 public:
  StreamTransport(ReadStream& in, WriteStream& out) : in_(in), out_(out) {}
  ~StreamTransport() override { *alive_ = false; }

  void start(ReadHandler on_data, CloseHandler on_close) override {
    on_data_ = std::move(on_data);
    on_close_ = std::move(on_close);
    read_more();
  }

  void write(std::string bytes) override {
    if (closed_) return;
    queue_.push_back(std::move(bytes));
    if (queue_.size() == 1) write_next();
  }

  void close() override {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    in_.cancel(ignored);
    out_.cancel(ignored);
  }

  PeerNews poll_peer() override {
    if (closed_ || finished_ || hung_up_) return PeerNews::Gone;
    pollfd p{in_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) return PeerNews::Nothing;
    if (!(p.revents & POLLIN)) {
      // POLLHUP/POLLERR with nothing left to read: the client is gone (the read sees it too).
      hung_up_ = (p.revents & (POLLHUP | POLLERR)) != 0;
      return hung_up_ ? PeerNews::Gone : PeerNews::Nothing;
    }
    char byte = 0;
    ssize_t n = ::read(in_.native_handle(), &byte, 1);
    if (n == 0) {
      hung_up_ = true;  // EOF stays: the pending asynchronous read reports it to the session
      return PeerNews::Gone;
    }
    if (n != 1) return PeerNews::Nothing;
    if (byte == '\x03') return PeerNews::Interrupt;
    // Not ours: the session gets it first thing, before whatever is read next.
    stash_.push_back(byte);
    auto alive = alive_;
    asio::post(in_.get_executor(), [this, alive] {
      if (*alive && !closed_) flush_stash();
    });
    return PeerNews::Nothing;
  }

 private:
  // What poll_peer() read and kept goes to the session before anything read after it.
  void flush_stash() {
    if (!stash_.empty()) on_data_(std::exchange(stash_, {}));
  }
  void read_more() {
    auto alive = alive_;
    in_.async_read_some(asio::buffer(buffer_), [this, alive](boost::system::error_code ec, size_t n) {
      if (!*alive) return;
      if (ec || closed_) {
        finish();
        return;
      }
      flush_stash();
      if (*alive && !closed_) on_data_(std::string_view(buffer_.data(), n));
      if (*alive && !closed_) read_more();
    });
  }

  void write_next() {
    auto alive = alive_;
    asio::async_write(out_, asio::buffer(queue_.front()), [this, alive](boost::system::error_code ec, size_t) {
      if (!*alive) return;
      if (ec) {
        queue_.clear();
        return;  // the reader notices the close
      }
      queue_.pop_front();
      if (!queue_.empty()) write_next();
    });
  }

  void finish() {
    if (finished_) return;
    finished_ = true;
    closed_ = true;
    if (on_close_) on_close_();
  }

  ReadStream& in_;
  WriteStream& out_;
  std::array<char, 65536> buffer_{};
  std::deque<std::string> queue_;
  ReadHandler on_data_;
  CloseHandler on_close_;
  bool closed_ = false;
  bool finished_ = false;
  bool hung_up_ = false;
  std::string stash_;  // bytes poll_peer() read that were not an interrupt
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

class TcpTransport : public Transport {
 public:
  explicit TcpTransport(asio::ip::tcp::socket socket) : socket_(std::move(socket)), impl_(socket_, socket_) {
    // Asio's accept() does not set close-on-exec: a program launched later (vRun) would hold
    // the client's connection open.
    ::fcntl(socket_.native_handle(), F_SETFD, FD_CLOEXEC);
    boost::system::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  void start(ReadHandler d, CloseHandler c) override { impl_.start(std::move(d), std::move(c)); }
  void write(std::string bytes) override { impl_.write(std::move(bytes)); }
  PeerNews poll_peer() override { return impl_.poll_peer(); }
  void close() override {
    impl_.close();
    boost::system::error_code ignored;
    socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

 private:
  asio::ip::tcp::socket socket_;
  StreamTransport<asio::ip::tcp::socket, asio::ip::tcp::socket> impl_;
};

class StdioTransport : public Transport {
 public:
  explicit StdioTransport(asio::io_context& io)
      : in_(io, ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3)), out_(io, ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)),
        impl_(in_, out_) {}  // close-on-exec: the programs we launch get no copy of the protocol
  void start(ReadHandler d, CloseHandler c) override { impl_.start(std::move(d), std::move(c)); }
  void write(std::string bytes) override { impl_.write(std::move(bytes)); }
  PeerNews poll_peer() override { return impl_.poll_peer(); }
  void close() override {
    impl_.close();
    boost::system::error_code ignored;
    in_.close(ignored);
    out_.close(ignored);
  }

 private:
  asio::posix::stream_descriptor in_;
  asio::posix::stream_descriptor out_;
  StreamTransport<asio::posix::stream_descriptor, asio::posix::stream_descriptor> impl_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(asio::ip::tcp::socket socket) {
  return std::make_unique<TcpTransport>(std::move(socket));
}

std::unique_ptr<Transport> make_stdio_transport(asio::io_context& io) {
  return std::make_unique<StdioTransport>(io);
}

}  // namespace server
