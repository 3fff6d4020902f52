// Session, non-stop: QNonStop, '?' listing every stopped thread, vCont answered OK with the
// stops as %Stop notifications drained by vStopped, vCont;t, vCtrlC, QThreadEvents, 'N'.
#include <catch2/catch.hpp>

#include <csignal>

#include "tests/unit/server/session_harness.h"

using backend::ResumeKind;
using backend::StopKind;
using fake::FakeProcess;
using fake::SessionHarness;
using fake::gdb_expedited;
using fake::hex_le;
using fake::stop_event;
using Packets = std::vector<std::string>;

namespace {

// A GDB session in non-stop on process 0x64 with threads 0x64, 0x65, 0x66.
struct NonStop {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65, 0x66});
  std::string regs65 = gdb_expedited(0x7ffe0010, 0x7ffe0000, 0x401000);
  std::string zero = gdb_expedited(0, 0, 0);
  NonStop() {
    p.set_reg(0x65, 6, 0x7ffe0010);
    p.set_reg(0x65, 7, 0x7ffe0000);
    p.set_reg(0x65, 16, 0x401000);
    p.set_last_stop(stop_event(StopKind::Signal, 0x64, 0x64, SIGTRAP));
    h.gdb_handshake();
    REQUIRE(h.request("QNonStop:1") == "OK");
  }
};

}  // namespace

TEST_CASE("non-stop: '?' answers the first stopped thread, vStopped the others, then OK") {
  NonStop n;
  CHECK(n.h.request("?") == "T05" + n.zero + "thread:p64.64;");
  CHECK(n.h.request("vStopped") == "T00" + n.regs65 + "thread:p64.65;");
  CHECK(n.h.request("vStopped") == "T00" + n.zero + "thread:p64.66;");
  CHECK(n.h.request("vStopped") == "OK");
  CHECK(n.h.request("vStopped") == "OK");  // nothing left: OK again
  CHECK(n.h.take_notifications().empty());
}

TEST_CASE("non-stop: vCont answers OK, the stop comes as %Stop, the next one waits for vStopped") {
  NonStop n;
  CHECK(n.h.request("vCont;c:p64.65") == "OK");
  REQUIRE(n.p.resumes.size() == 1);
  CHECK(n.p.resumes[0].threads.count(0x65));
  CHECK_FALSE(n.p.resumes[0].others);  // the others stay as they are
  CHECK(n.p.thread_running(0x65));
  CHECK_FALSE(n.p.thread_running(0x64));

  CHECK(n.h.request("vCont;c:p64.66") == "OK");
  // Both threads stop: only the first is notified...
  n.p.stop_with(stop_event(StopKind::Breakpoint, 0x64, 0x65, SIGTRAP));
  n.p.stop_with(stop_event(StopKind::Signal, 0x64, 0x66, SIGUSR1));
  n.h.wait();
  n.h.wait(100);
  CHECK(n.h.take_notifications() == Packets{"Stop:T05swbreak:;" + n.regs65 + "thread:p64.65;"});
  // ... the second is the answer to the client's vStopped.
  CHECK(n.h.request("vStopped") == "T1e" + n.zero + "thread:p64.66;");  // GDB's SIGUSR1
  CHECK(n.h.request("vStopped") == "OK");
  CHECK(n.h.take_notifications().empty());
  // A stop after the queue drained is a notification again.
  CHECK(n.h.request("vCont;c") == "OK");
  n.p.stop_with(stop_event(StopKind::Signal, 0x64, 0x64, SIGSEGV));
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T0b" + n.zero + "thread:p64.64;"});
}

TEST_CASE("non-stop: vCont t stops one thread (signal 0), reported after the OK") {
  NonStop n;
  CHECK(n.h.request("vCont;c") == "OK");
  CHECK(n.p.resumed_threads() == std::set<pid_t>{0x64, 0x65, 0x66});
  CHECK(n.h.round_trip("vCont;t:p64.65") == Packets{"OK"});
  REQUIRE(n.p.resumes.size() == 2);
  REQUIRE(n.p.resumes[1].threads.count(0x65));
  CHECK(n.p.resumes[1].threads.at(0x65).kind == ResumeKind::Stop);
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T00" + n.regs65 + "thread:p64.65;"});
  CHECK(n.p.resumed_threads() == std::set<pid_t>{0x64, 0x66});
  // Registers of a stopped thread are read while the others run.
  CHECK(n.h.request("Hgp64.65") == "OK");
  CHECK(n.h.request("g").size() > 100);
}

TEST_CASE("non-stop: a stop found while answering goes out after the reply") {
  auto options = SessionHarness::default_options();
  options.busy_poll_us = 100000;  // the handler polls: the stop is read before it returns
  SessionHarness h(options);
  if (h.server().busy_poll().count() == 0) {
    WARN("one CPU: the server never busy-polls here");
    return;
  }
  auto& p = h.add_process(0x64, {0x64, 0x65});
  h.gdb_handshake();
  REQUIRE(h.request("QNonStop:1") == "OK");
  CHECK(h.request("vCont;c") == "OK");
  p.stop_with(stop_event(StopKind::Signal, 0x64, 0x65, 0));
  h.send_raw(fake::frame("vCont;t:p64.65"));
  CHECK(h.poll() == Packets{"OK"});
  CHECK(h.last_order() == "$%");
  CHECK(h.take_notifications().size() == 1);
}

TEST_CASE("non-stop: vCtrlC stops a running thread with SIGINT, ^C too") {
  NonStop n;
  CHECK(n.h.request("vCont;c") == "OK");
  CHECK(n.h.request("vCtrlC") == "OK");
  CHECK(n.p.count("interrupt") == 1);
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T02" + n.zero + "thread:p64.64;"});
  CHECK(n.h.request("vStopped") == "OK");
  n.h.send_raw("\x03");
  CHECK(n.p.count("interrupt") == 2);
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T02" + n.regs65 + "thread:p64.65;"});
}

TEST_CASE("non-stop: thread events, 'N', exits and stepbranch") {
  NonStop n;
  CHECK(n.h.request("QThreadEvents:1") == "OK");
  CHECK(n.p.thread_events == std::vector<bool>{true});
  CHECK(n.h.request("vCont;c:p64.65;c:p64.66") == "OK");
  auto created = stop_event(StopKind::ThreadCreated, 0x64, 0x65, SIGTRAP);
  auto exited = stop_event(StopKind::ThreadExited, 0x64, 0x66, 0);
  exited.exit_status = 0;
  n.p.stop_with(created);
  n.p.stop_with(exited);
  n.p.stop_with(stop_event(StopKind::NoResumed, 0x64, 0, 0));
  n.h.wait();
  // The server takes one event per poll (a 50 ms timer): until it has taken all three (a loaded
  // machine may need more than two polls), the vStopped below would find the queue short.
  for (int i = 0; i < 100 && n.p.events_waiting(); ++i) n.h.wait(50);
  CHECK(n.h.take_notifications() == Packets{"Stop:T05create:;" + n.regs65 + "thread:p64.65;"});
  CHECK(n.h.request("vStopped") == "w0;p64.66");
  CHECK(n.h.request("vStopped") == "N");
  CHECK(n.h.request("vStopped") == "OK");
  CHECK(n.h.request("QThreadEvents:0") == "OK");
  CHECK(n.p.thread_events == std::vector<bool>{true, false});
  // stepbranch answers with a stop reply to its own packet: all-stop only.
  CHECK(n.h.request("stepbranch") == "E.stepbranch needs all-stop mode (set non-stop off).");
  CHECK(n.h.request("vCont;c:p64.64") == "OK");
  n.p.stop_with(fake::exit_event(0x64, 3));
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:W03;process:64"});
}

TEST_CASE("non-stop: a stop (vCont action t) for threads of processes that are gone is OK (gdbserver)") {
  // GDB, after one process's exit, stops every thread it believes runs: those of processes
  // whose exits still wait in the notification queue too (gdb.multi/multi-exit.exp).
  NonStop n;
  auto& second = n.h.add_process(0xc8, {0xc8});
  CHECK(n.h.request("vCont;c") == "OK");
  second.stop_with(fake::exit_event(0xc8, 0));
  n.h.wait();
  for (int i = 0; i < 100 && second.events_waiting(); ++i) n.h.wait(50);
  CHECK(n.h.take_notifications() == Packets{"Stop:W00;process:c8"});
  n.p.stop_with(fake::exit_event(0x64, 0));
  for (int i = 0; i < 100 && n.p.events_waiting(); ++i) n.h.wait(50);
  CHECK(n.h.request("vCont;t:pc8.c8") == "OK");  // its exit was reported
  CHECK(n.h.request("vCont;t:p64.64") == "OK");  // its exit waits in the queue
  CHECK(n.h.request("vStopped") == "W00;process:64");
  CHECK(n.h.request("vStopped") == "OK");
  CHECK(n.p.resumes.size() == 1);  // nothing resumed or stopped after the vCont;c
}

TEST_CASE("StopNotifications: one in flight, the rest through vStopped") {
  server::StopNotifications q;
  CHECK(q.push("T05a"));       // sent now
  CHECK_FALSE(q.push("T05b"));  // waits
  CHECK_FALSE(q.push("T05c"));
  CHECK(q.acknowledge() == "T05b");
  CHECK(q.acknowledge() == "T05c");
  CHECK(q.acknowledge() == std::nullopt);
  CHECK(q.push("T05d"));  // empty again: the next is a notification
  CHECK(q.restart({"T00x", "T00y"}) == "T00x");  // '?' replaces what was queued
  CHECK(q.acknowledge() == "T00y");
  CHECK(q.acknowledge() == std::nullopt);
  CHECK(q.restart({}) == std::nullopt);
}

TEST_CASE("non-stop: stepbranch-next is refused, the client's step stays a step of that thread alone") {
  NonStop n;
  // In non-stop GDB steps over a breakpoint out of line (displaced stepping: the instruction
  // copied to a scratch pad); a run to the next branch from there would execute the pad.
  CHECK(n.h.request("Qbranchstub:stepbranch-next:p64.65,2") == "E.stepbranch needs all-stop mode (set non-stop off).");
  CHECK(n.h.request("vCont;s:p64.65") == "OK");
  CHECK(n.p.step_branches.empty());
  REQUIRE(n.p.resumes.size() == 1);
  REQUIRE(n.p.resumes[0].threads.count(0x65));
  CHECK(n.p.resumes[0].threads.at(0x65).kind == ResumeKind::Step);
  CHECK_FALSE(n.p.resumes[0].others);
  n.p.stop_with(stop_event(StopKind::Step, 0x64, 0x65, SIGTRAP));
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T05" + n.regs65 + "thread:p64.65;"});
  CHECK(n.h.request("qbranchstub:stepbranch-last") == "none");
  CHECK(n.h.request("vStopped") == "OK");
}

TEST_CASE("non-stop: a held fork child waits until its forking thread itself goes on") {
  NonStop n;
  auto child = std::make_unique<FakeProcess>(0x1c8, std::vector<pid_t>{0x1c8});
  auto c = child->journal;
  n.p.add_fork_child(std::move(child));
  CHECK(n.h.request("vCont;c") == "OK");
  auto vfork = stop_event(StopKind::VFork, 0x64, 0x65, SIGTRAP);
  vfork.child_pid = 0x1c8;
  n.p.stop_with(vfork);
  n.h.wait();
  CHECK(n.h.take_notifications() == Packets{"Stop:T05vfork:p1c8.1c8;" + n.regs65 + "thread:p64.65;"});
  CHECK(n.h.request("vStopped") == "OK");
  SECTION("GDB stops the other threads, then detaches the child") {
    // GDB 13 stops the parent's other threads (vCont;t) before it detaches a vfork child:
    // those resumes are not the forking thread's, the child stays held for the D.
    CHECK(n.h.round_trip("vCont;t:p64.64") == Packets{"OK"});
    CHECK(n.h.round_trip("vCont;t:p64.66") == Packets{"OK"});
    CHECK(fake::count(*c, "detach") == 0);
    CHECK(n.h.request("D;1c8") == "OK");
    CHECK(fake::count(*c, "detach") == 1);
  }
  SECTION("never named: let go when the forking thread is resumed") {
    CHECK(n.h.round_trip("vCont;t:p64.64") == Packets{"OK"});
    CHECK(fake::count(*c, "detach") == 0);
    CHECK(n.h.round_trip("vCont;c:p64.65") == Packets{"OK"});
    CHECK(fake::count(*c, "detach") == 1);
    CHECK(n.h.server().process_for(0x1c8) == nullptr);
  }
}
