// Transport::poll_peer: what a long synchronous request (a reverse pass) learns from the
// connection without the event loop: Ctrl-C is taken, a hang-up seen, and any other byte read
// while looking reaches the session later, in order.
#include <catch2/catch.hpp>

#include <string>

#include "server/transport.h"

namespace asio = boost::asio;
using server::Transport;

namespace {

struct Pair {
  asio::io_context io;
  asio::ip::tcp::socket client{io};
  std::unique_ptr<Transport> transport;
  std::string received;
  bool closed = false;

  Pair() {
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(acceptor.local_endpoint());
    transport = server::make_tcp_transport(acceptor.accept());
    transport->start([this](std::string_view bytes) { received.append(bytes); }, [this] { closed = true; });
  }
  void send(const std::string& bytes) { asio::write(client, asio::buffer(bytes)); }
  void settle() {
    for (int i = 0; i < 50; ++i) {
      io.poll();
      io.restart();
    }
  }
};

}  // namespace

TEST_CASE("transport: poll_peer takes an interrupt and nothing else") {
  Pair p;
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Nothing);
  p.send("\x03");
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Interrupt);
  p.settle();
  CHECK(p.received.empty());  // consumed: the session never sees that Ctrl-C
}

TEST_CASE("transport: bytes poll_peer reads reach the session first, in order") {
  Pair p;
  p.send("$");
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Nothing);
  p.send("g#67");
  p.settle();
  CHECK(p.received == "$g#67");
  p.send("+");
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Nothing);
  p.settle();
  CHECK(p.received == "$g#67+");
}

TEST_CASE("transport: poll_peer sees a client that hung up") {
  Pair p;
  p.client.close();
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Gone);
  CHECK(p.transport->poll_peer() == Transport::PeerNews::Gone);
  p.settle();
  CHECK(p.closed);  // the session's own read sees the end too
}
