// What GDB's `info os [TYPE]` shows (qXfer:osdata:read): system-wide tables read from /proc,
// with gdbserver's type names, document types, column names and column order
// (gdb/nat/linux-osdata.c in GDB 13). Values are trimmed where gdbserver leaves the raw text
// (cpuinfo values keep their newline there, times their ctime newline: GDB trims both when it
// shows them), and process names are not cut at 15 characters or at a space.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backend {

using OsdataItem = std::vector<std::pair<std::string, std::string>>;  // (column, value), in order
struct OsdataTable {
  std::string type;  // the document's type attribute ("processes", "I sockets", ...)
  std::vector<OsdataItem> items;
};

struct OsdataType {
  std::string_view name;  // what `info os NAME` sends as the annex
  std::string_view title;
  std::string_view description;
};
// Every type gdbserver serves, "types" (this list itself) first.
std::span<const OsdataType> osdata_types();

// The table for `name` ("" = "types"), read now; nullopt for a type nobody knows (gdbserver
// then sends an empty document).
std::optional<OsdataTable> read_osdata(std::string_view name);

// ---- the text parsers behind it (pure: fixed text in, rows out) ----

// Lookups that depend on the system, so the parsers can be tested with fixed answers.
struct OsdataNames {
  std::function<std::string(uint32_t uid)> user;         // "" when unknown
  std::function<std::string(uint32_t gid)> group;        // "" when unknown
  std::function<std::string(long long pid)> command;     // the process's name; the pid if gone
  std::function<std::string(long long seconds)> time;    // "" for 0
};
OsdataNames system_osdata_names();

// /proc/PID/cmdline as `info os processes` shows it: NULs become spaces (the last one too, as
// in gdbserver); an empty cmdline (kernel thread) gives "[comm]".
std::string command_line_text(std::string_view cmdline, std::string_view comm);
std::vector<OsdataItem> parse_cpuinfo(std::string_view text);
std::vector<OsdataItem> parse_modules(std::string_view text);
std::vector<OsdataItem> parse_sysvipc_shm(std::string_view text, const OsdataNames& names);
std::vector<OsdataItem> parse_sysvipc_sem(std::string_view text, const OsdataNames& names);
std::vector<OsdataItem> parse_sysvipc_msg(std::string_view text, const OsdataNames& names);
// One of /proc/net/{tcp,udp,tcp6,udp6}.
std::vector<OsdataItem> parse_net_sockets(std::string_view text, bool ipv6, bool tcp, const OsdataNames& names);

}  // namespace backend
