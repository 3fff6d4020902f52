// Parsing the general packets (protocol/packets/general.h) and thread ids.
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("thread ids", "[packets][general]") {
  CHECK(parse_thread_id("p1a.1b") == ThreadId{0x1a, 0x1b});
  CHECK(parse_thread_id("p1a.-1") == ThreadId{0x1a, -1});
  CHECK(parse_thread_id("p1a") == ThreadId{0x1a, -1});
  CHECK(parse_thread_id("p-1.-1") == ThreadId{-1, -1});
  CHECK(parse_thread_id("-1") == ThreadId{std::nullopt, -1});
  CHECK(parse_thread_id("0")->is_any());
  CHECK(parse_thread_id("1b") == ThreadId{std::nullopt, 0x1b});
  CHECK_FALSE(parse_thread_id(""));
  CHECK_FALSE(parse_thread_id("p"));
  CHECK_FALSE(parse_thread_id("p1."));
  CHECK_FALSE(parse_thread_id("xyz"));
  CHECK_FALSE(parse_thread_id("-2"));
  CHECK_FALSE(parse_thread_id("ffffffff"));
  CHECK(format_thread_id(0x1182, 0x1183, true) == "p1182.1183");
  CHECK(format_thread_id(0x1182, 0x1183, false) == "1183");
  CHECK(format_thread_id(1, -1, true) == "p1.-1");
}

TEST_CASE("general queries", "[packets][general]") {
  auto q = as<QuerySupported>(
      "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;xmlRegisters=i386");
  REQUIRE(q.features.size() == 6);
  CHECK(q.features[0] == "multiprocess+");
  CHECK(q.features[5] == "xmlRegisters=i386");
  CHECK(as<QuerySupported>("qSupported").features.empty());
  as<MustReplyEmpty>("vMustReplyEmpty");
  as<StartNoAckMode>("QStartNoAckMode");
  as<EnableExtendedMode>("!");
  as<QueryHaltReason>("?");
  as<QueryCurrentThread>("qC");
  as<ThreadInfoFirst>("qfThreadInfo");
  as<ThreadInfoNext>("qsThreadInfo");
  CHECK_FALSE(as<QueryAttached>("qAttached").pid);
  CHECK(as<QueryAttached>("qAttached:1182").pid == 0x1182);
  CHECK(malformed("qAttached:zz"));
  as<QueryOffsets>("qOffsets");
  CHECK(as<QuerySymbol>("qSymbol::").raw == ":");
  as<TraceStatusQuery>("qTStatus");
  CHECK(as<SetNonStop>("QNonStop:1").on);
  CHECK_FALSE(as<SetNonStop>("QNonStop:0").on);
  CHECK(unknown("qCRC:0,10"));
  CHECK(unknown("qTfX"));
  CHECK(unknown(""));
  CHECK(unknown("qSupportedX"));
}

TEST_CASE("H and T", "[packets][general]") {
  auto h = as<SetThread>("Hgp0.0");
  CHECK(h.op == 'g');
  CHECK(h.thread.pid == 0);
  CHECK(h.thread.is_any());
  auto c = as<SetThread>("Hc-1");
  CHECK(c.op == 'c');
  CHECK(c.thread.is_all());
  CHECK(as<SetThread>("Hgp1182.1183").thread.tid == 0x1183);
  CHECK(malformed("Hx1"));
  CHECK(malformed("Hg"));
  CHECK(as<ThreadAlive>("Tp1.2").thread == ThreadId{1, 2});
  CHECK(malformed("T"));
}

TEST_CASE("signal lists and switches", "[packets][general]") {
  CHECK(as<SetPassSignals>("QPassSignals:e;10;14;17;1a;97;").gdb_signals == std::vector<int>{0xe, 0x10, 0x14, 0x17, 0x1a, 0x97});
  CHECK(as<SetPassSignals>("QPassSignals:").gdb_signals.empty());
  CHECK(as<SetProgramSignals>("QProgramSignals:0;1;3;").gdb_signals == std::vector<int>{0, 1, 3});
  CHECK(malformed("QPassSignals:zz;"));
  CHECK(as<SetDisableRandomization>("QDisableRandomization:1").on);
  CHECK_FALSE(as<SetStartupWithShell>("QStartupWithShell:0").on);
  CHECK(malformed("QStartupWithShell:"));
  CHECK(as<SetEnvironment>("QEnvironmentHexEncoded:413d31").var_eq_value == "A=1");
  CHECK(as<UnsetEnvironment>("QEnvironmentUnset:41").var == "A");
  as<ResetEnvironment>("QEnvironmentReset");
  CHECK(as<SetWorkingDir>("QSetWorkingDir:").dir.empty());
  CHECK(as<SetWorkingDir>("QSetWorkingDir:2f746d70").dir == "/tmp");
  auto cs = as<SetCatchSyscalls>("QCatchSyscalls:1;27;3c");
  CHECK(cs.on);
  CHECK(cs.syscalls == std::vector<int>{0x27, 0x3c});
  CHECK(as<SetCatchSyscalls>("QCatchSyscalls:1").syscalls.empty());
  CHECK_FALSE(as<SetCatchSyscalls>("QCatchSyscalls:0").on);
  CHECK(as<SetThreadEvents>("QThreadEvents:1").on);
}

TEST_CASE("qExecAndArgs (GDB 18)", "[packets][general]") {
  as<QueryExecAndArgs>("qExecAndArgs");
  CHECK(unknown("qExecAndArgs:1"));
}

TEST_CASE("QThreadOptions", "[packets][general]") {
  using E = ThreadOptionsEntry;
  // GDB 15's commit_requested_thread_options(): ";0" clears every thread, then one entry per
  // thread with options, the rightmost entry that matches a thread winning.
  CHECK(as<SetThreadOptions>("QThreadOptions;0;3:p1a2b.1a2c").entries ==
        std::vector<E>{{0, std::nullopt}, {3, ThreadId{0x1a2b, 0x1a2c}}});
  CHECK(as<SetThreadOptions>("QThreadOptions;0").entries == std::vector<E>{{0, std::nullopt}});
  CHECK(as<SetThreadOptions>("QThreadOptions;2:p5.-1;1:7").entries ==
        std::vector<E>{{2, ThreadId{5, -1}}, {1, ThreadId{std::nullopt, 7}}});
  // As gdbserver, options left out are 0: "QThreadOptions;" clears every thread.
  CHECK(as<SetThreadOptions>("QThreadOptions;").entries == std::vector<E>{{0, std::nullopt}});
  CHECK(as<SetThreadOptions>("QThreadOptions;3;").entries == std::vector<E>{{3, std::nullopt}, {0, std::nullopt}});
  CHECK(as<SetThreadOptions>("QThreadOptions;:p1.2").entries == std::vector<E>{{0, ThreadId{1, 2}}});
  // Unknown bits parse: the handler refuses them (gdbserver's "Unknown thread options").
  CHECK(as<SetThreadOptions>("QThreadOptions;4").entries == std::vector<E>{{4, std::nullopt}});
  CHECK(malformed("QThreadOptions;zz"));
  CHECK(malformed("QThreadOptions;3:"));
  CHECK(malformed("QThreadOptions;3:xyz"));
  CHECK(malformed("QThreadOptions;11111111111111111"));  // more than 64 bits
  // No ';': not this packet (gdbserver answers it empty).
  CHECK(unknown("QThreadOptions"));
  CHECK(unknown("QThreadOptions:3"));
}

TEST_CASE("QThreadOptions needs its capability", "[packets][general]") {
  Capabilities base;
  CHECK(std::holds_alternative<Unknown>(parse_request("QThreadOptions;0", base)));
  base.set(Capability::ThreadOptions);
  CHECK(std::holds_alternative<SetThreadOptions>(parse_request("QThreadOptions;0", base)));
}
