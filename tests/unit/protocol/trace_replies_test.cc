// Replies to the tracepoint packets (protocol/trace_replies.h): the exact text of each, as
// gdbserver 13 writes it (tracepoint.cc) and GDB 13 parses it (tracepoint.c parse_*).
#include <catch2/catch.hpp>

#include "protocol/replies.h"
#include "protocol/trace_replies.h"

using namespace protocol;
using reply::TraceStatus;

namespace {
std::string wire(const Reply& r) { return encode(r, Dialect{}); }
}  // namespace

TEST_CASE("trace replies: qTStatus before any run", "[replies][tracepoints]") {
  TraceStatus s;
  s.free = s.size = 0x500000;
  CHECK(reply::encode(s) ==
        "T0;tnotrun:0;tframes:0;tcreated:0;tfree:500000;tsize:500000;circular:0;disconn:0;"
        "starttime:0;stoptime:0;username:;notes::");
  CHECK(wire(s) == reply::encode(s));
}

TEST_CASE("trace replies: qTStatus while running", "[replies][tracepoints]") {
  TraceStatus s;
  s.running = true;
  s.reason = TraceStatus::Reason::Running;
  s.frames = 3;
  s.created = 0x13;
  s.free = 0x4fff00;
  s.size = 0x500000;
  s.circular = true;
  s.disconnected = true;
  s.start_usec = 0x5f5e100;
  s.user = "bob";
  s.notes = "hi";
  CHECK(reply::encode(s) ==
        "T1;tunknown:0;tframes:3;tcreated:13;tfree:4fff00;tsize:500000;circular:1;disconn:1;"
        "starttime:5f5e100;stoptime:0;username:626f62;notes:6869:");
}

TEST_CASE("trace replies: qTStatus stopped, with and without notes", "[replies][tracepoints]") {
  TraceStatus s;
  s.reason = TraceStatus::Reason::Stopped;
  s.frames = s.created = 2;
  s.free = 0x100;
  s.size = 0x200;
  s.start_usec = 0x10;
  s.stop_usec = 0x20;
  CHECK(reply::encode(s) ==
        "T0;tstop::0;tframes:2;tcreated:2;tfree:100;tsize:200;circular:0;disconn:0;"
        "starttime:10;stoptime:20;username:;notes::");
  s.stop_text = "because I can";
  CHECK(reply::encode(s).rfind("T0;tstop:6265636175736520492063616e:0;tframes:2;", 0) == 0);
}

TEST_CASE("trace replies: qTStatus pass count, full, disconnected, error", "[replies][tracepoints]") {
  TraceStatus s;
  s.size = 0x500000;
  s.reason = TraceStatus::Reason::PassCount;
  s.stop_tracepoint = 2;
  s.frames = s.created = 3;
  s.free = 0x4ffe00;
  CHECK(reply::encode(s) ==
        "T0;tpasscount:2;tframes:3;tcreated:3;tfree:4ffe00;tsize:500000;circular:0;disconn:0;"
        "starttime:0;stoptime:0;username:;notes::");
  s.reason = TraceStatus::Reason::BufferFull;
  s.stop_tracepoint = 0;
  s.free = 0;
  CHECK(reply::encode(s).rfind("T0;tfull:0;tframes:3;tcreated:3;tfree:0;tsize:500000;", 0) == 0);
  s.reason = TraceStatus::Reason::Disconnected;
  CHECK(reply::encode(s).rfind("T0;tdisconnected:0;tframes:3;", 0) == 0);
  s.reason = TraceStatus::Reason::Error;
  s.stop_tracepoint = 2;
  s.stop_text = "divide by zero";
  CHECK(reply::encode(s).rfind("T0;terror:646976696465206279207a65726f:2;tframes:3;", 0) == 0);
}

TEST_CASE("trace replies: qTP, qTV, QTFrame", "[replies][tracepoints]") {
  CHECK(reply::encode(reply::TracepointHits{0, 0}) == "V0:0");
  CHECK(reply::encode(reply::TracepointHits{0x10, 0x2a4}) == "V10:2a4");  // hex, as GDB reads it
  CHECK(wire(reply::TracepointHits{1, 0x23}) == "V1:23");

  CHECK(reply::encode(reply::TraceVariableValue{}) == "U");
  CHECK(reply::encode(reply::TraceVariableValue{5}) == "V5");
  CHECK(reply::encode(reply::TraceVariableValue{0}) == "V0");
  CHECK(reply::encode(reply::TraceVariableValue{-1}) == "Vffffffffffffffff");
  CHECK(wire(reply::TraceVariableValue{0x1234}) == "V1234");

  CHECK(reply::encode(reply::TraceFrameFound{}) == "F-1");
  CHECK(reply::encode(reply::TraceFrameFound{0, 1}) == "F0T1");
  CHECK(reply::encode(reply::TraceFrameFound{0x1f, 0x12}) == "F1fT12");
  CHECK(wire(reply::TraceFrameFound{}) == "F-1");
}

TEST_CASE("trace replies: upload lines and qTBuffer data", "[replies][tracepoints]") {
  CHECK(reply::encode(reply::TraceUpload{}) == "l");
  CHECK(reply::encode(reply::TraceUpload{"T1:401136:E:0:0"}) == "T1:401136:E:0:0");
  CHECK(wire(reply::TraceUpload{}) == "l");

  CHECK(reply::encode(reply::TraceBufferData{}) == "l");
  CHECK(reply::encode(reply::TraceBufferData{{0x01, 0x00, 0x1c, 0x00, 0x00, 0x00, 0x4d, 0xff}}) == "01001c0000004dff");
  CHECK(wire(reply::TraceBufferData{{0x00, 0x00, 0x00, 0x00, 0x00, 0x00}}) == "000000000000");
}

TEST_CASE("trace replies: tracepoint upload lines T, A, S, Z", "[replies][tracepoints]") {
  TracepointUpload tp;
  tp.number = 1;
  tp.addr = 0x401136;
  CHECK(tracepoint_upload_lines(tp) == std::vector<std::string>{"T1:401136:E:0:0"});

  tp.condition = {0x26, 0x00, 0x05, 0x22, 0x05, 0x13, 0x27};
  tp.actions = {"R08000080000000000000", "M-1,404028,4"};
  tp.step_actions = {"R08000080000000000000"};
  tp.sources = {"at:0:4:6d61696e", "cond:0:6:78203d3d2035", "cmd:0:10:7768696c652d7374657070696e672032"};
  CHECK(tracepoint_upload_lines(tp) == std::vector<std::string>{
                                           "T1:401136:E:0:0:X7,26000522051327",
                                           "A1:401136:R08000080000000000000",
                                           "A1:401136:M-1,404028,4",
                                           "S1:401136:R08000080000000000000",
                                           "Z1:401136:at:0:4:6d61696e",
                                           "Z1:401136:cond:0:6:78203d3d2035",
                                           "Z1:401136:cmd:0:10:7768696c652d7374657070696e672032",
                                       });

  TracepointUpload d;
  d.number = 0x1a;
  d.addr = 0x555555555140;
  d.enabled = false;
  d.step_count = 10;
  d.pass_count = 0x13;
  CHECK(tracepoint_upload_lines(d) == std::vector<std::string>{"T1a:555555555140:D:a:13"});
  d.fast_size = 5;
  CHECK(tracepoint_upload_lines(d)[0] == "T1a:555555555140:D:a:13:F5");
  d.fast_size.reset();
  d.is_static = true;
  d.condition = {0x22, 0x01, 0x27};
  CHECK(tracepoint_upload_lines(d)[0] == "T1a:555555555140:D:a:13:S:X3,220127");
}

TEST_CASE("trace replies: variable upload lines", "[replies][tracepoints]") {
  CHECK(variable_upload_line(1, 0, true, "trace_timestamp") == "1:0:1:74726163655f74696d657374616d70");
  CHECK(variable_upload_line(2, -5, false, "count") == "2:fffffffffffffffb:0:636f756e74");
  CHECK(variable_upload_line(0x1f, 0x2a, false, "x") == "1f:2a:0:78");
  CHECK(variable_upload_line(3, 0, false, "") == "3:0:0:");
}

TEST_CASE("trace replies: traceframe-info XML", "[replies][tracepoints]") {
  CHECK(traceframe_info_xml({}) == "<traceframe-info>\n</traceframe-info>\n");
  TraceframeInfo info;
  info.memory = {{0x404028, 4}, {0x7fffffffe000, 0xffff}};
  info.variables = {2, 17};
  CHECK(traceframe_info_xml(info) ==
        "<traceframe-info>\n"
        "<memory start=\"0x404028\" length=\"0x4\"/>\n"
        "<memory start=\"0x7fffffffe000\" length=\"0xffff\"/>\n"
        "<tvar id=\"2\"/>\n"
        "<tvar id=\"17\"/>\n"
        "</traceframe-info>\n");
}
