#include "tests/unit/server/session_harness.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>

namespace fake {

void TestTransport::start(ReadHandler on_data, CloseHandler on_close) {
  wire_->on_data = std::move(on_data);
  wire_->on_close = std::move(on_close);
}

std::string checksum_hex(std::string_view payload) {
  unsigned sum = 0;
  for (unsigned char c : payload) sum += c;
  return fmt::format("{:02x}", sum & 0xff);
}

std::string frame(std::string_view payload) { return "$" + std::string(payload) + "#" + checksum_hex(payload); }

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// "X*<n>": the byte before '*' repeated n-29 more times (GDB's read_frame).
std::string expand_rle(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] == '*' && i + 1 < body.size() && !out.empty()) {
      int n = static_cast<unsigned char>(body[i + 1]) - 29;
      out.append(static_cast<size_t>(n > 0 ? n : 0), out.back());
      ++i;
    } else {
      out += body[i];
    }
  }
  return out;
}

}  // namespace

ServerOutput split_output(std::string_view bytes) {
  ServerOutput out;
  size_t i = 0;
  while (i < bytes.size()) {
    char c = bytes[i];
    if (c == '+' || c == '-') {
      out.acks += c;
      ++i;
      continue;
    }
    if (c != '$' && c != '%') {
      out.stray += c;
      ++i;
      continue;
    }
    size_t hash = bytes.find('#', i + 1);
    if (hash == std::string_view::npos || hash + 3 > bytes.size()) {
      out.stray += std::string(bytes.substr(i));
      break;
    }
    std::string_view body = bytes.substr(i + 1, hash - i - 1);
    std::string_view cs = bytes.substr(hash + 1, 2);
    int hi = hex_digit(cs[0]), lo = hex_digit(cs[1]);
    unsigned sum = 0;
    for (unsigned char b : body) sum += b;
    if (hi < 0 || lo < 0 || static_cast<unsigned>(hi * 16 + lo) != (sum & 0xff)) out.bad_checksum = true;
    if (c == '%') {  // a notification: never run-length encoded
      out.notifications.emplace_back(body);
    } else {
      out.raw_packets.emplace_back(bytes.substr(i, hash + 3 - i));
      out.packets.push_back(expand_rle(body));
    }
    out.order.push_back(c);
    i = hash + 3;
  }
  return out;
}

std::string unescape(std::string_view escaped) {
  std::string out;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '}' && i + 1 < escaped.size()) out += static_cast<char>(escaped[++i] ^ 0x20);
    else out += escaped[i];
  }
  return out;
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

std::string hex_le(uint64_t value, size_t size) {
  std::string out;
  for (size_t i = 0; i < size; ++i, value >>= 8) out += fmt::format("{:02x}", static_cast<unsigned>(value & 0xff));
  return out;
}

std::string gdb_expedited(uint64_t rbp, uint64_t rsp, uint64_t rip) {
  return "06:" + hex_le(rbp, 8) + ";07:" + hex_le(rsp, 8) + ";10:" + hex_le(rip, 8) + ";";
}

// ---- SessionHarness ----

server::ServerOptions SessionHarness::default_options() {
  server::ServerOptions o;
  o.comm = "stdio";        // a closed connection ends the server (no listener to go back to)
  o.busy_poll_us = 0;      // every poll goes through the loop, where the test runs it
  o.watchpoints = "hardware";
  return o;
}

backend::ProbeReport SessionHarness::default_probe() {
  backend::ProbeReport r;
  r.debug_registers_work = true;
  r.btf_works = false;
  r.perf_bts_works = false;
  r.pt_works = false;
  r.best_source = "software";
  r.stepbranch_mechanism = "software";
  return r;
}

SessionHarness::SessionHarness(server::ServerOptions options)
    : server_(std::make_unique<server::Server>(std::move(options))) {
  server_->set_probe(default_probe());
}

SessionHarness::~SessionHarness() = default;

FakeProcess& SessionHarness::add_process(pid_t pid, std::vector<pid_t> tids) {
  return add_process(std::make_unique<FakeProcess>(pid, std::move(tids)));
}

FakeProcess& SessionHarness::add_process(std::unique_ptr<FakeProcess> p) {
  FakeProcess& ref = *p;
  server_->add_process(std::move(p));
  return ref;
}

void SessionHarness::connect() {
  if (!session_) session_ = &server_->serve(std::make_unique<TestTransport>(wire_));
}

server::Session& SessionHarness::session() {
  connect();
  return *session_;
}

std::string SessionHarness::take_written() {
  std::string out = std::move(wire_->written);
  wire_->written.clear();
  return out;
}

std::vector<std::string> SessionHarness::collect() {
  auto out = split_output(take_written());
  INFO("server wrote stray bytes: " << out.stray);
  CHECK(out.stray.empty());
  CHECK_FALSE(out.bad_checksum);
  last_acks_ = out.acks;
  for (auto& n : out.notifications) notifications_.push_back(std::move(n));
  last_order_ = out.order;
  return out.packets;
}

void SessionHarness::send_raw(std::string_view bytes) {
  connect();
  REQUIRE(wire_->on_data);
  wire_->on_data(bytes);
  auto& io = server_->io();
  if (io.stopped()) io.restart();  // poll() stops a loop that ran out of work
  io.poll();
}

std::vector<std::string> SessionHarness::poll() {
  auto& io = server_->io();
  if (io.stopped()) io.restart();
  io.poll();
  return collect();
}

std::vector<std::string> SessionHarness::wait(int ms) {
  auto& io = server_->io();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (wire_->written.find_first_of("$%") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    if (io.stopped()) io.restart();
    io.run_one_until(deadline);
  }
  return collect();
}

std::vector<std::string> SessionHarness::round_trip(std::string_view payload) {
  bool ack_mode = !no_ack_;
  send_raw(frame(payload));
  auto packets = collect();
  INFO("request: " << payload);
  CHECK(last_acks_ == (ack_mode ? "+" : ""));
  if (payload == "QStartNoAckMode" && packets.size() == 1 && packets[0] == "OK") no_ack_ = true;
  if (ack_mode && !packets.empty()) {  // a client acks each packet it read
    wire_->on_data(std::string(packets.size(), '+'));
    CHECK(collect().empty());  // acks are never answered
  }
  return packets;
}

std::string SessionHarness::request(std::string_view payload) {
  auto packets = round_trip(payload);
  if (packets.size() == 1) return packets[0];
  if (packets.empty()) return "<none>";
  std::string all = fmt::format("<{} packets>", packets.size());
  for (const auto& p : packets) all += " [" + p + "]";
  return all;
}

std::string SessionHarness::gdb_handshake() {
  std::string reply = request(kGdbOffer);
  CHECK(request("QStartNoAckMode") == "OK");
  return reply;
}

std::string SessionHarness::lldb_handshake() {
  CHECK(request("QStartNoAckMode") == "OK");
  std::string reply = request(kLldbOffer);
  CHECK(request("QThreadSuffixSupported") == "OK");
  CHECK(request("QListThreadsInStopReply") == "OK");
  return reply;
}

}  // namespace fake

namespace fake {
std::vector<std::string> SessionHarness::take_notifications() {
  auto out = std::move(notifications_);
  notifications_.clear();
  return out;
}
}  // namespace fake
