// Session, qXfer objects: target.xml in chunks, threads, auxv, exec-file, libraries-svr4,
// siginfo read/write, btrace and btrace-conf, with the Qbtrace packets that enable them.
#include <catch2/catch.hpp>

#include "tests/unit/server/session_harness.h"

using fake::FakeProcess;
using fake::SessionHarness;

namespace {

size_t occurrences(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("xfer: target.xml describes the process's register layout") {
  SessionHarness h;
  h.add_process(0x64);
  std::string whole = h.request("qXfer:features:read:target.xml:0,fffff");
  REQUIRE(whole.size() > 1);
  CHECK(whole[0] == 'l');
  std::string doc = fake::unescape(whole.substr(1));
  CHECK(doc.rfind("<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n"
                  "<architecture>i386:x86-64</architecture>\n<osabi>GNU/Linux</osabi>\n", 0) == 0);
  CHECK(occurrences(doc, "<reg ") == 76);
  CHECK(doc.find("<reg name=\"rip\" bitsize=\"64\" type=\"code_ptr\" regnum=\"16\"/>") != std::string::npos);
  CHECK(doc.find("<reg name=\"ymm15h\" bitsize=\"128\" type=\"uint128\" regnum=\"75\"/>") != std::string::npos);
  CHECK(doc.find("<feature name=\"org.gnu.gdb.i386.avx\">") != std::string::npos);
  CHECK(doc.substr(doc.size() - 10) == "</target>\n");
}

TEST_CASE("xfer: target.xml without AVX has no avx feature") {
  SessionHarness h;
  h.add_process(std::make_unique<FakeProcess>(0x64, std::vector<pid_t>{0x64}, 0x3));
  std::string doc = fake::unescape(h.request("qXfer:features:read:target.xml:0,fffff").substr(1));
  CHECK(occurrences(doc, "<reg ") == 60);
  CHECK(doc.find("ymm") == std::string::npos);
}

TEST_CASE("xfer: target.xml read in chunks: m while more follows, l for the last one") {
  SessionHarness h;
  h.add_process(0x64);
  std::string doc = fake::unescape(h.request("qXfer:features:read:target.xml:0,fffff").substr(1));
  std::string joined;
  int chunks = 0;
  for (size_t offset = 0;; offset += 0x400) {
    std::string reply = h.request(fmt::format("qXfer:features:read:target.xml:{:x},400", offset));
    REQUIRE(!reply.empty());
    std::string data = fake::unescape(reply.substr(1));
    ++chunks;
    joined += data;
    if (reply[0] == 'l') {
      CHECK(data.size() <= 0x400);
      break;
    }
    REQUIRE(reply[0] == 'm');
    CHECK(data.size() == 0x400);
    REQUIRE(chunks < 100);
  }
  CHECK(joined == doc);
  CHECK(chunks == static_cast<int>((doc.size() + 0x3ff) / 0x400));
  CHECK(h.request(fmt::format("qXfer:features:read:target.xml:{:x},400", doc.size())) == "l");
  CHECK(h.request(fmt::format("qXfer:features:read:target.xml:{:x},400", doc.size() + 1)) == "E01");
  CHECK(h.request("qXfer:features:read:other.xml:0,400") == "E.No such target description.");
}

TEST_CASE("xfer: threads document, with core and escaped name, later chunks from the snapshot") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  p.add_thread(0x64, "prog", 2);
  p.add_thread(0x65, "a<b", -1);
  h.gdb_handshake();
  const std::string doc =
      "<threads>\n<thread id=\"p64.64\" core=\"2\" name=\"prog\"/>\n<thread id=\"p64.65\" name=\"a&lt;b\"/>\n"
      "</threads>\n";
  CHECK(h.request("qXfer:threads:read::0,fff") == "l" + doc);
  // A thread appears between two chunks: the second chunk is still the first document's.
  CHECK(h.request("qXfer:threads:read::0,10") == "m" + doc.substr(0, 0x10));
  p.add_thread(0x66, "new", 1);
  CHECK(h.request("qXfer:threads:read::10,fff") == "l" + doc.substr(0x10));
  CHECK(h.request("qXfer:threads:read::0,fff").find("p64.66") != std::string::npos);
}

TEST_CASE("xfer: threads document without multiprocess names plain thread ids") {
  SessionHarness h;
  h.add_process(0x64, {0x64});
  CHECK(h.request("qXfer:threads:read::0,fff") == "l<threads>\n<thread id=\"64\"/>\n</threads>\n");
}

TEST_CASE("xfer: auxv is sent binary, escaped") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  std::vector<uint8_t> auxv = {0x21, 0, 0, 0, 0, 0, 0, 0, 0x00, 0xd0, 0x7d, 0xf7, 0xff, 0x7f, 0, 0};
  auxv.resize(32, 0);  // AT_NULL
  p.auxv_result = auxv;
  std::string reply = h.request("qXfer:auxv:read::0,1000");
  std::string expected = std::string("l!\0\0\0\0\0\0\0\0\xd0}]\xf7\xff\x7f\0\0", 18) + std::string(16, '\0');
  CHECK(reply == expected);
  CHECK(h.request("qXfer:auxv:read::8,4") == std::string("m\0\xd0}]\xf7", 6));
  p.auxv_result = backend::Error{EACCES, "cannot read auxv"};
  CHECK(h.request("qXfer:auxv:read::0,1000") == "E.cannot read auxv");
}

TEST_CASE("xfer: exec-file") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  p.exe_result = std::string("/usr/bin/true");
  CHECK(h.request("qXfer:exec-file:read:64:0,fff") == "l/usr/bin/true");
  CHECK(h.request("qXfer:exec-file:read::0,4") == "m/usr");
  CHECK(h.request("qXfer:exec-file:read::4,100") == "l/bin/true");
  p.exe_result = backend::Error{ENOENT, "gone"};
  CHECK(h.request("qXfer:exec-file:read::0,fff") == "E.gone");
}

TEST_CASE("xfer: libraries-svr4 with main-lm for GDB, without for LLDB, E01 without r_debug") {
  const std::string lib =
      "<library name=\"/lib/x86_64-linux-gnu/libc.so.6\" lm=\"0x7ffff7fc1000\" l_addr=\"0x7ffff7d80000\" "
      "l_ld=\"0x7ffff7f9a000\" lmid=\"0x0\"/>";
  auto setup = [](FakeProcess& p) {
    p.libraries_result = std::vector<backend::LibraryInfo>{
        {"/lib/x86_64-linux-gnu/libc.so.6", 0x7ffff7fc1000, 0x7ffff7d80000, 0x7ffff7f9a000, 0}};
    p.main_lm = 0x7ffff7ffe2e0;
  };
  SECTION("GDB") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    setup(p);
    h.gdb_handshake();
    CHECK(h.request("qXfer:libraries-svr4:read::0,fff") ==
          "l<library-list-svr4 version=\"1.0\" main-lm=\"0x7ffff7ffe2e0\">" + lib + "</library-list-svr4>");
    p.main_lm = 0;
    CHECK(h.request("qXfer:libraries-svr4:read::0,fff") ==
          "l<library-list-svr4 version=\"1.0\">" + lib + "</library-list-svr4>");
    p.libraries_result = backend::Error{ENOENT, "no DT_DEBUG"};
    CHECK(h.request("qXfer:libraries-svr4:read::0,fff") == "E.no DT_DEBUG");
  }
  SECTION("LLDB") {
    SessionHarness h;
    auto& p = h.add_process(0x64);
    setup(p);
    h.lldb_handshake();
    CHECK(h.request("qXfer:libraries-svr4:read::0,fff") ==
          "l<library-list-svr4 version=\"1.0\">" + lib + "</library-list-svr4>");
  }
}

TEST_CASE("xfer: siginfo of the general thread, read fresh at any offset") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  std::vector<uint8_t> info(128);
  for (size_t i = 0; i < info.size(); ++i) info[i] = static_cast<uint8_t>(i);
  p.siginfo_of[0x64] = info;
  std::string reply = h.request("qXfer:siginfo:read::0,80");
  REQUIRE(!reply.empty());
  CHECK(reply[0] == 'l');
  CHECK(fake::unescape(reply.substr(1)) == std::string(info.begin(), info.end()));
  CHECK(reply.find("}\x03") != std::string::npos);  // '#' (0x23) went escaped
  CHECK(h.request("qXfer:siginfo:read::10,8") == "m\x10\x11\x12\x13\x14\x15\x16\x17");
  p.siginfo_of[0x64][0x10] = 0x55;  // no read at offset 0 in between: still fresh
  CHECK(h.request("qXfer:siginfo:read::10,2") == "m\x55\x11");
  CHECK(h.request("Hg65") == "OK");
  CHECK(h.request("qXfer:siginfo:read::0,80") == "E.no siginfo");  // that thread has no signal
}

TEST_CASE("xfer: siginfo write replaces bytes of the thread's siginfo") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  p.siginfo_of[0x64] = std::vector<uint8_t>(128, 0xee);
  CHECK(h.request("qXfer:siginfo:write::8:\x01\x02\x03\x04") == "4");
  REQUIRE(p.siginfo_writes.size() == 1);
  auto expected = std::vector<uint8_t>(128, 0xee);
  expected[8] = 1;
  expected[9] = 2;
  expected[10] = 3;
  expected[11] = 4;
  CHECK(p.siginfo_writes[0].first == 0x64);
  CHECK(p.siginfo_writes[0].second == expected);
  CHECK(h.request("qXfer:siginfo:write::7e:\x05\x06\x07\x08") == "2");  // what does not fit is dropped
  CHECK(p.siginfo_of[0x64][0x7f] == 6);
  CHECK(h.request("qXfer:siginfo:write::80:\x01") == "E.Past the end of the siginfo.");
  CHECK(h.request("qXfer:auxv:write::0:\x01") == "");  // nothing else is writable
  CHECK(p.siginfo_writes.size() == 2);
}

TEST_CASE("xfer: unknown objects are unsupported") {
  SessionHarness h;
  h.add_process(0x64);
  CHECK(h.request("qXfer:foo:read::0,10") == "");
  CHECK(h.request("qXfer:features:read:target.xml") == "E.qXfer: missing offset");  // no offset,length
}

TEST_CASE("btrace: documents are errors until branch tracing is enabled") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  CHECK(h.request("qXfer:btrace:read:all:0,fff") == "E.Btrace not enabled.");
  CHECK(h.request("qXfer:btrace-conf:read::0,fff") == "E.Btrace not enabled.");
  CHECK(h.request("Qbtrace:off") == "E.Branch tracing not enabled.");
  CHECK(p.fake_tracer.reads.empty());
}

TEST_CASE("btrace: enable, read all/new/delta, configuration, disable") {
  SessionHarness h;
  auto& p = h.add_process(0x64, {0x64, 0x65});
  auto& tracer = p.fake_tracer;
  CHECK(h.request("Qbtrace-conf:bts:size=0x4000") == "OK");
  CHECK(tracer.buffer_sizes == std::vector<uint64_t>{0x4000});
  CHECK(h.request("Qbtrace-conf:pt:size=0x4000") == "OK");  // for the next PT enable
  CHECK(tracer.buffer_sizes.size() == 1);
  CHECK(tracer.pt_buffer_sizes == std::vector<uint64_t>{0x4000});
  CHECK(h.request("Qbtrace:bts") == "OK");
  CHECK(tracer.enabled(0x64));
  CHECK_FALSE(tracer.enabled(0x65));
  CHECK(h.request("Qbtrace:bts") == "E.Btrace already enabled.");

  tracer.blocks = {{0x401020, 0x401030}, {0x401000, 0x401010}};
  const std::string doc =
      "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n"
      "<block begin=\"0x401020\" end=\"0x401030\"/>\n<block begin=\"0x401000\" end=\"0x401010\"/>\n</btrace>\n";
  CHECK(h.request("qXfer:btrace:read:all:0,fff") == "l" + doc);
  CHECK(h.request("qXfer:btrace:read:new:0,fff") == "l" + doc);
  CHECK(h.request("qXfer:btrace:read:delta:0,fff") == "l" + doc);
  using backend::TraceRead;
  CHECK(tracer.reads == std::vector<std::pair<pid_t, TraceRead>>{
                            {0x64, TraceRead::All}, {0x64, TraceRead::New}, {0x64, TraceRead::Delta}});
  CHECK(h.request("qXfer:btrace:read:sideways:0,fff") == "E.Bad annex.");
  tracer.read_error = backend::Error{EOVERFLOW, "lost"};
  CHECK(h.request("qXfer:btrace:read:delta:0,fff") == "E.Overflow.");
  tracer.read_error = backend::Error{EIO, "The trace buffer is gone."};
  CHECK(h.request("qXfer:btrace:read:all:0,fff") == "E.The trace buffer is gone.");

  CHECK(h.request("qXfer:btrace-conf:read::0,fff") ==
        "l<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n<btrace-conf version=\"1.0\">\n"
        "<bts size=\"0x10000\"/>\n</btrace-conf>\n");

  CHECK(h.request("Hg65") == "OK");  // tracing is per thread
  CHECK(h.request("qXfer:btrace:read:all:0,fff") == "E.Btrace not enabled.");
  CHECK(h.request("Hg64") == "OK");
  CHECK(h.request("Qbtrace:off") == "OK");
  CHECK_FALSE(tracer.enabled(0x64));
}

TEST_CASE("btrace: bad requests and backend refusals") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  // The tracer says why PT cannot be recorded; the reply carries its reason.
  p.fake_tracer.enable_error = backend::Error{ENODEV, "Intel PT is not available here: no intel_pt PMU."};
  CHECK(h.request("Qbtrace:pt") == "E.Intel PT is not available here: no intel_pt PMU.");
  p.fake_tracer.enable_error.reset();
  CHECK(h.request("Qbtrace:foo") == "E.Bad Qbtrace operation.  Use bts, pt, or off.");
  CHECK(h.request("Qbtrace-conf:bts:size=zz") == "E.Bad size value.");
  CHECK(h.request("Qbtrace-conf:bts:speed=1") == "E.Bad Qbtrace configuration option.");
  CHECK(h.request("Qbtrace-conf:lbr:size=0x1000") == "E.Bad Qbtrace configuration option.");
  p.fake_tracer.enable_error = backend::Error{EPERM, "Could not enable branch tracing: no perf."};
  CHECK(h.request("Qbtrace:bts") == "E.Could not enable branch tracing: no perf.");
}

TEST_CASE("btrace: GDB 15's PT options are set for the next enable and reported as recorded") {
  SessionHarness h;
  auto& p = h.add_process(0x64);
  auto& tracer = p.fake_tracer;
  // As GDB 16/17 send them (the value in quotes); gdbserver matches the value's start.
  CHECK(h.request("Qbtrace-conf:pt:ptwrite=\"yes\"") == "OK");
  CHECK(tracer.pt_requested.ptwrite);
  CHECK_FALSE(tracer.pt_requested.event_tracing);
  CHECK(h.request("Qbtrace-conf:pt:event-tracing=\"yes\"") == "OK");
  CHECK(tracer.pt_requested.ptwrite);  // the other option keeps its value
  CHECK(tracer.pt_requested.event_tracing);
  CHECK(h.request("Qbtrace-conf:pt:event-tracing=\"no\"") == "OK");
  CHECK_FALSE(tracer.pt_requested.event_tracing);
  CHECK(h.request("Qbtrace-conf:pt:ptwrite=yes") == "E.Bad ptwrite value.");
  CHECK(h.request("Qbtrace-conf:pt:event-tracing=") == "E.Bad event-tracing value.");
  CHECK(h.request("Qbtrace-conf:bts:ptwrite=\"yes\"") == "E.Bad Qbtrace configuration option.");

  // The recording's configuration says what the PMU turned on.
  tracer.pt_on = backend::PtOptions{false, false};
  CHECK(h.request("Qbtrace:pt") == "OK");
  CHECK(h.request("qXfer:btrace-conf:read::0,fff") ==
        "l<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n<btrace-conf version=\"1.0\">\n"
        "<pt size=\"0x10000\" ptwrite=\"no\" event-tracing=\"no\"/>\n</btrace-conf>\n");
  tracer.pt_on.ptwrite = true;
  CHECK(h.request("qXfer:btrace-conf:read::0,fff").find("ptwrite=\"yes\"") != std::string::npos);
}
