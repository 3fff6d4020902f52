#include "server/selftest.h"

#include <fmt/format.h>

#include <source_location>
#include <string_view>
#include <variant>

#include "protocol/disabled_packets.h"
#include "protocol/framing.h"
#include "protocol/hex.h"
#include "protocol/packets.h"
#include "protocol/qsupported.h"
#include "protocol/replies.h"
#include "protocol/thread_id.h"
#include "server/log.h"
#include "server/options.h"

namespace server {

namespace {

using namespace std::string_view_literals;

void check(bool ok, std::string_view what, std::source_location where = std::source_location::current()) {
  if (!ok) throw SelfTestFailure(fmt::format("{}:{}: {}", where.file_name(), where.line(), what));
}

// ---- framing: what encode() writes, feed() gives back, in any chunking ----

std::vector<protocol::Framer::Event> feed_bytewise(protocol::Framer& framer, std::string_view bytes) {
  std::vector<protocol::Framer::Event> events;
  for (char c : bytes)
    for (auto& e : framer.feed(std::string_view(&c, 1))) events.push_back(std::move(e));
  return events;
}

void framing_round_trip() {
  using Kind = protocol::Framer::Event::Kind;
  // Long runs (RLE), and every byte that needs an escape in a binary payload.
  const std::string raw = std::string("OK") + std::string(200, 'a') + "$#}*" + std::string(5, '0') + "x";
  const std::string binary = protocol::escape_binary(std::string_view(raw));
  const std::vector<std::string> payloads = {"", "OK", "T05thread:p1.1;", std::string(1000, 'f'), binary};
  for (const auto& payload : payloads) {
    // Without RLE (how clients send): the framer hands back the unescaped payload.
    std::string plain = protocol::Framer::encode(payload, false);
    protocol::Framer whole, bytewise;
    auto a = whole.feed(plain);
    auto b = feed_bytewise(bytewise, plain);
    check(a.size() == 1 && a[0].kind == Kind::Packet, "one packet from one frame");
    check(b.size() == 1 && b[0].kind == Kind::Packet, "one packet from one frame fed byte by byte");
    check(a[0].payload == protocol::unescape_binary(payload), "the framer gives back what was encoded");
    check(a[0].payload == b[0].payload, "chunking does not change the payload");
    // With RLE (how we reply): a valid frame whose body expands to the payload.
    std::string packed = protocol::Framer::encode(payload);
    check(packed.front() == '$' && packed[packed.size() - 3] == '#', "a frame is $...#cs");
    auto expanded = protocol::rle_expand(std::string_view(packed).substr(1, packed.size() - 4));
    check(expanded && *expanded == payload, "the RLE body expands to the payload");
    protocol::Framer checker;
    auto c = checker.feed(packed);
    check(c.size() == 1 && c[0].kind == Kind::Packet, "the RLE frame's checksum is right");
  }
  check(protocol::unescape_binary(binary) == raw, "the binary payload survives escaping");
  // A corrupted checksum is noticed in ack mode; an interrupt and acks are events of their own.
  std::string framed = protocol::Framer::encode("qSupported");
  framed[framed.size() - 1] = framed[framed.size() - 1] == '0' ? '1' : '0';
  protocol::Framer framer;
  auto bad = framer.feed(framed);
  check(bad.size() == 1 && bad[0].kind == Kind::BadChecksum, "a bad checksum is reported");
  auto misc = framer.feed("+-\x03");
  check(misc.size() == 3 && misc[0].kind == Kind::Ack && misc[1].kind == Kind::Nack &&
            misc[2].kind == Kind::Interrupt,
        "+, - and ^C outside a packet");
}

// ---- hex, binary escapes, RLE ----

void hex_codecs() {
  std::vector<uint8_t> all(256);
  for (int i = 0; i < 256; ++i) all[i] = static_cast<uint8_t>(i);
  std::string hex = protocol::to_hex(all);
  check(hex.size() == 512 && hex.substr(0, 6) == "000102" && hex.substr(506) == "fdfeff", "to_hex");
  auto back = protocol::from_hex(hex);
  check(back && *back == all, "from_hex(to_hex(x)) == x");
  check(protocol::from_hex("ABcd") == std::vector<uint8_t>{0xab, 0xcd}, "either case");
  check(!protocol::from_hex("abc"), "odd length refused");
  check(!protocol::from_hex("zz"), "non-hex refused");
  for (uint64_t v : {0ull, 1ull, 0x7fffffffffffull, ~0ull})
    check(protocol::parse_hex_u64(protocol::hex_u64(v)) == v, "parse_hex_u64(hex_u64(v)) == v");
  check(!protocol::parse_hex_u64("") && !protocol::parse_hex_u64("1ffffffffffffffff"), "hex_u64 bounds");

  std::string bytes(reinterpret_cast<const char*>(all.data()), all.size());
  std::string escaped = protocol::escape_binary(std::string_view(bytes));
  for (char c : "$#*"sv) check(escaped.find(c) == std::string::npos, "escaped binary has no $ # *");
  check(protocol::unescape_binary(escaped) == bytes, "unescape(escape(x)) == x");

  for (const std::string& s : {std::string(100, 'z'), std::string("ab") + std::string(7, '#') + "cd",
                               std::string(3, '0') + std::string(97, '1'), std::string("}") + std::string(50, ']')}) {
    std::string packed = protocol::rle_compress(s);
    auto unpacked = protocol::rle_expand(packed);
    check(unpacked && *unpacked == s, "rle_expand(rle_compress(x)) == x");
    check(packed.find('#') == std::string::npos || s.find('#') != std::string::npos, "no '#' count char");
  }
  check(protocol::rle_compress(std::string(100, 'z')).size() < 100, "runs are compressed");
  check(!protocol::rle_expand("*a"), "a run needs a character before it");
}

// ---- packets: one sample per row of the table in protocol/packets.cc ----

template <typename T, typename Pred>
void parses_as(std::string_view payload, Pred&& ok) {
  protocol::Request r = protocol::parse_request(payload);
  const T* typed = std::get_if<T>(&r);
  check(typed != nullptr, fmt::format("'{}' parses as the right request (got index {})", payload, r.index()));
  check(ok(*typed), fmt::format("'{}' parses to the right fields", payload));
}

template <typename T>
void parses_as(std::string_view payload) {
  parses_as<T>(payload, [](const T&) { return true; });
}

void packet_table() {
  using namespace protocol;
  parses_as<QuerySupported>("qSupported:multiprocess+;swbreak+;xmlRegisters=i386",
                            [](const QuerySupported& q) { return q.features.size() == 3; });
  parses_as<MustReplyEmpty>("vMustReplyEmpty");
  parses_as<StartNoAckMode>("QStartNoAckMode");
  parses_as<EnableExtendedMode>("!");
  parses_as<QueryHaltReason>("?");
  parses_as<QueryCurrentThread>("qC");
  parses_as<ThreadInfoFirst>("qfThreadInfo");
  parses_as<ThreadInfoNext>("qsThreadInfo");
  parses_as<QueryAttached>("qAttached:1182", [](const QueryAttached& q) { return q.pid == 0x1182; });
  parses_as<QueryOffsets>("qOffsets");
  parses_as<QuerySymbol>("qSymbol::", [](const QuerySymbol& q) { return q.raw == ":"; });
  parses_as<QueryTStatus>("qTStatus");
  parses_as<SetNonStop>("QNonStop:1", [](const SetNonStop& q) { return q.on; });
  parses_as<SetPassSignals>("QPassSignals:e;14", [](const SetPassSignals& q) {
    return q.gdb_signals == std::vector<int>{0xe, 0x14};
  });
  parses_as<SetProgramSignals>("QProgramSignals:0;1", [](const SetProgramSignals& q) { return q.gdb_signals.size() == 2; });
  parses_as<SetDisableRandomization>("QDisableRandomization:0", [](const SetDisableRandomization& q) { return !q.on; });
  parses_as<SetStartupWithShell>("QStartupWithShell:1", [](const SetStartupWithShell& q) { return q.on; });
  parses_as<SetEnvironment>("QEnvironmentHexEncoded:413d31", [](const SetEnvironment& q) { return q.var_eq_value == "A=1"; });
  parses_as<UnsetEnvironment>("QEnvironmentUnset:41", [](const UnsetEnvironment& q) { return q.var == "A"; });
  parses_as<ResetEnvironment>("QEnvironmentReset");
  parses_as<SetWorkingDir>("QSetWorkingDir:7e2f", [](const SetWorkingDir& q) { return q.dir == "~/"; });
  parses_as<SetCatchSyscalls>("QCatchSyscalls:1;0;3c", [](const SetCatchSyscalls& q) {
    return q.on && q.syscalls == std::vector<int>{0, 0x3c};
  });
  parses_as<SetThreadEvents>("QThreadEvents:1", [](const SetThreadEvents& q) { return q.on; });
  parses_as<Monitor>("qRcmd,68656c70", [](const Monitor& q) { return q.command == "help"; });
  parses_as<VContQuery>("vCont?");
  parses_as<VCont>("vCont;s:p1.2;c", [](const VCont& q) {
    return q.actions.size() == 2 && q.actions[0].kind == ResumeKind::Step && q.actions[0].thread &&
           q.actions[0].thread->tid == 2 && q.actions[1].kind == ResumeKind::Continue && !q.actions[1].thread;
  });
  parses_as<VCtrlC>("vCtrlC");
  parses_as<StepBranch>("stepbranch:10", [](const StepBranch& q) { return q.count == 10; });
  parses_as<StepBranchNext>("Qbranchstub:stepbranch-next:p1.2,3", [](const StepBranchNext& q) {
    return q.thread.pid == 1 && q.thread.tid == 2 && q.count == 3;
  });
  parses_as<StepBranchLast>("qbranchstub:stepbranch-last");
  parses_as<Kill>("vKill;1a", [](const Kill& q) { return q.pid == 0x1a; });
  parses_as<VRun>("vRun;2f62696e2f74727565;2d61", [](const VRun& q) {
    return q.argv == std::vector<std::string>{"/bin/true", "-a"};
  });
  parses_as<VAttach>("vAttach;1a", [](const VAttach& q) { return q.pid == 0x1a; });
  parses_as<XferRead>("qXfer:features:read:target.xml:0,1000", [](const XferRead& q) {
    return q.object == "features" && q.annex == "target.xml" && q.offset == 0 && q.length == 0x1000;
  });
  parses_as<FileOpen>("vFile:open:2f746d70,0,1c0", [](const FileOpen& q) { return q.path == "/tmp" && q.mode == 0x1c0; });
  parses_as<FilePwrite>("vFile:pwrite:6,10,he", [](const FilePwrite& q) {
    return q.fd == 6 && q.offset == 0x10 && q.data == std::vector<uint8_t>{'h', 'e'};
  });
  parses_as<FileUnlink>("vFile:unlink:2f746d70", [](const FileUnlink& q) { return q.path == "/tmp"; });
  parses_as<BtraceConf>("Qbtrace-conf:bts:size=0x10000", [](const BtraceConf& q) { return q.format == "bts"; });
  parses_as<BtraceEnable>("Qbtrace:bts", [](const BtraceEnable& q) { return q.format == "bts"; });
  parses_as<HostInfo>("qHostInfo");
  parses_as<ProcessInfo>("qProcessInfo");
  parses_as<MemoryRegionInfo>("qMemoryRegionInfo:7ffff7fc1000", [](const MemoryRegionInfo& q) { return q.addr == 0x7ffff7fc1000u; });
  parses_as<ThreadSuffixSupported>("QThreadSuffixSupported");
  parses_as<ListThreadsInStopReply>("QListThreadsInStopReply");
  parses_as<ThreadsInfo>("jThreadsInfo");
  parses_as<EnableErrorStrings>("QEnableErrorStrings");
  parses_as<WatchpointSupportInfo>("qWatchpointSupportInfo");
  parses_as<ThreadStopInfo>("qThreadStopInfo2b", [](const ThreadStopInfo& q) { return q.tid == 0x2b; });
  parses_as<RegisterInfo>("qRegisterInfo1f", [](const RegisterInfo& q) { return q.regno == 0x1f; });
  parses_as<SetThread>("Hgp1182.1183", [](const SetThread& q) { return q.op == 'g' && q.thread.tid == 0x1183; });
  parses_as<ThreadAlive>("Tp1.2", [](const ThreadAlive& q) { return q.thread == ThreadId{1, 2}; });
  parses_as<ReadRegisters>("g");
  parses_as<WriteRegisters>("G0011ff", [](const WriteRegisters& q) { return q.data == std::vector<uint8_t>{0, 0x11, 0xff}; });
  parses_as<ReadRegister>("p10", [](const ReadRegister& q) { return q.regno == 0x10; });
  parses_as<WriteRegister>("P10=0100000000000000", [](const WriteRegister& q) { return q.regno == 0x10 && q.value.size() == 8; });
  parses_as<ReadMemory>("m555555554040,2d8", [](const ReadMemory& q) { return q.addr == 0x555555554040u && q.length == 0x2d8 && !q.binary; });
  parses_as<ReadMemory>("x0,10", [](const ReadMemory& q) { return q.binary; });
  parses_as<WriteMemory>("M1000,2:abcd", [](const WriteMemory& q) { return q.addr == 0x1000 && q.data == std::vector<uint8_t>{0xab, 0xcd}; });
  parses_as<WriteMemory>(std::string_view("X10,2:\x05\0", 8), [](const WriteMemory& q) { return q.data == std::vector<uint8_t>{5, 0}; });
  parses_as<LegacyResume>("c400000", [](const LegacyResume& q) { return q.addr == 0x400000u; });
  parses_as<LegacyResume>("C05", [](const LegacyResume& q) { return q.action.gdb_signal == 5; });
  parses_as<LegacyResume>("s", [](const LegacyResume& q) { return q.action.kind == ResumeKind::Step; });
  parses_as<LegacyResume>("S0b", [](const LegacyResume& q) { return q.action.kind == ResumeKind::Step && q.action.gdb_signal == 0xb; });
  parses_as<Kill>("k", [](const Kill& q) { return !q.pid; });
  parses_as<Detach>("D;1a", [](const Detach& q) { return q.pid == 0x1a; });
  parses_as<InsertBreakpoint>("Z0,555555555149,1", [](const InsertBreakpoint& q) {
    return q.type == BreakpointType::Software && q.addr == 0x555555555149u && q.kind == 1;
  });
  parses_as<RemoveBreakpoint>("z2,55555555802c,4", [](const RemoveBreakpoint& q) { return q.type == BreakpointType::WriteWatch && q.kind == 4; });
  // Not a packet of ours, and a known one with bad arguments.
  parses_as<Unknown>("qNoSuchThing");
  parses_as<Malformed>("m12");
}

// ---- replies in the negotiated dialect ----

void stop_replies() {
  using namespace protocol;
  StopReply s;
  s.gdb_signal = 5;
  s.pid = 0x1a;
  s.tid = 0x1b;
  s.reason = StopReason::Breakpoint;
  s.registers.push_back({6, {0x10, 0, 0, 0, 0, 0, 0, 0}});
  s.core = 1;
  Dialect gdb = negotiate(QuerySupported{{"multiprocess+", "swbreak+", "hwbreak+"}});
  check(format_stop_reply(s, gdb) == "T05swbreak:;06:1000000000000000;thread:p1a.1b;core:1;", "GDB T reply");
  check(format_stop_reply(s, Dialect{}) == "T0506:1000000000000000;thread:1b;core:1;",
        "no swbreak nor multiprocess unless negotiated");
  Dialect no_thread = gdb;
  no_thread.disabled.t_thread = true;
  check(format_stop_reply(s, no_thread) == "T05swbreak:;06:1000000000000000;", "--disable-packet=Tthread");
  Dialect s_only = gdb;
  s_only.disabled.t_stop = true;
  check(format_stop_reply(s, s_only) == "S05", "--disable-packet=T");
  check(format_exit_reply(ExitReply{0x1a, 7, false, 0}, gdb) == "W07;process:1a", "exit");
  check(format_exit_reply(ExitReply{0x1a, 0, true, 9}, Dialect{}) == "X09", "killed");
  check(format_thread_id(0x1a, 0x1b, true) == "p1a.1b", "thread id");
  check(parse_thread_id(format_thread_id(0x1a, 0x1b, true)) == ThreadId{0x1a, 0x1b}, "thread id round trip");
  check(xfer_chunk("abcdef", 0, 4) == "mabcd" && xfer_chunk("abcdef", 4, 4) == "lef", "qXfer chunks");
  std::string sup = format_qsupported(Capabilities{}, gdb);
  check(sup.rfind("PacketSize=", 0) == 0 && sup.find(";multiprocess+") != std::string::npos &&
            sup.find(";swbreak+") != std::string::npos && sup.find(";QStartNoAckMode+") != std::string::npos,
        "qSupported reply lists what was negotiated");
}

void disabled_packets() {
  auto d = protocol::parse_disabled_packets("threads");
  check(d && d->vcont && d->t_thread && d->qc && d->qf_thread_info && !d->t_stop, "threads = four of them");
  check(protocol::is_disabled(protocol::parse_request("vCont?"), *d), "vCont? disabled");
  check(!protocol::is_disabled(protocol::parse_request("g"), *d), "g never disabled");
  std::string bad;
  check(!protocol::parse_disabled_packets("T,bogus", &bad) && bad == "bogus", "unknown name refused");
}

// ---- the command line ----

std::variant<ServerOptions, EarlyExit> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "branchstub");
  return parse_command_line(static_cast<int>(args.size()), args.data());
}

void command_line() {
  auto r = parse({"--once", "--disable-packet=T,qC", "localhost:2346", "prog", "--once"});
  auto* o = std::get_if<ServerOptions>(&r);
  check(o && o->once && o->comm == "localhost:2346" && o->disabled_packets.t_stop && o->disabled_packets.qc,
        "options before COMM");
  check(o && o->program == std::vector<std::string>{"prog", "--once"}, "program arguments untouched");
  auto legacy = parse({"--once", "localhost:2346", "--attach", "123"});
  auto* l = std::get_if<ServerOptions>(&legacy);
  check(l && l->attach_pid == 123, "COMM --attach PID");
  auto unknown = parse({"--no-such-option", ":1", "prog"});
  auto* e = std::get_if<EarlyExit>(&unknown);
  check(e && e->code == 1 && e->text == "Unknown argument: --no-such-option\n", "unknown option refused");
  auto format = parse_debug_format("all");
  check(format.timestamps && format.said == "All extra debug format options enabled.\n", "debug-format all");
}

}  // namespace

const std::vector<SelfTest>& builtin_selftests() {
  static const std::vector<SelfTest> tests = {
      {"protocol-framing", framing_round_trip},
      {"protocol-hex-codecs", hex_codecs},
      {"protocol-packets", packet_table},
      {"protocol-replies", stop_replies},
      {"protocol-disabled-packets", disabled_packets},
      {"server-command-line", command_line},
  };
  return tests;
}

SelfTestSummary run_selftests(const std::vector<SelfTest>& tests, const std::vector<std::string>& filters) {
  SelfTestSummary summary;
  for (const auto& test : tests) {
    bool selected = filters.empty();
    for (const auto& f : filters) selected = selected || test.name.find(f) != std::string::npos;
    if (!selected) continue;
    summary.output += fmt::format("Running selftest {}.\n", test.name);
    ++summary.ran;
    try {
      test.run();
    } catch (const std::exception& e) {
      ++summary.failed;
      summary.output += fmt::format("Self test failed: {}\n", e.what());
    }
  }
  summary.output += fmt::format("Ran {} unit tests, {} failed\n", summary.ran, summary.failed);
  return summary;
}

}  // namespace server
