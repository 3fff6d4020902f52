// Parsers and table rows of the register and memory packets.
#include "protocol/packets/registers_memory.h"

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"
#include "protocol/thread_id.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

// Strips LLDB's ";thread:<tid>;" suffix (QThreadSuffixSupported). Returns false when a
// suffix is present but unreadable.
bool strip_thread_suffix(string_view& args, std::optional<int>& thread) {
  auto pos = args.find(";thread:");
  if (pos == string_view::npos) return true;
  string_view id = args.substr(pos + 8);
  if (!id.empty() && id.back() == ';') id.remove_suffix(1);
  args = args.substr(0, pos);
  auto tid = parse_thread_id(id);
  if (!tid || tid->tid <= 0) return false;
  thread = tid->tid;
  return true;
}

Request p_read_registers(string_view args) {
  ReadRegisters r;
  if (!strip_thread_suffix(args, r.thread_suffix)) return malformed("g: bad thread suffix");
  if (!args.empty()) return malformed("g: unexpected argument");
  return r;
}

Request p_write_registers(string_view args) {
  WriteRegisters w;
  if (!strip_thread_suffix(args, w.thread_suffix)) return malformed("G: bad thread suffix");
  auto data = from_hex(args);
  if (!data) return malformed("G: bad hex");
  w.data = std::move(*data);
  return w;
}

Request p_read_register(string_view args) {
  ReadRegister r;
  if (!strip_thread_suffix(args, r.thread_suffix)) return malformed("p: bad thread suffix");
  auto n = hex_int(args);
  if (!n) return malformed("p: bad register number");
  r.regno = *n;
  return r;
}

Request p_write_register(string_view args) {
  WriteRegister w;
  if (!strip_thread_suffix(args, w.thread_suffix)) return malformed("P: bad thread suffix");
  auto eq = args.find('=');
  if (eq == string_view::npos) return malformed("P: missing '='");
  auto n = hex_int(args.substr(0, eq));
  auto value = from_hex(args.substr(eq + 1));
  if (!n || !value) return malformed("P: bad register or value");
  w.regno = *n;
  w.value = std::move(*value);
  return w;
}

Request p_read_memory(string_view args, bool binary) {
  auto al = addr_len(args);
  if (!al) return malformed(binary ? "x: bad addr,len" : "m: bad addr,len");
  return ReadMemory{al->first, al->second, binary};
}

Request p_write_memory(string_view args, bool binary) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return malformed("M/X: missing ':'");
  auto al = addr_len(args.substr(0, colon));
  if (!al) return malformed("M/X: bad addr,len");
  string_view data = args.substr(colon + 1);
  WriteMemory w{al->first, {}};
  if (binary) {
    w.data.assign(data.begin(), data.end());
  } else {
    auto bytes = from_hex(data);
    if (!bytes) return malformed("M: bad hex");
    w.data = std::move(*bytes);
  }
  // The length must describe the data exactly (it is never used to allocate).
  if (w.data.size() != al->second) return malformed("M/X: length does not match data");
  return w;
}

constexpr PacketRow kRows[] = {
    {"g", false, p_read_registers},
    {"G", false, p_write_registers},
    {"p", false, p_read_register},
    {"P", false, p_write_register},
    {"m", false, [](string_view a) { return p_read_memory(a, false); }},
    {"x", false, [](string_view a) { return p_read_memory(a, true); }},
    {"M", false, [](string_view a) { return p_write_memory(a, false); }},
    {"X", false, [](string_view a) { return p_write_memory(a, true); }},
};

}  // namespace

std::span<const PacketRow> registers_memory_rows() { return kRows; }

}  // namespace protocol
