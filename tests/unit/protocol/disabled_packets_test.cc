#include <catch2/catch.hpp>

#include "protocol/disabled_packets.h"
#include "protocol/replies.h"

using namespace protocol;

TEST_CASE("disable-packet lists", "[disabled_packets]") {
  auto none = parse_disabled_packets("");
  REQUIRE(none);
  CHECK(*none == DisabledPackets{});

  auto t = parse_disabled_packets("T");
  REQUIRE(t);
  CHECK(t->t_stop);
  CHECK_FALSE(t->t_thread);
  CHECK_FALSE(t->vcont);

  auto two = parse_disabled_packets("T,qfThreadInfo");
  REQUIRE(two);
  CHECK(two->t_stop);
  CHECK(two->qf_thread_info);
  CHECK_FALSE(two->qc);

  // "threads" is vCont, Tthread, qC and qfThreadInfo; not T.
  auto threads = parse_disabled_packets("threads");
  REQUIRE(threads);
  CHECK(threads->vcont);
  CHECK(threads->t_thread);
  CHECK(threads->qc);
  CHECK(threads->qf_thread_info);
  CHECK_FALSE(threads->t_stop);

  auto skips_empty = parse_disabled_packets(",vCont,,qC,");
  REQUIRE(skips_empty);
  CHECK(skips_empty->vcont);
  CHECK(skips_empty->qc);

  std::string bad;
  CHECK_FALSE(parse_disabled_packets("vCont,Tthreads", &bad));
  CHECK(bad == "Tthreads");
  CHECK_FALSE(parse_disabled_packets("vcont", &bad));  // names are case-sensitive, as in gdbserver
  CHECK(bad == "vcont");
  CHECK(disableable_packets_text().rfind("Disableable packets:\n", 0) == 0);
}

TEST_CASE("disabled packets are the ones gdbserver drops", "[disabled_packets]") {
  DisabledPackets d;
  d.vcont = true;
  CHECK(is_disabled(parse_request("vCont?"), d));
  CHECK(is_disabled(parse_request("vCont;c"), d));
  CHECK(is_disabled(parse_request("vCtrlC"), d));
  CHECK(is_disabled(parse_request("vCont;x"), d));  // malformed, still not looked at
  CHECK_FALSE(is_disabled(parse_request("vCont;x"), DisabledPackets{}));
  CHECK_FALSE(is_disabled(parse_request("m12"), d));
  CHECK_FALSE(is_disabled(parse_request("c"), d));
  CHECK_FALSE(is_disabled(parse_request("qC"), d));

  DisabledPackets q;
  q.qc = true;
  q.qf_thread_info = true;
  CHECK(is_disabled(parse_request("qC"), q));
  CHECK(is_disabled(parse_request("qfThreadInfo"), q));
  CHECK(is_disabled(parse_request("qsThreadInfo"), q));
  CHECK_FALSE(is_disabled(parse_request("vCont?"), q));
  CHECK_FALSE(is_disabled(parse_request("qXfer:threads:read::0,1000"), q));

  CHECK_FALSE(is_disabled(parse_request("qC"), DisabledPackets{}));
}

TEST_CASE("stop replies without T or without thread", "[disabled_packets][replies]") {
  StopReply s;
  s.gdb_signal = 5;
  s.pid = 0x10;
  s.tid = 0x11;
  s.reason = StopReason::Breakpoint;
  s.registers.push_back({6, {1, 0, 0, 0, 0, 0, 0, 0}});
  s.core = 3;
  Dialect d;
  d.swbreak = true;
  d.multiprocess = true;
  CHECK(format_stop_reply(s, d) == "T05swbreak:;06:0100000000000000;thread:p10.11;core:3;");

  d.disabled.t_thread = true;
  CHECK(format_stop_reply(s, d) == "T05swbreak:;06:0100000000000000;");

  d.disabled.t_stop = true;  // T wins over Tthread: nothing but the signal
  CHECK(format_stop_reply(s, d) == "S05");
  s.gdb_signal = 0x0b;
  s.reason = StopReason::Signal;
  CHECK(format_stop_reply(s, d) == "S0b");
  s.reason = StopReason::Fork;  // events too: gdbserver cuts every T reply to three characters
  s.child_pid = s.child_tid = 0x20;
  CHECK(format_stop_reply(s, d) == "S0b");

  // Exit replies are not T replies: unchanged.
  ExitReply e{0x10, 7, false, 0};
  CHECK(format_exit_reply(e, d) == "W07;process:10");
}
