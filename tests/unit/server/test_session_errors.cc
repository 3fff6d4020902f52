// Session without a process (none yet, or the one there was has exited): every handler
// answers with an error or its documented no-process reply, never crashes, and a process
// that is gone is never called.
#include <catch2/catch.hpp>

#include "tests/unit/server/session_harness.h"

using fake::SessionHarness;

namespace {

struct Case {
  const char* request;
  const char* reply;
};

// What each request gets when there is no live process.
constexpr Case kNoProcess[] = {
    {"qC", "E.No process."},
    {"qfThreadInfo", "l"},
    {"qsThreadInfo", "l"},
    {"T64", "E.No such thread."},
    {"Hg64", "E.No process."},
    {"Hc64", "E.No process."},
    {"Hgp64.64", "E.No process."},
    {"qAttached", "E.No such process."},
    {"QPassSignals:e", "OK"},
    {"QProgramSignals:e", "OK"},
    {"QCatchSyscalls:1", "OK"},
    {"QNonStop:0", "OK"},
    {"g", "E.No process."},
    {"G00", "E.No process."},
    {"p10", "E.No process."},
    {"P10=0000000000000000", "E.No process."},
    {"m1000,4", "E03"},  // a numeric code: GDB 13 takes no text from m (nor from x)
    {"x1000,4", "E03"},
    {"x0,0", "b"},       // nothing to read: GDB's empty x reply
    {"M1000,1:00", "E.No process."},
    {"X1000,1:a", "E.No process."},
    {"vCont;c", "E.No process."},
    {"vCont;s:p64.64", "E.No process."},
    {"c", "E.No process."},
    {"s", "E.No process."},
    {"C0b", "E.No process."},
    {"S0b;401000", "E.No process."},
    {"stepbranch", "E.No process."},
    {"D", "E.No such process."},
    {"D;64", "E.No such process."},
    {"Z0,401000,1", "E.No process."},
    {"z0,401000,1", "E.No process."},
    {"Z2,601040,4", "E.No process."},
    {"qXfer:features:read:target.xml:0,fff", "E.No process."},
    {"qXfer:threads:read::0,fff", "E.No process."},
    {"qXfer:auxv:read::0,fff", "E.No process."},
    {"qXfer:exec-file:read::0,fff", "E.No process."},
    {"qXfer:libraries-svr4:read::0,fff", "E.No process."},
    {"qXfer:siginfo:read::0,80", "E.No process."},
    {"qXfer:siginfo:write::0:a", "E.No such thread."},
    {"qXfer:btrace:read:all:0,fff", "E.No such thread."},
    {"qXfer:btrace-conf:read::0,fff", "E.Btrace not enabled."},
    {"Qbtrace:bts", "E.No such thread."},
    {"Qbtrace:off", "E.No such thread."},
    {"Qbtrace-conf:bts:size=0x1000", "OK"},
    // LLDB-only packets: from here on the client counts as LLDB (errno codes, no texts).
    {"qProcessInfo", "E03"},
    {"qMemoryRegionInfo:1000", "E03"},
    {"jThreadsInfo", "E03"},
    {"qThreadStopInfo64", "E03"},
    {"qWatchpointSupportInfo:", "num:4;"},
    {"qGetTLSAddr:64,0,0", "E03"},
    {"vCtrlC", "OK"},
    {"vRun;", "E01"},  // EPERM: vRun needs extended-remote
    {"R00", ""},
};

void check_all(SessionHarness& h) {
  for (const auto& c : kNoProcess) {
    INFO("request: " << c.request);
    CHECK(h.request(c.request) == c.reply);
  }
}

}  // namespace

TEST_CASE("errors: no process yet") {
  SessionHarness h;
  h.gdb_handshake();
  check_all(h);
  CHECK(h.request("?") == "W00");
  CHECK(h.request("k") == "X09");
  CHECK(h.request("vKill;64") == "E03");
}

TEST_CASE("errors: the process has exited") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  h.gdb_handshake();
  p.stop_with(fake::exit_event(0x64, 0));
  CHECK(h.round_trip("vCont;c") == std::vector<std::string>{"W00;process:64"});
  CHECK(h.request("?") == "W00;process:64");
  auto journal = p.journal;
  size_t calls = journal->size();
  check_all(h);
  CHECK(journal->size() == calls);  // nothing reached the dead process
  // vKill forgets it (the backend's kill() does nothing to a process that is gone).
  CHECK(h.request("vKill;64") == "OK");
  CHECK(h.server().process_for(0x64) == nullptr);
  CHECK(h.request("?") == "W00");
}

TEST_CASE("errors: monitor commands that need a process say so") {
  SessionHarness h;
  // "No process.\n" as console output, then OK.
  const std::string no_process = "O4e6f2070726f636573732e0a";
  CHECK(h.round_trip("qRcmd,62747261636520737461747573") == std::vector<std::string>{no_process, "OK"});  // btrace status
  CHECK(h.round_trip("qRcmd,737465706272616e6368") == std::vector<std::string>{no_process, "OK"});  // stepbranch
  CHECK(h.round_trip("qRcmd,6c6272") == std::vector<std::string>{no_process, "OK"});  // lbr
}

TEST_CASE("errors: the connection closing with no process ends the server's loop") {
  SessionHarness h;
  h.connect();
  h.wire().on_close();
  CHECK(h.server().io().stopped());
}
