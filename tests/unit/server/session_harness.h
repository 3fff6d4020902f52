// Byte-in/byte-out tests of server::Session: a real Server (not run: no socket, no signalfd,
// no probe) serving one client through an in-memory Transport, with FakeProcesses for the
// inferiors. The test writes what a client writes ("$qC#b4", acks, ^C) and reads back
// exactly what the server wrote, framing and all.
//
//   SessionHarness h;
//   auto& p = h.add_process(100, {100, 101});
//   CHECK(h.request("qC") == "QC64");                  // one reply, unframed
//   p.stop_with({...});                                // the next stop of the fake
//   CHECK(h.round_trip("vCont;c") == std::vector<std::string>{"T05..."});
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/server.h"
#include "server/transport.h"
#include "tests/unit/server/fake_process.h"

namespace fake {

// The client end of the in-memory connection.
struct Wire {
  server::Transport::ReadHandler on_data;
  server::Transport::CloseHandler on_close;
  std::string written;  // every byte the server wrote, not yet taken
  bool closed = false;  // the server closed the connection
};

class TestTransport : public server::Transport {
 public:
  explicit TestTransport(std::shared_ptr<Wire> wire) : wire_(std::move(wire)) {}
  void start(ReadHandler on_data, CloseHandler on_close) override;
  void write(std::string bytes) override { wire_->written += bytes; }
  void close() override { wire_->closed = true; }

 private:
  std::shared_ptr<Wire> wire_;
};

// A client's framing, written here rather than taken from protocol::Framer so that the
// server's framing is checked against an independent reading of the protocol.
std::string frame(std::string_view payload);        // "$" payload "#" two hex digits
std::string checksum_hex(std::string_view payload);  // the two digits
// What the server wrote, split: '+'/'-' acks and packets (checksum verified, run-length
// encoding expanded, binary escapes left as they are). Anything else lands in `stray`.
struct ServerOutput {
  std::string acks;
  std::vector<std::string> packets;
  std::vector<std::string> raw_packets;  // as framed on the wire
  std::vector<std::string> notifications;  // "%Stop:..." as "Stop:..." (checksum verified)
  std::string order;                       // '$' / '%' for each packet / notification, as written
  std::string stray;
  bool bad_checksum = false;
};
ServerOutput split_output(std::string_view bytes);
// Undoes the '}' escape of binary data (x, qXfer replies).
std::string unescape(std::string_view escaped);
// Lowercase hex of bytes / of a little-endian integer of `size` bytes.
std::string hex(std::string_view bytes);
std::string hex_le(uint64_t value, size_t size);
// The registers a GDB-dialect stop reply expedites (rbp, rsp, rip), as the session sends them.
std::string gdb_expedited(uint64_t rbp, uint64_t rsp, uint64_t rip);

class SessionHarness {
 public:
  // busy_poll 0, watchpoints in hardware, COMM stdio, and a fixed probe report: no probe runs.
  static server::ServerOptions default_options();
  static backend::ProbeReport default_probe();
  explicit SessionHarness(server::ServerOptions options = default_options());
  ~SessionHarness();

  server::Server& server() { return *server_; }
  server::Session& session();  // connects first if needed

  // Adds a process to the server (Server::add_process: configure() and the '?' event).
  FakeProcess& add_process(pid_t pid, std::vector<pid_t> tids = {});
  FakeProcess& add_process(std::unique_ptr<FakeProcess> p);
  // The client connects (done by the first send if not before).
  void connect();

  // ---- the client ----
  // Frames the payload, feeds it, runs the loop's ready handlers; the packets the server
  // wrote meanwhile, unframed. In ack mode the server's '+' is checked and our '+' sent back.
  std::vector<std::string> round_trip(std::string_view payload);
  // round_trip that must give exactly one packet: that packet ("<none>"/"<n packets>" if not).
  std::string request(std::string_view payload);
  // Raw bytes to the server (any framing, acks, 0x03), then the loop's ready handlers.
  void send_raw(std::string_view bytes);
  // Runs the loop's ready handlers; the packets written meanwhile.
  std::vector<std::string> poll();
  // Runs the loop until a packet arrives or `ms` pass (the server's 50 ms poll timer).
  std::vector<std::string> wait(int ms = 500);
  // The raw bytes the server wrote since the last take.
  std::string take_written();
  // Acks seen in the last round_trip / poll.
  const std::string& last_acks() const { return last_acks_; }
  // Non-stop notifications the server wrote (any call above collects them), oldest first.
  std::vector<std::string> take_notifications();
  // '$' / '%' in the order the last collected packets and notifications were written.
  const std::string& last_order() const { return last_order_; }
  bool no_ack() const { return no_ack_; }
  Wire& wire() { return *wire_; }

  // ---- connection set-up as the two clients do it ----
  // GDB 13's qSupported offer; returns the reply.
  static constexpr std::string_view kGdbOffer =
      "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;vfork-events+;exec-events+;"
      "vContSupported+;QThreadEvents+;no-resumed+;memory-tagging+;xmlRegisters=i386";
  // LLDB 16's.
  static constexpr std::string_view kLldbOffer =
      "qSupported:xmlRegisters=i386,arm,mips,arc;multiprocess+;fork-events+;vfork-events+";
  std::string gdb_handshake();   // kGdbOffer, then QStartNoAckMode
  std::string lldb_handshake();  // QStartNoAckMode, kLldbOffer, QThreadSuffixSupported, QListThreadsInStopReply

 private:
  std::vector<std::string> collect();

  std::shared_ptr<Wire> wire_ = std::make_shared<Wire>();
  std::unique_ptr<server::Server> server_;
  server::Session* session_ = nullptr;
  bool no_ack_ = false;
  std::string last_acks_;
  std::string last_order_;
  std::vector<std::string> notifications_;
};

}  // namespace fake
