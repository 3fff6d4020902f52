// Parsers and table rows of the execution packets.
#include "protocol/packets/execution.h"

#include <charconv>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

// One vCont action: c, Csig, s, Ssig, t, rSTART,END, each with an optional ":thread".
std::optional<ResumeAction> parse_action(string_view text) {
  ResumeAction a;
  auto colon = text.find(':');
  string_view verb = text.substr(0, colon);
  if (colon != string_view::npos) {
    auto id = parse_thread_id(text.substr(colon + 1));
    if (!id) return std::nullopt;
    a.thread = *id;
  }
  if (verb.empty()) return std::nullopt;
  char op = verb[0];
  string_view rest = verb.substr(1);
  switch (op) {
    case 'c':
    case 's':
    case 't':
      if (!rest.empty()) return std::nullopt;
      a.op = op == 'c' ? VContOp::Continue : op == 's' ? VContOp::Step : VContOp::Stop;
      return a;
    case 'C':
    case 'S': {
      auto sig = hex_int(rest);
      if (!sig || *sig > 0xff) return std::nullopt;
      a.op = op == 'C' ? VContOp::Continue : VContOp::Step;
      a.gdb_signal = *sig;
      return a;
    }
    case 'r': {
      auto range = addr_len(rest);
      if (!range) return std::nullopt;
      a.op = VContOp::RangeStep;
      a.range_start = range->first;
      a.range_end = range->second;
      return a;
    }
    default:
      return std::nullopt;
  }
}

Request p_vcont(string_view args) {
  if (args == "?") return VContQuery{};
  if (args.empty() || args[0] != ';') return malformed("vCont: expected ';'");
  VCont v;
  for (string_view item : split(args.substr(1), ';')) {
    auto action = parse_action(item);
    if (!action) return malformed("vCont: bad action");
    v.actions.push_back(*action);
  }
  return v;
}

// c[addr], s[addr], Csig[;addr], Ssig[;addr].
Request p_legacy(char op, string_view args) {
  LegacyResume r;
  r.action.op = (op == 'c' || op == 'C') ? VContOp::Continue : VContOp::Step;
  string_view addr = args;
  if (op == 'C' || op == 'S') {
    auto semi = args.find(';');
    auto sig = hex_int(args.substr(0, semi));
    if (!sig || *sig > 0xff) return malformed("C/S: bad signal");
    r.action.gdb_signal = *sig;
    addr = semi == string_view::npos ? string_view{} : args.substr(semi + 1);
  }
  if (!addr.empty()) {
    auto a = parse_hex_u64(addr);
    if (!a) return malformed("c/s: bad address");
    r.addr = *a;
  }
  return r;
}

Request p_stepbranch(string_view args) {
  if (args.empty()) return StepBranch{};
  if (args[0] != ':') return Unknown{"stepbranch" + std::string(args)};
  string_view n = args.substr(1);
  uint32_t count = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count, 10);
  if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || count == 0)
    return malformed("stepbranch: bad count");
  return StepBranch{count};
}

// <thread-id>,<N>[;bp:<addr>] (N decimal, like stepbranch:N; addr hex).
Request p_stepbranch_next(string_view args) {
  auto comma = args.find(',');
  if (comma == string_view::npos) return malformed("stepbranch-next: expected <thread-id>,<N>");
  auto id = parse_thread_id(args.substr(0, comma));
  if (!id || id->tid <= 0) return malformed("stepbranch-next: bad thread id");
  string_view n = args.substr(comma + 1);
  std::optional<uint64_t> lifted;
  if (auto semi = n.find(';'); semi != string_view::npos) {
    string_view field = n.substr(semi + 1);
    n = n.substr(0, semi);
    constexpr string_view kBp = "bp:";
    if (field.substr(0, kBp.size()) != kBp) return malformed("stepbranch-next: unknown field");
    string_view hex = field.substr(kBp.size());
    uint64_t addr = 0;
    auto [aend, aec] = std::from_chars(hex.data(), hex.data() + hex.size(), addr, 16);
    if (hex.empty() || aec != std::errc{} || aend != hex.data() + hex.size())
      return malformed("stepbranch-next: bad breakpoint address");
    lifted = addr;
  }
  uint32_t count = 0;
  auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count, 10);
  if (n.empty() || ec != std::errc{} || end != n.data() + n.size() || count == 0)
    return malformed("stepbranch-next: bad count");
  return StepBranchNext{*id, count, lifted};
}

Request p_kill(string_view args) {
  auto pid = hex_int(args);
  if (!pid) return malformed("vKill: bad pid");
  return Kill{*pid};
}

Request p_detach(string_view args) {
  if (args.empty()) return Detach{};
  if (args[0] != ';') return malformed("D: bad argument");
  auto pid = hex_int(args.substr(1));
  if (!pid) return malformed("D: bad pid");
  return Detach{*pid};
}

Request p_vrun(string_view args) {
  VRun r;
  for (string_view item : split(args, ';')) {
    auto text = from_hex_string(item);
    if (!text) return malformed("vRun: bad hex");
    r.argv.push_back(std::move(*text));
  }
  return r;
}

Request p_vattach(string_view args) {
  auto pid = hex_int(args);
  if (!pid || *pid == 0) return malformed("vAttach: bad pid");
  return VAttach{*pid};
}

constexpr PacketRow kRows[] = {
    {"vCont", false, p_vcont},
    {"vCtrlC", true, make<VCtrlC>},
    {"vStopped", true, make<VStopped>, Capability::NonStop},
    {"stepbranch", false, p_stepbranch, Capability::StepBranch},
    {"Qbranchstub:stepbranch-next:", false, p_stepbranch_next, Capability::StepBranch},
    {"qbranchstub:stepbranch-last", true, make<StepBranchLast>, Capability::StepBranch},
    {"bc", true, [](string_view) -> Request { return ReverseResume{false}; }, Capability::Reverse},
    {"bs", true, [](string_view) -> Request { return ReverseResume{true}; }, Capability::Reverse},
    {"vKill;", false, p_kill},
    {"vRun;", false, p_vrun},
    {"vAttach;", false, p_vattach},
    {"c", false, [](string_view a) { return p_legacy('c', a); }},
    {"C", false, [](string_view a) { return p_legacy('C', a); }},
    {"s", false, [](string_view a) { return p_legacy('s', a); }},
    {"S", false, [](string_view a) { return p_legacy('S', a); }},
    {"k", true, [](string_view) -> Request { return Kill{}; }},
    {"D", false, p_detach},
    {"R", false, make<Restart>},  // GDB sends "R00"; the argument means nothing
};

}  // namespace

std::span<const PacketRow> execution_rows() { return kRows; }

}  // namespace protocol
