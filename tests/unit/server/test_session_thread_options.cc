// Session, QThreadOptions (GDB 15): the advertised mask, which threads an entry names, refusal
// of unknown options, and the clone stop and thread exit as replies (all-stop) and as %Stop
// notifications (non-stop). Byte-exact, against a FakeProcess.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::StopKind;
using backend::ThreadOptions;
using fake::FakeProcess;
using fake::SessionHarness;
using fake::gdb_expedited;
using fake::stop_event;
using Packets = std::vector<std::string>;

namespace {

constexpr ThreadOptions kNone{}, kClone{true, false}, kExit{false, true}, kBoth{true, true};

// A GDB session on process 0x64 with threads 0x64, 0x65, 0x66 (rbp/rsp/rip set in 0x65).
struct Setup {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65, 0x66});
  std::string regs65 = gdb_expedited(0x7ffe0010, 0x7ffe0000, 0x401000);
  Setup() {
    p.set_reg(0x65, 6, 0x7ffe0010);
    p.set_reg(0x65, 7, 0x7ffe0000);
    p.set_reg(0x65, 16, 0x401000);
    h.gdb_handshake();
  }
  bool options_are(ThreadOptions t64, ThreadOptions t65, ThreadOptions t66) {
    return p.thread_options(0x64) == t64 && p.thread_options(0x65) == t65 && p.thread_options(0x66) == t66;
  }
};

backend::StopEvent clone_event(pid_t parent, pid_t child) {
  auto ev = stop_event(StopKind::Clone, 0x64, parent, SIGTRAP);
  ev.child_pid = child;
  return ev;
}

}  // namespace

TEST_CASE("thread options: qSupported lists the mask gdbserver lists, whatever the offer") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request(SessionHarness::kGdbOffer).find(";vContSupported+;QThreadOptions=3;QThreadEvents+;") !=
        std::string::npos);
  // GDB 15 offers QThreadOptions+; GDB 13 does not; both are told the same.
  CHECK(h.request("qSupported:multiprocess+;swbreak+;QThreadOptions+").find(";QThreadOptions=3;") !=
        std::string::npos);
}

TEST_CASE("thread options: GDB 15's packet sets the named threads, the rightmost entry wins") {
  Setup s;
  // As GDB 15 sends it before a resume: everything cleared, then the threads with options.
  CHECK(s.h.request("QThreadOptions;0;3:p64.65") == "OK");
  CHECK(s.options_are(kNone, kBoth, kNone));
  CHECK(s.h.request("QThreadOptions;0") == "OK");
  CHECK(s.options_are(kNone, kNone, kNone));
  // A process wildcard, then one thread of it; a thread not named keeps its options.
  CHECK(s.h.request("QThreadOptions;2:p64.-1;1:p64.66") == "OK");
  CHECK(s.options_are(kExit, kExit, kClone));
  CHECK(s.h.request("QThreadOptions;3:p64.64") == "OK");
  CHECK(s.options_are(kBoth, kExit, kClone));
  // Every thread ("p-1.-1", no thread at all), and a thread id without a process (the
  // selected one's).
  CHECK(s.h.request("QThreadOptions;3:p-1.-1;0:65") == "OK");
  CHECK(s.options_are(kBoth, kNone, kBoth));
  CHECK(s.h.request("QThreadOptions;1") == "OK");
  CHECK(s.options_are(kClone, kClone, kClone));
  // Another process's id names none of these threads.
  CHECK(s.h.request("QThreadOptions;0:p99.-1") == "OK");
  CHECK(s.options_are(kClone, kClone, kClone));
}

TEST_CASE("thread options: an unknown option refuses the whole packet, as gdbserver") {
  Setup s;
  CHECK(s.h.request("QThreadOptions;3:p64.65") == "OK");
  CHECK(s.h.request("QThreadOptions;0;4:p64.65") == "E.Unknown thread options requested: 0x4");
  CHECK(s.options_are(kNone, kBoth, kNone));  // nothing changed, not even the ";0"
  CHECK(s.h.request("QThreadOptions;3:zz").rfind("E.", 0) == 0);
  CHECK(s.h.request("QThreadOptions").empty());  // not this packet
}

TEST_CASE("thread options: all-stop clone stop and thread exit replies") {
  Setup s;
  CHECK(s.h.request("QThreadOptions;0;3:p64.65") == "OK");
  // The parent (0x65) reports the clone, naming the new thread (0x67).
  s.p.add_thread(0x67);
  s.p.stop_with(clone_event(0x65, 0x67));
  CHECK(s.h.round_trip("vCont;c") == Packets{"T05clone:p64.67;" + s.regs65 + "thread:p64.65;"});
  // '?' never replays the clone (GDB would follow it again): the parent is only stopped.
  CHECK(s.h.request("?") == "T05" + s.regs65 + "thread:p64.65;");
  CHECK(s.h.request("QThreadOptions;0;3:p64.65;3:p64.67") == "OK");
  auto exited = stop_event(StopKind::ThreadExited, 0x64, 0x67, 0);
  exited.exit_status = 0;
  s.p.stop_with(exited);
  CHECK(s.h.round_trip("vCont;c") == Packets{"w0;p64.67"});
}

TEST_CASE("thread options: non-stop clone and exit come as %Stop notifications") {
  Setup s;
  REQUIRE(s.h.request("QNonStop:1") == "OK");
  CHECK(s.h.request("QThreadOptions;0;3:p64.65") == "OK");
  CHECK(s.h.request("vCont;c:p64.65") == "OK");
  s.p.add_thread(0x67);
  s.p.stop_with(clone_event(0x65, 0x67));
  auto exited = stop_event(StopKind::ThreadExited, 0x64, 0x66, 0);
  exited.exit_status = 0;
  s.p.stop_with(exited);
  s.h.wait();
  for (int i = 0; i < 100 && s.p.events_waiting(); ++i) s.h.wait(50);
  CHECK(s.h.take_notifications() == Packets{"Stop:T05clone:p64.67;" + s.regs65 + "thread:p64.65;"});
  CHECK(s.h.request("vStopped") == "w0;p64.66");
  CHECK(s.h.request("vStopped") == "OK");
}

TEST_CASE("thread options: the new thread is out of qXfer:threads until its parent runs on") {
  // gdbserver's handle_qxfer_threads_worker leaves out a thread whose clone parent is still
  // stopped at the clone event.
  Setup s;
  CHECK(s.h.request("QThreadOptions;0;3:p64.65") == "OK");
  s.p.add_thread(0x67);
  s.p.stop_with(clone_event(0x65, 0x67));
  CHECK(s.h.round_trip("vCont;c").size() == 1);
  std::string listed = s.h.request("qXfer:threads:read::0,1000");
  CHECK(listed.find("p64.66") != std::string::npos);
  CHECK(listed.find("p64.67") == std::string::npos);
  s.p.stop_with(stop_event(StopKind::Signal, 0x64, 0x65, SIGUSR1));
  CHECK(s.h.round_trip("vCont;c").size() == 1);
  CHECK(s.h.request("qXfer:threads:read::0,1000").find("p64.67") != std::string::npos);
}
