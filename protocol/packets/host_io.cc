// Parser and table row of the host I/O packets.
#include "protocol/packets/host_io.h"

#include <string>

#include "protocol/hex.h"
#include "protocol/packets/packet_args.h"
#include "protocol/packets/packet_row.h"

namespace protocol {
namespace {

using namespace packet_args;
using std::string_view;

Request p_vfile(string_view args) {
  auto colon = args.find(':');
  if (colon == string_view::npos) return Unknown{"vFile:" + std::string(args)};
  string_view op = args.substr(0, colon);
  string_view rest = args.substr(colon + 1);
  if (op == "pwrite") {
    // Data is binary and may contain ',': only the first two commas separate fields.
    auto c1 = rest.find(',');
    auto c2 = c1 == string_view::npos ? c1 : rest.find(',', c1 + 1);
    if (c2 == string_view::npos) return malformed("vFile:pwrite: bad arguments");
    auto fd = hex_int(rest.substr(0, c1));
    auto off = parse_hex_u64(rest.substr(c1 + 1, c2 - c1 - 1));
    if (!fd || !off) return malformed("vFile:pwrite: bad fd or offset");
    string_view data = rest.substr(c2 + 1);
    return FilePwrite{*fd, *off, std::vector<uint8_t>(data.begin(), data.end())};
  }
  auto parts = split(rest, ',');
  auto bad = [&] { return malformed("vFile:" + std::string(op) + ": bad arguments"); };
  if (op == "setfs") {
    auto pid = parts.size() == 1 ? hex_int(parts[0]) : std::nullopt;
    if (!pid) return bad();
    return FileSetFs{*pid};
  }
  if (op == "open") {
    if (parts.size() != 3) return bad();
    auto path = from_hex_string(parts[0]);
    auto flags = hex_int(parts[1]);
    auto mode = hex_int(parts[2]);
    if (!path || !flags || !mode) return bad();
    return FileOpen{std::move(*path), *flags, *mode};
  }
  if (op == "close" || op == "fstat") {
    auto fd = parts.size() == 1 ? hex_int(parts[0]) : std::nullopt;
    if (!fd) return bad();
    if (op == "close") return FileClose{*fd};
    return FileFstat{*fd};
  }
  if (op == "pread") {
    if (parts.size() != 3) return bad();
    auto fd = hex_int(parts[0]);
    auto count = parse_hex_u64(parts[1]);
    auto off = parse_hex_u64(parts[2]);
    if (!fd || !count || !off) return bad();
    return FilePread{*fd, *count, *off};
  }
  if (op == "unlink" || op == "readlink" || op == "stat" || op == "lstat") {
    auto path = parts.size() == 1 ? from_hex_string(parts[0]) : std::nullopt;
    if (!path) return bad();
    if (op == "unlink") return FileUnlink{std::move(*path)};
    if (op == "readlink") return FileReadlink{std::move(*path)};
    return FileStat{std::move(*path), op == "stat"};
  }
  return Unknown{"vFile:" + std::string(args)};
}

constexpr PacketRow kRows[] = {
    {"vFile:", false, p_vfile},
};

}  // namespace

std::span<const PacketRow> host_io_rows() { return kRows; }

}  // namespace protocol
