// Session, general packets: negotiation, acks, '?', thread listing and selection, signal
// lists, unknown and malformed packets. Byte-exact, against a FakeProcess.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using fake::FakeProcess;
using fake::SessionHarness;
using fake::gdb_expedited;
using fake::hex_le;

TEST_CASE("session: qSupported from GDB lists GDB's features and picks the GDB dialect") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request(SessionHarness::kGdbOffer) ==
        "PacketSize=20000;QPassSignals+;QProgramSignals+;QStartupWithShell+;QEnvironmentHexEncoded+;"
        "QEnvironmentReset+;QEnvironmentUnset+;QSetWorkingDir+;binary-upload+;QCatchSyscalls+;QStartNoAckMode+;"
        "multiprocess+;fork-events+;vfork-events+;exec-events+;QNonStop+;QDisableRandomization+;ConditionalBreakpoints+;BreakpointCommands+;Qbtrace:bts+;"
        "Qbtrace-conf:bts:size+;Qbtrace:off+;swbreak+;hwbreak+;vContSupported+;QThreadOptions=3;QThreadEvents+;no-resumed+;stepbranch+;"
        "ConditionalTracepoints+;TraceStateVariables+;TracepointSource+;DisconnectedTracing+;InstallInTrace+;FastTracepoints+;"
        "EnableDisableTracepoints+;QTBuffer:size+;tracenz+;"
        "qXfer:features:read+;qXfer:auxv:read+;qXfer:libraries-svr4:read+;qXfer:siginfo:read+;"
        "qXfer:siginfo:write+;qXfer:threads:read+;qXfer:exec-file:read+;qXfer:osdata:read+;"
        "qXfer:btrace:read+;qXfer:btrace-conf:read+;qXfer:traceframe-info:read+");
  auto& d = h.session().dialect();
  CHECK_FALSE(d.lldb);
  CHECK(d.multiprocess);
  CHECK(d.swbreak);
  CHECK(d.hwbreak);
  CHECK(d.fork_events);
  CHECK(d.vfork_events);
  CHECK(d.exec_events);
  CHECK(d.no_resumed);
  // The dialect shows on the wire: thread ids with the process, GDB's signal numbers.
  CHECK(h.request("qC") == "QCp64.64");
}

TEST_CASE("session: qSupported from LLDB lists native-signals and no breakpoint kinds, picks LLDB") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request(SessionHarness::kLldbOffer) ==
        "PacketSize=20000;QPassSignals+;QProgramSignals+;QStartupWithShell+;QEnvironmentHexEncoded+;"
        "QEnvironmentReset+;QEnvironmentUnset+;QSetWorkingDir+;QCatchSyscalls+;QStartNoAckMode+;"
        "multiprocess+;fork-events+;vfork-events+;QNonStop+;QDisableRandomization+;native-signals+;ConditionalBreakpoints+;BreakpointCommands+;Qbtrace:bts+;"
        "Qbtrace-conf:bts:size+;Qbtrace:off+;vContSupported+;QThreadOptions=3;QThreadEvents+;stepbranch+;"
        "qXfer:features:read+;"
        "qXfer:auxv:read+;qXfer:libraries-svr4:read+;qXfer:siginfo:read+;qXfer:siginfo:write+;"
        "qXfer:threads:read+;qXfer:exec-file:read+;qXfer:osdata:read+;qXfer:btrace:read+;"
        "qXfer:btrace-conf:read+;qXfer:traceframe-info:read+");
  auto& d = h.session().dialect();
  CHECK(d.lldb);
  CHECK(d.multiprocess);
  CHECK_FALSE(d.swbreak);
  CHECK_FALSE(d.exec_events);
  CHECK_FALSE(d.no_resumed);
}

TEST_CASE("session: a bare qSupported gives no per-client features") {
  SessionHarness h;
  std::string reply = h.request("qSupported");
  CHECK(reply.rfind("PacketSize=20000;", 0) == 0);
  for (const char* absent : {"multiprocess+", "swbreak+", "hwbreak+", "fork-events+", "exec-events+", "no-resumed+"}) {
    INFO(absent);
    CHECK(reply.find(absent) == std::string::npos);
  }
  // Nothing says LLDB (its offer names arm, mips... in xmlRegisters): GDB's numbering.
  CHECK(reply.find("native-signals+") == std::string::npos);
}

TEST_CASE("session: acks, checksums and QStartNoAckMode on the wire") {
  SessionHarness h;
  h.add_process(0x64);
  h.send_raw("$qC#b4");
  CHECK(h.take_written() == "+$QC64#fe");
  h.send_raw("+");  // the client's ack of that reply: nothing answers an ack
  CHECK(h.take_written().empty());
  h.send_raw("$qC#00");  // bad checksum in ack mode: a '-' and nothing else
  CHECK(h.take_written() == "-");
  h.send_raw("-");  // the client asks again for the last reply
  CHECK(h.take_written() == "$QC64#fe");
  h.send_raw("$QStartNoAckMode#b0");
  CHECK(h.take_written() == "+$OK#9a");
  h.send_raw("+");  // GDB's one ack of that OK
  CHECK(h.take_written().empty());
  h.send_raw("$qC#b4");
  CHECK(h.take_written() == "$QC64#fe");
  h.send_raw("$qC#00");  // checksums are not checked without acks
  CHECK(h.take_written() == "$QC64#fe");
  h.send_raw("-");  // line noise without acks: nothing is sent again (it would pass for a reply)
  CHECK(h.take_written().empty());
}

TEST_CASE("session: two packets in one read are both answered, in order") {
  SessionHarness h;
  h.add_process(0x64, {0x64, 0x65});
  h.send_raw("$qC#b4$T65#bf");
  CHECK(h.take_written() == "+$QC64#fe+$OK#9a");
}

TEST_CASE("session: '?' reports the stop the process is in") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  p.set_reg(0x64, 6, 0x7ffe0010);
  p.set_reg(0x64, 7, 0x7ffe0000);
  p.set_reg(0x64, 16, 0x401000);
  // The initial stop: signal 0 in the main thread, plain thread ids before qSupported.
  CHECK(h.request("?") == "T00" + gdb_expedited(0x7ffe0010, 0x7ffe0000, 0x401000) + "thread:64;");
  h.gdb_handshake();
  CHECK(h.request("?") == "T00" + gdb_expedited(0x7ffe0010, 0x7ffe0000, 0x401000) + "thread:p64.64;");
}

TEST_CASE("session: '?' after a stop names the stop's thread, signal and core") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  p.add_thread(0x65, "worker", 3);
  p.set_reg(0x65, 16, 0x402000);
  h.gdb_handshake();
  p.stop_with(fake::signal_stop(0x64, 0x65, SIGUSR1));
  auto stop = h.round_trip("vCont;c");
  std::string expected = "T1e" + gdb_expedited(0, 0, 0x402000) + "thread:p64.65;core:3;";
  CHECK(stop == std::vector<std::string>{expected});
  CHECK(h.request("?") == expected);
  CHECK(h.request("qC") == "QCp64.65");  // the stop selected its thread
}

TEST_CASE("session: '?' never replays a fork or an exec: a plain SIGTRAP stop") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  auto exec = fake::stop_event(backend::StopKind::Exec, 0x64, 0x64, SIGTRAP);
  exec.exec_path = "/bin/x";
  p.stop_with(exec);
  CHECK(h.round_trip("vCont;c") ==
        std::vector<std::string>{"T05exec:2f62696e2f78;" + gdb_expedited(0, 0, 0) + "thread:p64.64;"});
  CHECK(h.request("?") == "T05" + gdb_expedited(0, 0, 0) + "thread:p64.64;");
}

TEST_CASE("session: '?' after the process exited gives its exit, W00 with nothing at all") {
  SECTION("exit status with the process") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    h.gdb_handshake();
    p.stop_with(fake::exit_event(0x64, 3));
    CHECK(h.round_trip("vCont;c") == std::vector<std::string>{"W03;process:64"});
    CHECK(h.request("?") == "W03;process:64");
  }
  SECTION("no multiprocess: the status alone") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    p.stop_with(fake::exit_event(0x64, 7));
    CHECK(h.round_trip("c") == std::vector<std::string>{"W07"});
    CHECK(h.request("?") == "W07");
  }
  SECTION("no process ever") {
    SessionHarness h;
    CHECK(h.request("?") == "W00");
  }
}

TEST_CASE("session: qC names the general thread") {
  SessionHarness h;
  h.add_process(0x64, {0x64, 0x65});
  CHECK(h.request("qC") == "QC64");
  CHECK(h.request("Hg65") == "OK");
  CHECK(h.request("qC") == "QC65");
  h.gdb_handshake();
  CHECK(h.request("qC") == "QCp64.65");
}

TEST_CASE("session: qfThreadInfo/qsThreadInfo list every thread, with the process when multiprocess") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65, 0x1a2b});
  CHECK(h.request("qfThreadInfo") == "m64,65,1a2b");
  CHECK(h.request("qsThreadInfo") == "l");
  h.gdb_handshake();
  CHECK(h.request("qfThreadInfo") == "mp64.64,p64.65,p64.1a2b");
  CHECK(h.request("qsThreadInfo") == "l");
  p.remove_thread(0x65);
  CHECK(h.request("qfThreadInfo") == "mp64.64,p64.1a2b");
}

TEST_CASE("session: qfThreadInfo lists a second process's threads after the first's") {
  SessionHarness h;
  h.add_process(0x64, {0x64, 0x65});
  h.add_process(0xc8, {0xc8});
  h.gdb_handshake();
  CHECK(h.request("qfThreadInfo") == "mp64.64,p64.65,pc8.c8");
}

TEST_CASE("session: T answers whether a thread is alive") {
  SessionHarness h;
  h.add_process(0x64, {0x64, 0x65});
  h.add_process(0xc8, {0xc8});
  CHECK(h.request("T65") == "OK");
  CHECK(h.request("T66") == "E.No such thread.");
  CHECK(h.request("T0") == "E.No such thread.");
  CHECK(h.request("T-1") == "E.No such thread.");
  CHECK(h.request("Tc8") == "OK");  // another process's thread
  CHECK(h.request("Tp64.65") == "OK");
  CHECK(h.request("Tpc8.65") == "E.No such thread.");  // that thread is not in that process
  CHECK(h.request("Tzz") == "E.T: bad thread id");      // malformed
}

TEST_CASE("session: Hg selects whose registers g reads, unknown threads are refused") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  p.set_reg(0x64, 0, 0x1111);
  p.set_reg(0x65, 0, 0x1122334455667788);
  CHECK(h.request("g").substr(0, 16) == "1111000000000000");
  CHECK(h.request("Hg65") == "OK");
  CHECK(h.request("g").substr(0, 16) == "8877665544332211");
  CHECK(h.request("p0") == "8877665544332211");
  CHECK(h.request("Hg66") == "E.No such thread.");
  CHECK(h.request("g").substr(0, 16) == "8877665544332211");  // unchanged
  CHECK(h.request("Hg0") == "OK");  // any thread: the one that stopped last
  CHECK(h.request("g").substr(0, 16) == "1111000000000000");
  CHECK(h.request("Hgp64.65") == "OK");
  CHECK(h.request("p0") == "8877665544332211");
  CHECK(h.request("Hgp99.65") == "E.No such process.");  // no such process
  CHECK(p.register_reads.back().first == 0x65);
}

TEST_CASE("session: Hc picks the thread a legacy step steps") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  CHECK(h.request("Hc65") == "OK");
  CHECK(h.request("Hc77") == "E.No such thread.");
  p.stop_with(fake::stop_event(backend::StopKind::Step, 0x64, 0x65, SIGTRAP));
  CHECK(h.round_trip("s").size() == 1);
  REQUIRE(p.resumes.size() == 1);
  const auto& plan = p.resumes[0];
  REQUIRE(plan.threads.size() == 1);
  CHECK(plan.threads.begin()->first == 0x65);
  CHECK(plan.threads.begin()->second.kind == backend::ResumeKind::Step);
  CHECK_FALSE(plan.others);
}

TEST_CASE("session: qAttached says how the process was started") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("qAttached") == "0");
  p.attached = true;
  CHECK(h.request("qAttached") == "1");
  CHECK(h.request("qAttached:64") == "1");
  CHECK(h.request("qAttached:zz") == "E.qAttached: bad pid");
}

TEST_CASE("session: qAttached:<pid> answers for that process, E01 for one we do not have") {
  SessionHarness h;
  h.add_process(0x64);
  h.add_process(0xc8).attached = true;
  h.gdb_handshake();
  CHECK(h.request("qAttached") == "0");  // the selected (main) process
  CHECK(h.request("qAttached:c8") == "1");
  CHECK(h.request("qAttached:64") == "0");
  CHECK(h.request("qAttached:99") == "E.No such process.");
}

TEST_CASE("session: QPassSignals/QProgramSignals in GDB's numbering reach the backend as Linux signals") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  // GDB numbers: 0xa SIGBUS (Linux 7), 0xe SIGALRM (14), 0x14 SIGCHLD (17), 0x1e SIGUSR1 (10).
  CHECK(h.request("QPassSignals:a;e;14;1e;") == "OK");
  REQUIRE(p.pass_signals.size() == 1);
  CHECK(p.pass_signals[0] == std::set<int>{SIGBUS, SIGALRM, SIGCHLD, SIGUSR1});
  CHECK(h.request("QProgramSignals:2;1e") == "OK");
  REQUIRE(p.program_signals.size() == 1);
  CHECK(p.program_signals[0] == std::set<int>{SIGINT, SIGUSR1});
  CHECK(h.request("QPassSignals:") == "OK");  // an empty list clears the set
  CHECK(p.pass_signals.back().empty());
  CHECK(h.request("QPassSignals:zz") == "E.QPassSignals: bad list");
  CHECK(p.pass_signals.size() == 2);
}

TEST_CASE("session: QPassSignals/QProgramSignals from LLDB are Linux numbers already") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.lldb_handshake();
  CHECK(h.request("QPassSignals:a;e;14;") == "OK");
  REQUIRE(p.pass_signals.size() == 1);
  CHECK(p.pass_signals[0] == std::set<int>{10, 14, 20});  // SIGUSR1, SIGALRM, SIGTSTP
  CHECK(h.request("QProgramSignals:11") == "OK");
  CHECK(p.program_signals.back() == std::set<int>{SIGCHLD});
}

TEST_CASE("session: QNonStop switches every process and the session") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("QNonStop:1") == "OK");
  CHECK(p.non_stop());
  CHECK(h.session().non_stop());
  CHECK(h.request("QNonStop:0") == "OK");
  CHECK_FALSE(p.non_stop());
  CHECK_FALSE(h.session().non_stop());
  CHECK(h.request("QNonStop:x") == "E.QNonStop: bad value");
  CHECK(h.request("vStopped") == "E.vStopped outside non-stop mode.");
}

TEST_CASE("session: unknown packets get the empty reply, malformed ones an error") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("vMustReplyEmpty") == "");
  CHECK(h.request("qFooBar") == "");
  CHECK(h.request("jThreadExtendedInfo:") == "");
  CHECK(h.request("Hx1") == "E.H: bad operation");
  CHECK(h.request("m1000") == "E.m: bad addr,len");
  CHECK(h.request("vCont;q") == "E.vCont: bad action");
  CHECK(p.calls() == fake::Journal{"configure"});  // nothing reached the backend
}

TEST_CASE("session: with LLDB's error strings a malformed packet says why") {
  SessionHarness h;
  h.add_process(0x64);
  h.lldb_handshake();
  CHECK(h.request("QEnableErrorStrings") == "OK");
  // "H: bad operation"
  CHECK(h.request("Hx1") == "E16;483a20626164206f7065726174696f6e");  // EINVAL
}

TEST_CASE("session: the process gets the server's settings when added") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  REQUIRE(p.configured);
  CHECK_FALSE(p.configured->watch_emulation);
  CHECK_FALSE(p.configured->singleblock);
  CHECK(p.configured->busy_poll.count() == 0);
}

TEST_CASE("session: settings for the next run are kept by the server") {
  SessionHarness h;
  CHECK(h.request("QEnvironmentHexEncoded:464f4f3d626172") == "OK");  // FOO=bar
  CHECK(h.request("QEnvironmentUnset:484f4d45") == "OK");              // HOME
  CHECK(h.request("QSetWorkingDir:2f746d70") == "OK");                 // /tmp
  CHECK(h.request("QDisableRandomization:0") == "OK");
  CHECK(h.request("QStartupWithShell:0") == "OK");
  auto& launch = h.server().launch_settings();
  CHECK(launch.env_set == std::map<std::string, std::string>{{"FOO", "bar"}});
  CHECK(launch.env_unset == std::set<std::string>{"HOME"});
  CHECK(launch.working_dir == std::optional<std::string>("/tmp"));
  CHECK_FALSE(launch.disable_randomization);
  CHECK_FALSE(launch.startup_with_shell);
  CHECK(h.request("QEnvironmentHexEncoded:464f4f") == "E.QEnvironmentHexEncoded: expected NAME=VALUE.");
  CHECK(h.request("QEnvironmentReset") == "OK");
  CHECK(launch.env_set.empty());
  CHECK(launch.env_unset.empty());
}

TEST_CASE("session: QCatchSyscalls reaches the backend") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("QCatchSyscalls:1;e7;3c") == "OK");
  REQUIRE(p.catch_syscalls.size() == 1);
  CHECK(p.catch_syscalls[0] == std::pair<bool, std::set<int>>{true, {0x3c, 0xe7}});
  CHECK(h.request("QCatchSyscalls:0") == "OK");
  CHECK(p.catch_syscalls.back() == std::pair<bool, std::set<int>>{false, {}});
}

TEST_CASE("session: a packet over the framer's limit is acked and answered E01") {
  SessionHarness h;
  h.add_process(0x64);
  std::string huge = "X1000,1:" + std::string(0x100000, 'a');
  h.send_raw(fake::frame(huge));
  CHECK(h.take_written() == "+$E.Packet too long.#3b");
  CHECK(h.request("qC") == "QC64");  // the stream is still in step
}

TEST_CASE("harness: the client side reads the server's framing independently") {
  // RLE: '0' then "*\"" = 34 - 29 = 5 more copies.
  auto out = fake::split_output("+$0*\"#7c-$OK#9a$OK#00");
  CHECK(out.acks == "+-");
  CHECK(out.packets == std::vector<std::string>{"000000", "OK", "OK"});
  CHECK(out.bad_checksum);  // the last one
  CHECK(out.stray.empty());
  CHECK(fake::frame("qC") == "$qC#b4");
  CHECK(fake::unescape("a}]b}\x03") == "a}b#");
}
