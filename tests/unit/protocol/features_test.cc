#include <catch2/catch.hpp>

#include <set>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "protocol/btrace_xml.h"
#include "protocol/fileio.h"
#include "protocol/qsupported.h"
#include "protocol/signals.h"
#include "protocol/target_xml.h"
#include "protocol/xml.h"

using namespace protocol;

namespace {
const char* kGdbOffer =
    "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;vfork-events+;exec-events+;"
    "vContSupported+;QThreadEvents+;no-resumed+;memory-tagging+;xmlRegisters=i386";
QuerySupported offer(std::string_view payload) { return std::get<QuerySupported>(parse_request(payload)); }
bool has(const std::string& list, const std::string& feature) {
  std::string s = ";" + list + ";";
  return s.find(";" + feature + ";") != std::string::npos;
}
}  // namespace

TEST_CASE("qSupported negotiation", "[qsupported]") {
  Dialect d = negotiate(offer(kGdbOffer));
  CHECK(d.multiprocess);
  CHECK(d.swbreak);
  CHECK(d.hwbreak);
  CHECK(d.fork_events);
  CHECK(d.vfork_events);
  CHECK(d.exec_events);
  CHECK(d.no_resumed);  // GDB offers it and the server reports 'N'
  CHECK_FALSE(negotiate(offer("qSupported:multiprocess+;swbreak+")).no_resumed);
  CHECK_FALSE(d.lldb);
  ClientFeatures c = parse_client_features(offer(kGdbOffer));
  CHECK(c.fork_events);
  CHECK(c.thread_events);

  // LLDB 14/16's offer, word for word: it lists every architecture it knows.
  Dialect l = negotiate(offer("qSupported:xmlRegisters=i386,arm,mips,arc;multiprocess+;fork-events+;vfork-events+"));
  CHECK(l.lldb);
  CHECK(l.multiprocess);
  CHECK_FALSE(l.swbreak);
  // An old GDB without swbreak+ is still GDB (it names i386 only).
  CHECK_FALSE(negotiate(offer("qSupported:multiprocess+;xmlRegisters=i386")).lldb);
  CHECK_FALSE(negotiate(offer("qSupported:xmlRegisters=arm;swbreak-")).swbreak);

  // Events the server lacks are never turned on, whatever the client offers.
  Capabilities no_forks;
  no_forks.set(Capability::ExecEvents);
  Dialect n = negotiate(offer(kGdbOffer), no_forks);
  CHECK_FALSE(n.fork_events);
  CHECK_FALSE(n.vfork_events);
  CHECK(n.exec_events);
  CHECK_FALSE(n.no_resumed);
}

// The offers of newer clients, word for word (remote_query_supported in gdb/remote.c of GDB
// 16.1, 16.3 and 17.2, identical; GetRemoteQSupported in LLDB 21.1.8).
const char* kGdb16Offer =
    "qSupported:multiprocess+;swbreak+;hwbreak+;qRelocInsn+;fork-events+;vfork-events+;exec-events+;"
    "vContSupported+;QThreadEvents+;QThreadOptions+;no-resumed+;memory-tagging+;xmlRegisters=i386;"
    "error-message+";
const char* kLldb21Offer = "qSupported:xmlRegisters=i386,arm,mips,arc;multiprocess+;fork-events+;vfork-events+;"
                           "swbreak+;hwbreak+";

TEST_CASE("qSupported: GDB 16/17 and LLDB 21 offers", "[qsupported]") {
  Dialect g = negotiate(offer(kGdb16Offer));
  CHECK_FALSE(g.lldb);
  CHECK(g.error_message);
  CHECK(g.swbreak);
  CHECK_FALSE(negotiate(offer(kGdbOffer)).error_message);  // GDB 13 does not offer it
  // LLDB 21 offers swbreak+ and hwbreak+ as GDB does; its xmlRegisters list still tells.
  Dialect l = negotiate(offer(kLldb21Offer));
  CHECK(l.lldb);
  CHECK(l.swbreak);
  CHECK_FALSE(l.error_message);

  // binary-upload+ (gdbserver 16.2+: 'x' in GDB's format) for GDB, never for LLDB (LLDB 20+
  // would then expect GDB's format, LLDB 19 would not; lldb-server does not list it).
  Capabilities caps = Capabilities::all();
  std::string r = format_qsupported(caps, g);
  CHECK(has(r, "binary-upload+"));
  CHECK(r.find("QSetWorkingDir+;binary-upload+") != std::string::npos);  // where gdbserver puts it
  CHECK(has(format_qsupported(caps, Dialect{}), "binary-upload+"));
  CHECK_FALSE(has(format_qsupported(caps, l), "binary-upload+"));
}

TEST_CASE("qSupported reply", "[qsupported]") {
  Capabilities s = Capabilities::all();
  s.set(Capability::NonStop, false).set(Capability::ThreadEvents, false).set(Capability::BtracePt, false);
  Dialect d = negotiate(offer(kGdbOffer));
  std::string r = format_qsupported(s, d);
  CHECK(r.rfind("PacketSize=20000;", 0) == 0);
  for (const char* f : {"QPassSignals+", "QStartNoAckMode+", "qXfer:features:read+", "multiprocess+", "swbreak+",
                        "hwbreak+", "vContSupported+", "Qbtrace:bts+", "Qbtrace-conf:bts:size+", "Qbtrace:off+",
                        "qXfer:btrace:read+", "qXfer:btrace-conf:read+", "stepbranch+", "qXfer:exec-file:read+", "QCatchSyscalls+"})
    CHECK(has(r, f));
  CHECK(has(r, "fork-events+"));
  CHECK(has(r, "vfork-events+"));
  CHECK(has(r, "no-resumed+"));
  CHECK_FALSE(has(format_qsupported(s, negotiate(offer("qSupported:multiprocess+"))), "no-resumed+"));
  CHECK(has(r, "qXfer:siginfo:read+"));
  CHECK(has(r, "qXfer:siginfo:write+"));
  CHECK(has(r, "qXfer:osdata:read+"));
  CHECK_FALSE(has(r, "native-signals+"));  // GDB gets GDB's signal numbers
  CHECK(has(r, "exec-events+"));
  CHECK_FALSE(has(format_qsupported(s, negotiate(offer("qSupported:multiprocess+"))), "exec-events+"));
  // Intel PT only where the server found the intel_pt PMU (issue 10: it was always listed)
  CHECK_FALSE(has(r, "Qbtrace:pt+"));
  CHECK_FALSE(has(r, "Qbtrace-conf:pt:size+"));
  Capabilities with_pt = s;
  with_pt.set(Capability::BtracePt);
  std::string rpt = format_qsupported(with_pt, d);
  CHECK(has(rpt, "Qbtrace:pt+"));
  CHECK(has(rpt, "Qbtrace-conf:pt:size+"));

  CHECK_FALSE(has(r, "QNonStop+"));
  CHECK_FALSE(has(r, "QThreadEvents+"));
  CHECK_FALSE(has(r, "Qbtrace:pt+"));
  CHECK_FALSE(has(r, "Qbtrace-conf:pt:size+"));

  Dialect lldb = negotiate(offer("qSupported:xmlRegisters=i386,arm"));
  REQUIRE(lldb.lldb);
  CHECK(has(format_qsupported(s, lldb), "native-signals+"));
  s.set(Capability::BtraceBts, false).set(Capability::StepBranch, false);
  std::string r2 = format_qsupported(s, lldb);
  CHECK_FALSE(has(r2, "swbreak+"));
  CHECK_FALSE(has(r2, "multiprocess+"));
  CHECK_FALSE(has(r2, "Qbtrace:bts+"));
  CHECK_FALSE(has(r2, "qXfer:btrace:read+"));
  CHECK_FALSE(has(r2, "stepbranch+"));
  CHECK(has(r2, "qXfer:auxv:read+"));
}

TEST_CASE("reverse execution is offered only with the capability (a replay)", "[qsupported]") {
  Dialect gdb = negotiate(offer("qSupported:multiprocess+;swbreak+"));
  Capabilities s;
  CHECK_FALSE(has(format_qsupported(s, gdb), "ReverseContinue+"));
  CHECK_FALSE(has(format_qsupported(s, gdb), "ReverseStep+"));
  s.set(Capability::Reverse);
  CHECK(has(format_qsupported(s, gdb), "ReverseContinue+"));
  CHECK(has(format_qsupported(s, gdb), "ReverseStep+"));
}

TEST_CASE("qSupported lists target-side conditions and commands only with their capabilities", "[qsupported]") {
  Dialect d = negotiate(offer(kGdbOffer));
  Capabilities s;
  CHECK_FALSE(has(format_qsupported(s, d), "ConditionalBreakpoints+"));
  CHECK_FALSE(has(format_qsupported(s, d), "BreakpointCommands+"));
  s.set(Capability::ConditionalBreakpoints);
  CHECK(has(format_qsupported(s, d), "ConditionalBreakpoints+"));
  CHECK_FALSE(has(format_qsupported(s, d), "BreakpointCommands+"));
  s.set(Capability::BreakpointCommands);
  CHECK(has(format_qsupported(s, d), "BreakpointCommands+"));
}

TEST_CASE("a packet without its capability is unknown", "[qsupported]") {
  Capabilities base;  // Base alone
  CHECK(std::holds_alternative<Unknown>(parse_request("stepbranch", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("Qbranchstub:stepbranch-next:1,1", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("qbranchstub:stepbranch-last", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("Qbtrace:bts", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("qXfer:btrace:read:all:0,1000", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("QCatchSyscalls:1", base)));
  CHECK(std::holds_alternative<XferRead>(parse_request("qXfer:auxv:read::0,1000", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("qXfer:nosuchobject:read::0,10", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("qXfer:auxv:write::0:ab", base)));  // not writable
  CHECK(std::holds_alternative<XferWrite>(parse_request("qXfer:siginfo:write::0:ab", base)));
  base.set(Capability::StepBranch);
  CHECK(std::holds_alternative<StepBranch>(parse_request("stepbranch", base)));
  CHECK(std::holds_alternative<StepBranchNext>(parse_request("Qbranchstub:stepbranch-next:1,1", base)));
  // Non-stop: QNonStop:0 is always answered (all-stop), vStopped only with the capability.
  CHECK(std::holds_alternative<SetNonStop>(parse_request("QNonStop:0", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("vStopped", base)));
  CHECK(std::holds_alternative<Unknown>(parse_request("QThreadEvents:1", base)));
  base.set(Capability::NonStop).set(Capability::ThreadEvents);
  CHECK(std::holds_alternative<VStopped>(parse_request("vStopped", base)));
  CHECK(std::holds_alternative<SetThreadEvents>(parse_request("QThreadEvents:1", base)));
  CHECK(has(format_qsupported(base, negotiate(offer(kGdbOffer))), "QNonStop+"));
  CHECK_FALSE(has(format_qsupported(Capabilities{}, negotiate(offer(kGdbOffer))), "QNonStop+"));
}

TEST_CASE("every capability is listed by some qSupported row or qXfer object", "[qsupported]") {
  // A capability nothing advertises would be served to nobody (a forgotten row).
  for (size_t i = 0; i < Capabilities::kCount; ++i) {
    auto c = static_cast<Capability>(i);
    if (c == Capability::Base) continue;
    Capabilities only;
    only.set(c);
    std::string with = format_qsupported(only, negotiate(offer(kGdbOffer)));
    std::string without = format_qsupported(Capabilities{}, negotiate(offer(kGdbOffer)));
    INFO(capability_name(c));
    CHECK(with != without);
  }
}

TEST_CASE("signal mapping", "[signals]") {
  CHECK(host_to_gdb_signal(0) == 0);
  CHECK(host_to_gdb_signal(5) == 5);    // TRAP
  CHECK(host_to_gdb_signal(7) == 10);   // BUS
  CHECK(host_to_gdb_signal(10) == 30);  // USR1
  CHECK(host_to_gdb_signal(12) == 31);  // USR2
  CHECK(host_to_gdb_signal(17) == 20);  // CHLD
  CHECK(host_to_gdb_signal(19) == 17);  // STOP
  CHECK(host_to_gdb_signal(29) == 23);  // IO
  CHECK(host_to_gdb_signal(31) == 12);  // SYS
  CHECK(host_to_gdb_signal(32) == 77);
  CHECK(host_to_gdb_signal(33) == 45);
  CHECK(host_to_gdb_signal(63) == 75);
  CHECK(host_to_gdb_signal(64) == 78);
  CHECK(host_to_gdb_signal(16) == kGdbSignalUnknown);
  CHECK(host_to_gdb_signal(99) == kGdbSignalUnknown);
  CHECK(gdb_to_host_signal(33) == 29);  // POLL
  CHECK(gdb_to_host_signal(7) == 0);    // EMT: none on Linux
  CHECK(gdb_to_host_signal(kGdbSignalUnknown) == 0);
  for (int s = 1; s <= 64; ++s) {
    if (s == 16) continue;
    INFO("signal " << s);
    CHECK(gdb_to_host_signal(host_to_gdb_signal(s)) == s);
  }
}

TEST_CASE("pass/program signal lists are GDB numbers", "[signals]") {
  // GDB_SIGNAL_POLL (33) names no Linux signal: SIGIO (29) is GDB_SIGNAL_IO (23).
  CHECK(host_signals_listed({33}).empty());
  CHECK(host_signals_listed({23}) == std::set<int>{29});
  CHECK(host_signals_listed({33, 23, 14}) == std::set<int>{14, 29});
  CHECK(host_signals_listed({30, 31, 20}) == std::set<int>{10, 12, 17});  // USR1 USR2 CHLD
  CHECK(host_signals_listed({77, 45, 75, 78}) == std::set<int>{32, 33, 63, 64});
  CHECK(host_signals_listed({12}) == std::set<int>{31});  // SYS
  CHECK(host_signals_listed({0, 7, 200, -1}).empty());    // none, EMT, nonsense
  CHECK(host_signals_listed({}).empty());
}

TEST_CASE("threads and libraries XML", "[xml]") {
  CHECK(threads_xml({{0x1182, 0x1182, 0, "prog"}}, true) ==
        "<threads>\n<thread id=\"p1182.1182\" core=\"0\" name=\"prog\"/>\n</threads>\n");
  CHECK(threads_xml({{1, 2, -1, ""}}, false) == "<threads>\n<thread id=\"2\"/>\n</threads>\n");
  // The core is decimal, as gdbserver writes it (GDB refuses core="e"; seen on a 16-CPU host).
  CHECK(threads_xml({{1, 2, 14, ""}}, false) == "<threads>\n<thread id=\"2\" core=\"14\"/>\n</threads>\n");
  CHECK(threads_xml({{1, 2, -1, "a<&>\"'"}}, false).find("name=\"a&lt;&amp;&gt;&quot;&apos;\"") != std::string::npos);
  CHECK(libraries_svr4_xml({}, std::nullopt) == "<library-list-svr4 version=\"1.0\"></library-list-svr4>");
  std::string l = libraries_svr4_xml({{"/lib/libc.so.6", 0x10, 0x7f00, 0x7f80}}, 0x20);
  CHECK(l == "<library-list-svr4 version=\"1.0\" main-lm=\"0x20\"><library name=\"/lib/libc.so.6\" lm=\"0x10\" "
             "l_addr=\"0x7f00\" l_ld=\"0x7f80\" lmid=\"0x0\"/></library-list-svr4>");
  CHECK(libraries_svr4_xml({}, std::nullopt).find("main-lm") == std::string::npos);
  // lmid names the library's link-map namespace (its r_debug), as gdbserver's does.
  CHECK(libraries_svr4_xml({{"/lib/libm.so.6", 1, 2, 3, 0x7ffff7ffe000}}, std::nullopt)
            .find("lmid=\"0x7ffff7ffe000\"/>") != std::string::npos);
}

TEST_CASE("osdata XML", "[xml]") {
  CHECK(osdata_xml("processes", {}) == "<osdata type=\"processes\">\n</osdata>\n");
  CHECK(osdata_xml("I sockets", {{{"pid", "1"}, {"command", "/sbin/init "}}, {{"pid", "2"}, {"command", "[kthreadd]"}}}) ==
        "<osdata type=\"I sockets\">\n"
        "<item><column name=\"pid\">1</column><column name=\"command\">/sbin/init </column></item>"
        "<item><column name=\"pid\">2</column><column name=\"command\">[kthreadd]</column></item>"
        "</osdata>\n");
  // Markup is escaped; control bytes (forbidden in XML) become '?'.
  CHECK(osdata_xml("files", {{{"name", "a<b>&\"c'\x01\x1b\td"}}}) ==
        "<osdata type=\"files\">\n<item><column name=\"name\">a&lt;b&gt;&amp;&quot;c&apos;??\td</column></item>"
        "</osdata>\n");
}

TEST_CASE("btrace XML", "[xml][btrace]") {
  CHECK(btrace_xml({{0x55555555528a, 0x55555555528c}, {0, 0x5555555551eb}}) ==
        "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n"
        "<block begin=\"0x55555555528a\" end=\"0x55555555528c\"/>\n"
        "<block begin=\"0x0\" end=\"0x5555555551eb\"/>\n</btrace>\n");
  CHECK(btrace_xml({}).find('\0') == std::string::npos);
  CHECK(btrace_conf_xml(0x10000, std::nullopt) ==
        "<!DOCTYPE btrace-conf SYSTEM \"btrace-conf.dtd\">\n<btrace-conf version=\"1.0\">\n"
        "<bts size=\"0x10000\"/>\n</btrace-conf>\n");
  // PT: the size and GDB 15's two options (btrace-conf.dtd), as the recording has them.
  CHECK(btrace_conf_xml(std::nullopt, 0x4000).find("<pt size=\"0x4000\" ptwrite=\"no\" event-tracing=\"no\"/>\n") !=
        std::string::npos);
  CHECK(btrace_conf_xml(std::nullopt, 0x4000, {true, false}).find("ptwrite=\"yes\" event-tracing=\"no\"") !=
        std::string::npos);
}

TEST_CASE("btrace XML: Intel PT document as gdbserver writes it", "[xml][btrace]") {
  const uint8_t raw[] = {0x02, 0x82, 0x02, 0x82, 0x00, 0xff, 0x0a};
  CHECK(btrace_pt_xml({"GenuineIntel", 6, 167, 1}, raw) ==
        "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n<pt>\n<pt-config>\n"
        "<cpu vendor=\"GenuineIntel\" family=\"6\" model=\"167\" stepping=\"1\"/>\n</pt-config>\n"
        "<raw>\n0282028200ff0a</raw>\n</pt>\n</btrace>\n");
  // no data: no <raw>; another vendor: no <cpu>
  CHECK(btrace_pt_xml({"AuthenticAMD", 25, 1, 0}, {}) ==
        "<!DOCTYPE btrace SYSTEM \"btrace.dtd\">\n<btrace version=\"1.0\">\n<pt>\n<pt-config>\n"
        "</pt-config>\n</pt>\n</btrace>\n");
}

namespace {
std::vector<RegisterSpec> amd64_registers() {
  std::vector<RegisterSpec> regs;
  int n = 0;
  auto add = [&](std::string name, int bits, std::string type, std::string feature, std::string group = "") {
    regs.push_back({std::move(name), bits, std::move(type), std::move(group), std::move(feature), n++});
  };
  const std::string core = "org.gnu.gdb.i386.core", sse = "org.gnu.gdb.i386.sse";
  for (const char* r : {"rax", "rbx", "rcx", "rdx", "rsi", "rdi"}) add(r, 64, "int64", core);
  add("rbp", 64, "data_ptr", core);
  add("rsp", 64, "data_ptr", core);
  for (int i = 8; i < 16; ++i) add("r" + std::to_string(i), 64, "int64", core);
  add("rip", 64, "code_ptr", core);
  add("eflags", 32, "i386_eflags", core);
  for (const char* r : {"cs", "ss", "ds", "es", "fs", "gs"}) add(r, 32, "int32", core);
  for (int i = 0; i < 8; ++i) add("st" + std::to_string(i), 80, "i387_ext", core);
  for (const char* r : {"fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop"}) add(r, 32, "int", core, "float");
  for (int i = 0; i < 16; ++i) add("xmm" + std::to_string(i), 128, "vec128", sse);
  add("mxcsr", 32, "i386_mxcsr", sse, "vector");
  add("orig_rax", 64, "int", "org.gnu.gdb.i386.linux");
  add("fs_base", 64, "int", "org.gnu.gdb.i386.segments");
  add("gs_base", 64, "int", "org.gnu.gdb.i386.segments");
  for (int i = 0; i < 16; ++i) add("ymm" + std::to_string(i) + "h", 128, "uint128", "org.gnu.gdb.i386.avx");
  for (int i = 0; i < 32; ++i) add("zmm" + std::to_string(i) + "h", 256, "v2ui128", "org.gnu.gdb.i386.avx512");
  return regs;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

// Minimal well-formedness check: every tag closes in order, quotes balance.
bool well_formed(const std::string& xml) {
  std::vector<std::string> stack;
  size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    size_t end = xml.find('>', pos);
    if (end == std::string::npos) return false;
    std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty()) return false;
    if (count(tag, "\"") % 2 != 0) return false;
    if (tag[0] == '?' || tag[0] == '!') continue;
    if (tag[0] == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) return false;
      stack.pop_back();
      continue;
    }
    if (tag.back() == '/') continue;
    stack.push_back(tag.substr(0, tag.find(' ')));
  }
  return stack.empty();
}
}  // namespace

TEST_CASE("target.xml", "[xml][tdesc]") {
  auto regs = amd64_registers();
  std::string xml = target_xml(regs);
  CHECK(well_formed(xml));
  CHECK(xml.rfind("<?xml version=\"1.0\"?>\n<!DOCTYPE target SYSTEM \"gdb-target.dtd\">\n<target>\n"
                  "<architecture>i386:x86-64</architecture>\n<osabi>GNU/Linux</osabi>\n",
                  0) == 0);
  for (const auto& r : regs) {
    INFO(r.name);
    CHECK(count(xml, "<reg name=\"" + r.name + "\" ") == 1);
    CHECK(count(xml, "regnum=\"" + std::to_string(r.regnum) + "\"") == 1);
  }
  CHECK(count(xml, "<feature name=") == 6);
  CHECK(count(xml, "<union id=\"vec128\">") == 1);
  CHECK(count(xml, "<flags id=\"i386_eflags\"") == 1);
  CHECK(count(xml, "<flags id=\"i386_mxcsr\"") == 1);
  CHECK(count(xml, "<vector id=\"v2ui128\"") == 1);
  // The union's element types come before it, inside the sse feature.
  CHECK(xml.find("<vector id=\"v4f\"") < xml.find("<union id=\"vec128\">"));
  CHECK(xml.find("<feature name=\"org.gnu.gdb.i386.sse\">") < xml.find("<vector id=\"v4f\""));
  CHECK(xml.find("group=\"float\"") != std::string::npos);

  CHECK(well_formed(empty_target_xml()));
  CHECK(empty_target_xml().find("<reg") == std::string::npos);
  CHECK(empty_target_xml().find("<architecture>i386:x86-64</architecture>") != std::string::npos);
}

TEST_CASE("fileio", "[fileio]") {
  CHECK(fileio_to_host_open_flags(0) == O_RDONLY);
  CHECK(fileio_to_host_open_flags(0x601) == (O_WRONLY | O_CREAT | O_TRUNC));
  CHECK(fileio_to_host_open_flags(0x80a) == (O_RDWR | O_APPEND | O_EXCL));
  CHECK(fileio_to_host_mode(0x1a4) == 0644);
  CHECK(host_to_fileio_errno(ENOENT) == 2);
  CHECK(host_to_fileio_errno(ENAMETOOLONG) == 91);
  CHECK(host_to_fileio_errno(EXDEV) == 9999);
  CHECK(file_result(6) == "F6");
  CHECK(file_result(0x47d8) == "F47d8");
  CHECK(file_result(-1) == "F-1");
  CHECK(file_error(ENOENT) == "F-1,2");
  const std::vector<uint8_t> data{'a', '#', 'b'};
  CHECK(file_data(3, data) == "F3;a}\x03" "b");

  struct stat st {};
  st.st_dev = 0x01020304;
  st.st_ino = 0x0a0b0c0d;
  st.st_mode = S_IFREG | 0755;
  st.st_nlink = 1;
  st.st_uid = 1000;
  st.st_gid = 1000;
  st.st_size = 0x123456789aLL;
  st.st_blksize = 4096;
  st.st_blocks = 8;
  st.st_atime = 0x11223344;
  st.st_mtime = 0x55667788;
  st.st_ctime = 0x01;
  std::string s = encode_fio_stat(st);
  REQUIRE(s.size() == 64);
  auto u8 = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  CHECK(u8(0) == 1);
  CHECK(u8(3) == 4);
  CHECK(u8(4) == 0x0a);
  // mode 0100755 big-endian at offset 8
  CHECK(u8(8) == 0);
  CHECK(u8(9) == 0);
  CHECK(u8(10) == 0x81);
  CHECK(u8(11) == 0xed);
  CHECK(u8(30) == 0);      // st_size at 28..35
  CHECK(u8(31) == 0x12);
  CHECK(u8(35) == 0x9a);
  CHECK(u8(42) == 0x10);   // blksize 4096 = 0x1000 at 36..43
  CHECK(u8(51) == 8);      // blocks at 44..51
  CHECK(u8(52) == 0x11);   // atime at 52
  CHECK(u8(59) == 0x88);   // mtime at 56..59
  CHECK(u8(63) == 1);      // ctime at 60..63
}
