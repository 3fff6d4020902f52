#include <catch2/catch.hpp>

#include <cerrno>

#include "protocol/qsupported.h"
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

  // A replay's ends of history, signal 0 as rr sends them.
  StopReply h = w;
  h.gdb_signal = 0;
  h.reason = StopReason::HistoryBegin;
  CHECK(format_stop_reply(h, gdb_dialect()) == "T00replaylog:begin;thread:p14f2.14f2;");
  h.reason = StopReason::HistoryEnd;
  CHECK(format_stop_reply(h, gdb_dialect()) == "T00replaylog:end;thread:p14f2.14f2;");

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
}

TEST_CASE("QThreadOptions: the clone stop and the thread exit", "[replies][thread-options]") {
  // gdbserver 15's prepare_resume_reply: "T05clone:<new thread>;" then the registers and the
  // parent as the stop's thread; "w<status>;<thread>" for the exit option.
  StopReply s = basic_stop();
  s.reason = StopReason::Clone;
  s.child_pid = 0x14f2;
  s.child_tid = 0x14f6;
  CHECK(format_stop_reply(s, gdb_dialect()) ==
        "T05clone:p14f2.14f6;06:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:p14f2.14f2;core:0;");
  CHECK(format_stop_reply(s, Dialect{}) ==
        "T05clone:14f6;06:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:14f2;core:0;");
  Dialect no_t = gdb_dialect();
  no_t.disabled.t_stop = true;  // --disable-packet=T: the signal alone, as gdbserver
  CHECK(format_stop_reply(s, no_t) == "S05");
  CHECK(encode(ThreadExitReply{0x14f2, 0x14f6, 0}, gdb_dialect()) == "w0;p14f2.14f6");
}

// ---- protocol::Reply: every reply type through encode(), in GDB's and LLDB's dialect ----

namespace {
Dialect lldb_dialect(bool error_strings = false) {
  Dialect d;
  d.lldb = true;
  d.multiprocess = true;  // LLDB 16 offers it too
  d.error_strings = error_strings;
  return d;
}
std::string gdb(const Reply& r) { return encode(r, gdb_dialect()); }
std::string lldb(const Reply& r) { return encode(r, lldb_dialect()); }
}  // namespace

TEST_CASE("encode: no reply, OK, the empty reply, N", "[replies][encode]") {
  CHECK(sends_nothing(reply::NoReply{}));
  CHECK_FALSE(sends_nothing(reply::Unsupported{}));
  CHECK(gdb(reply::NoReply{}).empty());
  CHECK(lldb(reply::NoReply{}).empty());
  CHECK(gdb(reply::Ok{}) == "OK");
  CHECK(lldb(reply::Ok{}) == "OK");
  CHECK(gdb(reply::Unsupported{}).empty());
  CHECK(lldb(reply::Unsupported{}).empty());
  CHECK(gdb(reply::NoResumed{}) == "N");
  CHECK(lldb(reply::NoResumed{}) == "N");
}

TEST_CASE("encode: errors in each form", "[replies][encode]") {
  reply::Error text{ENOENT, "Btrace not enabled."};
  CHECK(gdb(text) == "E.Btrace not enabled.");
  CHECK(lldb(text) == "E02");
  CHECK(encode(text, lldb_dialect(true)) == "E02;" + std::string("427472616365206e6f7420656e61626c65642e"));
  reply::Error code{EIO, "Cannot access memory.", ErrorForm::Code};
  CHECK(gdb(code) == "E05");
  CHECK(lldb(code) == "E05");
  CHECK(encode(code, lldb_dialect(true)).rfind("E05;43616e6e6f74", 0) == 0);
  reply::Error fixed{1, "ignored", ErrorForm::Fixed};
  CHECK(gdb(fixed) == "E01");
  CHECK(encode(fixed, lldb_dialect(true)) == "E01");
  CHECK(gdb(reply::Error{ESRCH, ""}) == "E03");
  // GDB that offered error-message+ takes the text from m and qRcmd too.
  Dialect accepts = gdb_dialect();
  accepts.error_message = true;
  CHECK(encode(code, accepts) == "E.Cannot access memory.");
  CHECK(encode(text, accepts) == "E.Btrace not enabled.");
  CHECK(encode(fixed, accepts) == "E01");
  CHECK(encode(reply::Error{ESRCH, "", ErrorForm::Code}, accepts) == "E03");
}

TEST_CASE("encode: stops, exits and thread exits", "[replies][encode]") {
  StopReply s = basic_stop();
  s.reason = StopReason::Breakpoint;
  CHECK(gdb(s) == format_stop_reply(s, gdb_dialect()));
  CHECK(gdb(s) == "T05swbreak:;06:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:p14f2.14f2;core:0;");
  CHECK(lldb(s) == "T0506:a0e6ffffff7f0000;10:60c0fcf7ff7f0000;thread:p14f2.14f2;core:0;reason:breakpoint;");
  CHECK(gdb(ExitReply{0x3aa9, 3, false, 0}) == "W03;process:3aa9");
  CHECK(lldb(ExitReply{0x3aa9, 0, true, 9}) == "X09;process:3aa9");
  // No process to name: '?' before anything ran.
  CHECK(gdb(ExitReply{}) == "W00");
  CHECK(encode(ExitReply{}, Dialect{}) == "W00");
  CHECK(gdb(ThreadExitReply{0x9c4, 0x9fb, 0}) == "w0;p9c4.9fb");
  CHECK(encode(ThreadExitReply{0x9c4, 0x9fb, 0}, Dialect{}) == "w0;9fb");
}

TEST_CASE("encode: memory and registers", "[replies][encode]") {
  reply::Hex hex{{0x00, 0x7f, 0xff, 0x24}};
  CHECK(gdb(hex) == "007fff24");
  CHECK(lldb(hex) == "007fff24");
  // x: GDB 16+ takes 'b' + the escaped bytes (gdbserver's reply); LLDB the bytes alone.
  reply::BinaryMemory bin{{'a', '$', '#', '}', '*', 'z'}};
  CHECK(gdb(bin) == "ba}\x04}\x03}]}\x0az");
  CHECK(lldb(bin) == "a}\x04}\x03}]}\x0az");
  CHECK(encode(bin, Dialect{}) == gdb(bin));  // no qSupported seen (GDB 16.1 sends x unasked)
  // Nothing read: "b" for GDB; LLDB's probe "x0,0" wants OK (lldb-server's answer).
  CHECK(gdb(reply::BinaryMemory{}) == "b");
  CHECK(lldb(reply::BinaryMemory{}) == "OK");
  // A 'b' among the data is data: only the first byte is the marker.
  CHECK(gdb(reply::BinaryMemory{{'b'}}) == "bb");
  CHECK(gdb(reply::Hex{}).empty());
  reply::Registers regs{{{{0x01, 0x02}, true}, {{0, 0, 0, 0}, false}, {{0xab}, true}}};
  CHECK(gdb(regs) == "0102xxxxxxxxab");
  CHECK(lldb(regs) == "0102xxxxxxxxab");
  CHECK(gdb(reply::HexNumber{0x7ffff7d8a6c0}) == "7ffff7d8a6c0");
  CHECK(lldb(reply::HexNumber{0}) == "0");
}

TEST_CASE("encode: qSupported, vCont?, qC, thread lists, qAttached", "[replies][encode]") {
  Capabilities caps = Capabilities::all();
  CHECK(gdb(reply::Features{caps}) == format_qsupported(caps, gdb_dialect()));
  CHECK(lldb(reply::Features{caps}) == format_qsupported(caps, lldb_dialect()));
  CHECK(gdb(reply::Features{caps}).find(";swbreak+") != std::string::npos);
  CHECK(lldb(reply::Features{caps}).find(";swbreak+") == std::string::npos);
  CHECK(gdb(reply::ResumeActions{}) == "vCont;c;C;t;s;S;r");
  CHECK(lldb(reply::ResumeActions{}) == "vCont;c;C;t;s;S;r");
  CHECK(gdb(reply::CurrentThread{0x64, 0x65}) == "QCp64.65");
  CHECK(encode(reply::CurrentThread{0x64, 0x65}, Dialect{}) == "QC65");
  reply::ThreadList list{{{0x64, 0x64}, {0x64, 0x65}}};
  CHECK(gdb(list) == "mp64.64,p64.65");
  CHECK(encode(list, Dialect{}) == "m64,65");
  CHECK(gdb(reply::ThreadList{}) == "m");
  CHECK(gdb(reply::ThreadListEnd{}) == "l");
  CHECK(lldb(reply::ThreadListEnd{}) == "l");
  CHECK(gdb(reply::Attached{true}) == "1");
  CHECK(lldb(reply::Attached{false}) == "0");
}

TEST_CASE("encode: qXfer chunks and console output", "[replies][encode]") {
  CHECK(gdb(xfer_reply("abcdef", 0, 4)) == "mabcd");
  CHECK(lldb(xfer_reply("abcdef", 4, 4)) == "lef");
  CHECK(gdb(reply::XferChunk{"a$b", true}) == "la}\x04" "b");
  // Past the end: E01 whatever the client (gdbserver's answer), error strings or not.
  CHECK(gdb(xfer_reply("abcdef", 7, 4)) == "E01");
  CHECK(encode(xfer_reply("abcdef", 7, 4), lldb_dialect(true)) == "E01");
  CHECK(gdb(reply::ConsoleOutput{"hi\n"}) == "O68690a");
  CHECK(lldb(reply::ConsoleOutput{"hi\n"}) == "O68690a");
}

TEST_CASE("encode: vFile results", "[replies][encode]") {
  CHECK(gdb(reply::FileResult{3}) == "F3");
  CHECK(lldb(reply::FileResult{0x1000}) == "F1000");
  CHECK(gdb(reply::FileResult{-1}) == "F-1");
  CHECK(gdb(reply::FileError{ENOENT}) == "F-1,2");
  CHECK(lldb(reply::FileError{EACCES}) == "F-1,d");
  CHECK(gdb(reply::FileData{{'E', 'L', 'F', '$'}}) == "F4;ELF}\x04");
  CHECK(lldb(reply::FileData{}) == "F0;");
}

TEST_CASE("encode: qbranchstub:stepbranch-last", "[replies][encode]") {
  CHECK(gdb(reply::StepBranchSummary{}) == "none");
  CHECK(lldb(reply::StepBranchSummary{}) == "none");
  reply::StepBranchSummary taken{false, 0x64, 0x65, 0x401000, 0x401020, "emulate"};
  CHECK(gdb(taken) == "thread:p64.65;branch-from:401000;branch-to:401020;stepbranch-mechanism:emulate;");
  CHECK(encode(taken, Dialect{}) == "thread:65;branch-from:401000;branch-to:401020;stepbranch-mechanism:emulate;");
  reply::StepBranchSummary before{false, 0x64, 0x65, 0, 0, "btf"};
  CHECK(lldb(before) == "thread:p64.65;stepbranch-mechanism:btf;");
}

TEST_CASE("encode: LLDB's host, process, region, watchpoint and threads replies", "[replies][encode][lldb]") {
  reply::HostInfo host{"x86_64-pc-linux-gnu", "6.1.0", "ab"};
  CHECK(lldb(host) ==
        "triple:7838365f36342d70632d6c696e75782d676e75;ptrsize:8;endian:little;ostype:linux;vendor:pc;"
        "os_version:6.1.0;hostname:6162;watchpoint_exceptions_received:after;");
  CHECK(gdb(host) == lldb(host));
  reply::ProcessInfo proc{.pid = 0x64, .parent_pid = 1, .real_uid = 1000, .real_gid = 1000,
                          .effective_uid = 0, .effective_gid = -1, .triple = "x86_64-pc-linux-gnu"};
  CHECK(lldb(proc) ==
        "pid:64;parent-pid:1;real-uid:3e8;real-gid:3e8;effective-uid:0;effective-gid:-1;"
        "triple:7838365f36342d70632d6c696e75782d676e75;ostype:linux;endian:little;ptrsize:8;");
  CHECK(gdb(proc) == lldb(proc));
  CHECK(lldb(reply::MemoryRegion{0x400000, 0x1000, "rx", "/bin/a"}) ==
        "start:400000;size:1000;permissions:rx;name:2f62696e2f61;");
  CHECK(gdb(reply::MemoryRegion{0x0, 0x400000, "", ""}) == "start:0;size:400000;");
  CHECK(lldb(reply::WatchpointSlots{4}) == "num:4;");
  CHECK(gdb(reply::WatchpointSlots{4}) == "num:4;");
  StopReply quiet;
  quiet.tid = 0x24;
  quiet.gdb_signal = 0;
  quiet.thread_name = "a$";  // the JSON goes out binary-escaped: '$' and '}' too
  CHECK(lldb(reply::ThreadsInfo{{quiet}}) == "[{\"tid\":36,\"name\":\"a}\x04\",\"registers\":{}]}]]");
  CHECK(gdb(reply::ThreadsInfo{{quiet}}) == lldb(reply::ThreadsInfo{{quiet}}));
}

TEST_CASE("stepbranch stop replies name the branch and the mechanism, in both dialects", "[replies][encode]") {
  StopReply s = basic_stop();
  s.registers.clear();
  s.core.reset();
  s.reason = StopReason::SingleStep;
  s.branch_from = 0x401000;
  s.branch_to = 0x401020;
  s.stepbranch_mechanism = "emulate";
  CHECK(gdb(s) == "T05thread:p14f2.14f2;branch-from:401000;branch-to:401020;stepbranch-mechanism:emulate;");
  CHECK(lldb(s) ==
        "T05thread:p14f2.14f2;reason:trace;branch-from:401000;branch-to:401020;stepbranch-mechanism:emulate;");
  // Stopped before a branch: no branch keys; the mechanism is still named (empty too).
  s.branch_from = s.branch_to = 0;
  s.stepbranch_mechanism = "";
  CHECK(gdb(s) == "T05thread:p14f2.14f2;stepbranch-mechanism:;");
  s.stepbranch_mechanism.reset();
  s.extra.push_back({"k", "v"});
  CHECK(gdb(s) == "T05thread:p14f2.14f2;k:v;");
}

TEST_CASE("encode: a reply encoded earlier goes out as it was", "[replies][encode][non-stop]") {
  CHECK(gdb(reply::Encoded{"T05thread:p64.65;"}) == "T05thread:p64.65;");
  CHECK(lldb(reply::Encoded{"T05thread:p64.65;"}) == "T05thread:p64.65;");
}

TEST_CASE("encode: qExecAndArgs", "[replies][encode]") {
  // gdb/doc: "U" when unset, else "S;" hex(program) ";" hex(arguments) ";".
  CHECK(gdb(reply::ExecAndArgs{}) == "U");
  CHECK(gdb(reply::ExecAndArgs{{"/bin/ls"}}) == "S;2f62696e2f6c73;;");
  CHECK(lldb(reply::ExecAndArgs{{"/a", "b c"}}) == "S;2f61;625c2063;");
  // One string, escaped for the shell as gdbserver's construct_inferior_arguments does.
  CHECK(shell_argument_string({"p", "a", "b c", "", "$x", "it's", "l1\nl2"}) ==
        "a b\\ c '' \\$x it\\'s l1'\n'l2");
  CHECK(shell_argument_string({"p"}).empty());
}
