#include <catch2/catch.hpp>

#include <cerrno>

#include "protocol/replies.h"

using namespace protocol;

namespace {
StopReply basic_stop() {
  StopReply s;
  s.gdb_signal = 5;
  s.pid = 0x14f2;
  s.tid = 0x14f2;
  s.registers.push_back({6, {0xa0, 0xe6, 0xff, 0xff, 0xff, 0x7f, 0, 0}});
  s.registers.push_back({0x10, {0x60, 0xc0, 0xfc, 0xf7, 0xff, 0x7f, 0, 0}});
  s.core = 0;
  return s;
}
Dialect gdb_dialect() {
  Dialect d;
  d.multiprocess = true;
  d.swbreak = true;
  d.hwbreak = true;
  return d;
}
}  // namespace

TEST_CASE("GDB stop replies", "[replies]") {
  StopReply s = basic_stop();
  s.reason = StopReason::Breakpoint;
  CHECK(format_stop_reply(s, gdb_dialect()) ==
        "T05swbreak:;06:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:p14f2.14f2;core:0;");
  // swbreak only when negotiated; no multiprocess -> bare tid.
  CHECK(format_stop_reply(s, Dialect{}) == "T0506:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:14f2;core:0;");

  s.reason = StopReason::HwBreakpoint;
  CHECK(format_stop_reply(s, gdb_dialect()).rfind("T05hwbreak:;06:", 0) == 0);
  CHECK(format_stop_reply(s, Dialect{}).rfind("T0506:", 0) == 0);

  StopReply w = basic_stop();
  w.registers.clear();
  w.core.reset();
  w.reason = StopReason::Watch;
  w.watch_addr = 0x55555555802c;
  CHECK(format_stop_reply(w, gdb_dialect()) == "T05watch:55555555802c;thread:p14f2.14f2;");
  w.reason = StopReason::ReadWatch;
  CHECK(format_stop_reply(w, gdb_dialect()).rfind("T05rwatch:55555555802c;", 0) == 0);
  w.reason = StopReason::AccessWatch;
  CHECK(format_stop_reply(w, gdb_dialect()).rfind("T05awatch:55555555802c;", 0) == 0);

  StopReply f = w;
  f.reason = StopReason::Fork;
  f.child_pid = f.child_tid = 0x3df5;
  CHECK(format_stop_reply(f, gdb_dialect()) == "T05fork:p3df5.3df5;thread:p14f2.14f2;");
  f.reason = StopReason::VFork;
  CHECK(format_stop_reply(f, gdb_dialect()).rfind("T05vfork:p3df5.3df5;", 0) == 0);
  f.reason = StopReason::VForkDone;
  CHECK(format_stop_reply(f, gdb_dialect()).rfind("T05vforkdone:;", 0) == 0);
  f.reason = StopReason::Exec;
  f.exec_path = "/tmp";
  CHECK(format_stop_reply(f, gdb_dialect()).rfind("T05exec:2f746d70;", 0) == 0);
  f.reason = StopReason::SyscallEntry;
  f.syscall_no = 0x27;
  CHECK(format_stop_reply(f, gdb_dialect()).rfind("T05syscall_entry:27;", 0) == 0);
  f.reason = StopReason::SyscallReturn;
  CHECK(format_stop_reply(f, gdb_dialect()).rfind("T05syscall_return:27;", 0) == 0);

  StopReply i = w;
  i.reason = StopReason::Signal;
  i.gdb_signal = 2;
  i.extra.push_back({"branch-from", "401000"});
  CHECK(format_stop_reply(i, gdb_dialect()) == "T02thread:p14f2.14f2;branch-from:401000;");
  // No LLDB keys for GDB.
  i.thread_name = "prog";
  i.all_tids = {1, 2};
  CHECK(format_stop_reply(i, gdb_dialect()).find("name:") == std::string::npos);
  CHECK(format_stop_reply(i, gdb_dialect()).find("reason:") == std::string::npos);
}

TEST_CASE("LLDB stop replies", "[replies]") {
  Dialect d;
  d.lldb = true;
  d.list_threads_in_stop = true;
  StopReply s = basic_stop();
  s.reason = StopReason::Breakpoint;
  s.thread_name = "prog";
  s.all_tids = {0x14f2, 0x14f3};
  s.all_pcs = {0x7ffff7fcc060, 0x401000};
  CHECK(format_stop_reply(s, d) ==
        "T0506:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:14f2;core:0;name:prog;threads:14f2,14f3;"
        "thread-pcs:7ffff7fcc060,401000;reason:breakpoint;");
  s.reason = StopReason::SingleStep;
  CHECK(format_stop_reply(s, d).find("reason:trace;") != std::string::npos);
  s.reason = StopReason::Watch;
  CHECK(format_stop_reply(s, d).find("reason:watchpoint;") != std::string::npos);
  s.reason = StopReason::Exec;
  CHECK(format_stop_reply(s, d).find("reason:exec;") != std::string::npos);
  s.reason = StopReason::Signal;
  CHECK(format_stop_reply(s, d).find("reason:signal;") != std::string::npos);
  s.thread_name = "a;b";
  CHECK(format_stop_reply(s, d).find("hexname:613b62;") != std::string::npos);
  d.list_threads_in_stop = false;
  CHECK(format_stop_reply(s, d).find("threads:") == std::string::npos);
}

TEST_CASE("exit replies", "[replies]") {
  ExitReply e{0x3aa9, 0, false, 0};
  CHECK(format_exit_reply(e, Dialect{}) == "W00");
  Dialect mp;
  mp.multiprocess = true;
  CHECK(format_exit_reply(e, mp) == "W00;process:3aa9");
  ExitReply k{0x3aa9, 0, true, 9};
  CHECK(format_exit_reply(k, Dialect{}) == "X09");
  CHECK(format_exit_reply(k, mp) == "X09;process:3aa9");
}

TEST_CASE("errors and console output", "[replies]") {
  CHECK(ok() == "OK");
  CHECK(empty().empty());
  CHECK(error_code(1) == "E01");
  CHECK(error_code(0x2a) == "E2a");
  CHECK(error_code(0x1ff) == "Eff");
  Dialect gdb;
  // GDB: the reason as text ("E." + text), or the errno where only a code is read.
  CHECK(error_reply(gdb, ENOENT, "Btrace not enabled.") == "E.Btrace not enabled.");
  CHECK(error_reply(gdb, EIO, "Cannot access memory.", ErrorForm::Code) == "E05");
  CHECK(error_reply(gdb, ESRCH, "") == "E03");
  // LLDB: the errno; the text too once it asked for error strings.
  Dialect lldb;
  lldb.lldb = true;
  CHECK(error_reply(lldb, ESRCH, "no") == "E03");
  lldb.error_strings = true;
  CHECK(error_reply(lldb, ESRCH, "no") == "E03;6e6f");
  CHECK(error_reply(lldb, EIO, "no", ErrorForm::Code) == "E05;6e6f");
  CHECK(console_output("hi\n") == "O68690a");
}

TEST_CASE("xfer_chunk boundaries", "[replies]") {
  const std::string doc = "abcdefghij";  // 10 bytes
  CHECK(xfer_chunk(doc, 0, 4) == "mabcd");
  CHECK(xfer_chunk(doc, 4, 6) == "lefghij");   // exactly to the end
  CHECK(xfer_chunk(doc, 4, 100) == "lefghij");
  CHECK(xfer_chunk(doc, 10, 4) == "l");        // at the end
  CHECK(xfer_chunk(doc, 11, 4) == "E01");      // past the end
  CHECK(xfer_chunk(doc, 0, 0) == "m");
  CHECK(xfer_chunk("", 0, 0x1000) == "l");
  CHECK(xfer_chunk("a$b", 0, 0x1000) == "la}\x04" "b");
  CHECK(xfer_chunk(doc, UINT64_MAX, UINT64_MAX) == "E01");
  CHECK(xfer_chunk(doc, 9, UINT64_MAX) == "lj");
}

TEST_CASE("jThreadsInfo JSON: event thread with reason and registers, quiet thread without") {
  StopReply hit;
  hit.tid = 0x1234;
  hit.reason = StopReason::Breakpoint;
  hit.gdb_signal = 5;
  hit.thread_name = "a \"q\"";
  hit.registers = {{16, {0x50, 0x11, 0x40, 0, 0, 0, 0, 0}}};
  StopReply quiet;
  quiet.tid = 0x1235;
  quiet.gdb_signal = 0;
  CHECK(threads_info_json({hit, quiet}) ==
        "[{\"tid\":4660,\"name\":\"a \\\"q\\\"\",\"reason\":\"breakpoint\",\"signal\":5,"
        "\"registers\":{\"16\":\"5011400000000000\"}},{\"tid\":4661,\"registers\":{}}]");
  StopReply watch = hit;
  watch.reason = StopReason::Watch;
  watch.watch_addr = 4096;
  CHECK(threads_info_json({watch}).find("\"reason\":\"watchpoint\",\"signal\":5,\"description\":\"4096 0\"") !=
        std::string::npos);
}

TEST_CASE("non-stop: thread creation, thread exit and no-resumed replies", "[replies][non-stop]") {
  // As gdbserver 13 sends them with QThreadEvents:1 (T05create:;... / w0;p9c4.9fb).
  StopReply s = basic_stop();
  s.reason = StopReason::ThreadCreated;
  s.tid = 0x14f5;
  CHECK(format_stop_reply(s, gdb_dialect()) ==
        "T05create:;06:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:p14f2.14f5;core:0;");
  CHECK(format_thread_exit_reply(ThreadExitReply{0x9c4, 0x9fb, 0}, gdb_dialect()) == "w0;p9c4.9fb");
  CHECK(format_thread_exit_reply(ThreadExitReply{0x9c4, 0x9fb, 0x2a}, gdb_dialect()) == "w2a;p9c4.9fb");
  CHECK(format_thread_exit_reply(ThreadExitReply{0x9c4, 0x9fb, 0x12a}, Dialect{}) == "w2a;9fb");
  CHECK(no_resumed_reply() == "N");
}
