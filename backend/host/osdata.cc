#include "backend/host/osdata.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <type_traits>

#include <fmt/format.h>

#include "backend/ptrace/proc_info.h"

namespace backend {

namespace {

// ---- small text helpers ----

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::vector<std::string_view> fields_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// A whole field as a number in `base` (no sign for unsigned values).
template <typename T>
std::optional<T> number(std::string_view field, int base = 10) {
  if (field.empty()) return std::nullopt;
  std::string s(field);
  char* end = nullptr;
  errno = 0;
  T value;
  if constexpr (std::is_signed_v<T>) {
    long long v = std::strtoll(s.c_str(), &end, base);
    value = static_cast<T>(v);
  } else {
    if (s[0] == '-') return std::nullopt;
    unsigned long long v = std::strtoull(s.c_str(), &end, base);
    value = static_cast<T>(v);
  }
  if (errno != 0 || end != s.c_str() + s.size()) return std::nullopt;
  return value;
}

bool all_digits(const char* s) {
  if (!*s) return false;
  for (; *s; ++s)
    if (*s < '0' || *s > '9') return false;
  return true;
}

// Numeric entries of a /proc directory, ascending.
std::vector<long long> numeric_entries(const std::string& dir) {
  std::vector<long long> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (all_digits(e->d_name) && std::strlen(e->d_name) <= 19) out.push_back(std::atoll(e->d_name));
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// The name of process `pid`: the comm of /proc/PID/stat (at most 15 characters, where
// /proc/PID/comm may give a kernel worker's longer name); the pid itself when it is gone.
std::string command_of(long long pid) {
  auto stat = read_text_file(fmt::format("/proc/{}/stat", pid));
  if (!stat) return std::to_string(pid);
  size_t open = stat->find('('), close = stat->rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  return stat->substr(open + 1, close - open - 1);
}

std::optional<uid_t> owner_of(long long pid) {
  struct stat st;
  if (::stat(fmt::format("/proc/{}", pid).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return st.st_uid;
}

std::string user_name(uint32_t uid) {
  std::array<char, 4096> buf;
  passwd pwd;
  passwd* found = nullptr;
  if (::getpwuid_r(uid, &pwd, buf.data(), buf.size(), &found) != 0 || !found) return {};
  return found->pw_name;
}

std::string group_name(uint32_t gid) {
  std::array<char, 4096> buf;
  group grp;
  group* found = nullptr;
  if (::getgrgid_r(gid, &grp, buf.data(), buf.size(), &found) != 0 || !found) return {};
  return found->gr_name;
}

std::string time_text(long long seconds) {
  if (seconds == 0) return {};
  time_t t = static_cast<time_t>(seconds);
  char buf[64];
  if (!::ctime_r(&t, buf)) return {};
  return std::string(trim(buf));
}

std::string octal(unsigned value) { return fmt::format("{:o}", value); }

// ---- the tables ----

std::vector<OsdataItem> types_items() {
  std::vector<OsdataItem> items;
  for (const auto& t : osdata_types()) {
    if (t.name == "types") continue;  // the list does not name itself
    items.push_back({{"Type", std::string(t.name)},
                     {"Description", std::string(t.description)},
                     {"Title", std::string(t.title)}});
  }
  return items;
}

std::string command_line_of(long long pid) {
  auto cmdline = read_text_file(fmt::format("/proc/{}/cmdline", pid));
  if (!cmdline) return {};
  return command_line_text(*cmdline, command_of(pid));
}

std::vector<OsdataItem> processes_items(const OsdataNames& names) {
  std::vector<OsdataItem> items;
  for (long long pid : numeric_entries("/proc")) {
    std::string command = command_line_of(pid);
    auto owner = owner_of(pid);
    std::string user = owner ? names.user(*owner) : "?";
    std::set<int> cores;
    for (pid_t tid : list_tasks(static_cast<pid_t>(pid)))
      if (int core = read_thread_core(static_cast<pid_t>(pid), tid); core >= 0) cores.insert(core);
    std::string cores_text;
    for (int c : cores) cores_text += (cores_text.empty() ? "" : ",") + std::to_string(c);
    items.push_back({{"pid", std::to_string(pid)}, {"user", user}, {"command", command}, {"cores", cores_text}});
  }
  return items;
}

std::vector<OsdataItem> process_groups_items(const OsdataNames& names) {
  struct Entry { long long pid, pgid; };
  std::vector<Entry> entries;
  for (long long pid : numeric_entries("/proc")) {
    pid_t pgid = ::getpgid(static_cast<pid_t>(pid));
    if (pgid > 0) entries.push_back({pid, pgid});
  }
  // By group; the leader first in its group, then by pid.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.pgid != b.pgid) return a.pgid < b.pgid;
    bool la = a.pid == a.pgid, lb = b.pid == b.pgid;
    if (la != lb) return la;
    return a.pid < b.pid;
  });
  std::vector<OsdataItem> items;
  for (const Entry& e : entries)
    items.push_back({{"pgid", std::to_string(e.pgid)},
                     {"leader command", names.command(e.pgid)},
                     {"pid", std::to_string(e.pid)},
                     {"command line", command_line_of(e.pid)}});
  return items;
}

std::vector<OsdataItem> threads_items(const OsdataNames& names) {
  std::vector<OsdataItem> items;
  for (long long pid : numeric_entries("/proc")) {
    std::string command = names.command(pid);
    for (long long tid : numeric_entries(fmt::format("/proc/{}/task", pid)))
      items.push_back({{"pid", std::to_string(pid)},
                       {"command", command},
                       {"tid", std::to_string(tid)},
                       {"core", std::to_string(read_thread_core(static_cast<pid_t>(pid), static_cast<pid_t>(tid)))}});
  }
  return items;
}

std::vector<OsdataItem> files_items(const OsdataNames& names) {
  std::vector<OsdataItem> items;
  for (long long pid : numeric_entries("/proc")) {
    std::string dir = fmt::format("/proc/{}/fd", pid);
    std::vector<long long> fds = numeric_entries(dir);
    if (fds.empty()) continue;
    std::string command = names.command(pid);
    for (long long fd : fds) {
      std::string fd_text = std::to_string(fd);
      char target[4096];
      ssize_t n = ::readlink((dir + "/" + fd_text).c_str(), target, sizeof target - 1);
      items.push_back({{"pid", std::to_string(pid)},
                       {"command", command},
                       {"file descriptor", fd_text},
                       {"name", n >= 0 ? std::string(target, static_cast<size_t>(n)) : fd_text}});
    }
  }
  return items;
}

std::vector<OsdataItem> from_file(const char* path, std::vector<OsdataItem> (*parse)(std::string_view)) {
  auto text = read_text_file(path);
  return text ? parse(*text) : std::vector<OsdataItem>{};
}

std::vector<OsdataItem> from_file(const char* path, const OsdataNames& names,
                                  std::vector<OsdataItem> (*parse)(std::string_view, const OsdataNames&)) {
  auto text = read_text_file(path);
  return text ? parse(*text, names) : std::vector<OsdataItem>{};
}

std::vector<OsdataItem> sockets_items(const OsdataNames& names) {
  std::vector<OsdataItem> items;
  struct Source { const char* path; bool ipv6, tcp; };
  for (const Source& src : {Source{"/proc/net/tcp", false, true}, Source{"/proc/net/udp", false, false},
                            Source{"/proc/net/tcp6", true, true}, Source{"/proc/net/udp6", true, false}}) {
    auto text = read_text_file(src.path);
    if (!text) continue;
    auto part = parse_net_sockets(*text, src.ipv6, src.tcp, names);
    items.insert(items.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return items;
}

const char* socket_state(unsigned state) {
  static constexpr const char* kStates[] = {nullptr,     "ESTABLISHED", "SYN_SENT",   "SYN_RECV",
                                            "FIN_WAIT1", "FIN_WAIT2",   "TIME_WAIT",  "CLOSE",
                                            "CLOSE_WAIT", "LAST_ACK",   "LISTEN",     "CLOSING"};
  if (state >= 1 && state < std::size(kStates)) return kStates[state];
  return "(unknown)";
}

// "0100007F" (IPv4) or four 8-digit words (IPv6), as the kernel prints the address words in
// host order.
std::optional<std::string> socket_address(std::string_view hex, bool ipv6) {
  if (hex.size() != (ipv6 ? 32u : 8u)) return std::nullopt;
  uint32_t words[4] = {};
  for (size_t i = 0; i < hex.size() / 8; ++i) {
    auto w = number<uint32_t>(hex.substr(i * 8, 8), 16);
    if (!w) return std::nullopt;
    words[i] = *w;
  }
  char text[INET6_ADDRSTRLEN] = {};
  if (!::inet_ntop(ipv6 ? AF_INET6 : AF_INET, words, text, sizeof text)) return std::nullopt;
  return std::string(text);
}

}  // namespace

std::span<const OsdataType> osdata_types() {
  static constexpr OsdataType kTypes[] = {
      {"types", "Types", "Listing of info os types you can list"},
      {"cpus", "CPUs", "Listing of all cpus/cores on the system"},
      {"files", "File descriptors", "Listing of all file descriptors"},
      {"modules", "Kernel modules", "Listing of all loaded kernel modules"},
      {"msg", "Message queues", "Listing of all message queues"},
      {"processes", "Processes", "Listing of all processes"},
      {"procgroups", "Process groups", "Listing of all process groups"},
      {"semaphores", "Semaphores", "Listing of all semaphores"},
      {"shm", "Shared-memory regions", "Listing of all shared-memory regions"},
      {"sockets", "Sockets", "Listing of all internet-domain sockets"},
      {"threads", "Threads", "Listing of all threads"},
  };
  return kTypes;
}

OsdataNames system_osdata_names() {
  return OsdataNames{user_name, group_name, command_of, time_text};
}

std::optional<OsdataTable> read_osdata(std::string_view name) {
  OsdataNames names = system_osdata_names();
  if (name.empty() || name == "types") return OsdataTable{"types", types_items()};
  if (name == "cpus") return OsdataTable{"cpus", from_file("/proc/cpuinfo", parse_cpuinfo)};
  if (name == "files") return OsdataTable{"files", files_items(names)};
  if (name == "modules") return OsdataTable{"modules", from_file("/proc/modules", parse_modules)};
  if (name == "msg") return OsdataTable{"message queues", from_file("/proc/sysvipc/msg", names, parse_sysvipc_msg)};
  if (name == "processes") return OsdataTable{"processes", processes_items(names)};
  if (name == "procgroups") return OsdataTable{"process groups", process_groups_items(names)};
  if (name == "semaphores") return OsdataTable{"semaphores", from_file("/proc/sysvipc/sem", names, parse_sysvipc_sem)};
  if (name == "shm") return OsdataTable{"shared memory", from_file("/proc/sysvipc/shm", names, parse_sysvipc_shm)};
  if (name == "sockets") return OsdataTable{"I sockets", sockets_items(names)};
  if (name == "threads") return OsdataTable{"threads", threads_items(names)};
  return std::nullopt;
}

std::string command_line_text(std::string_view cmdline, std::string_view comm) {
  if (cmdline.empty()) return "[" + std::string(comm) + "]";
  std::string out(cmdline);
  std::replace(out.begin(), out.end(), '\0', ' ');
  return out;
}

std::vector<OsdataItem> parse_cpuinfo(std::string_view text) {
  // "key<TABs>: value" lines; a "processor" key starts the next CPU's item.
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = trim(line.substr(0, colon));
    if (key.empty()) continue;
    if (key == "processor" || items.empty()) items.emplace_back();
    items.back().emplace_back(std::string(key), std::string(trim(line.substr(colon + 1))));
  }
  return items;
}

std::vector<OsdataItem> parse_modules(std::string_view text) {
  // name size uses dependencies status address [taint flags]
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    auto f = fields_of(line);
    if (f.size() < 6) continue;
    auto size = number<unsigned>(f[1]);
    auto uses = number<int>(f[2]);
    std::string_view addr_text = f[5];
    if (addr_text.starts_with("0x") || addr_text.starts_with("0X")) addr_text.remove_prefix(2);
    auto address = number<unsigned long long>(addr_text, 16);
    if (!size || !uses || !address) continue;
    items.push_back({{"name", std::string(f[0])},
                     {"size", std::to_string(*size)},
                     {"num uses", std::to_string(*uses)},
                     {"dependencies", std::string(f[3])},
                     {"status", std::string(f[4])},
                     {"address", fmt::format("{:x}", *address)}});
  }
  return items;
}

std::vector<OsdataItem> parse_sysvipc_shm(std::string_view text, const OsdataNames& names) {
  // key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime [rss swap]
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    auto f = fields_of(line);
    if (f.size() < 14) continue;
    auto key = number<int>(f[0]);
    auto shmid = number<int>(f[1]);
    auto perms = number<unsigned>(f[2], 8);
    auto size = number<unsigned long long>(f[3]);
    auto cpid = number<long long>(f[4]), lpid = number<long long>(f[5]);
    auto nattch = number<long long>(f[6]);
    auto uid = number<uint32_t>(f[7]), gid = number<uint32_t>(f[8]);
    auto cuid = number<uint32_t>(f[9]), cgid = number<uint32_t>(f[10]);
    auto atime = number<long long>(f[11]), dtime = number<long long>(f[12]), ctime = number<long long>(f[13]);
    if (!key || !shmid || !perms || !size || !cpid || !lpid || !nattch || !uid || !gid || !cuid || !cgid ||
        !atime || !dtime || !ctime)
      continue;  // the header line, or something unexpected
    items.push_back({{"key", std::to_string(*key)},
                     {"shmid", std::to_string(*shmid)},
                     {"permissions", octal(*perms)},
                     {"size", std::to_string(*size)},
                     {"creator command", names.command(*cpid)},
                     {"last op. command", names.command(*lpid)},
                     {"num attached", std::to_string(*nattch)},
                     {"user", names.user(*uid)},
                     {"group", names.group(*gid)},
                     {"creator user", names.user(*cuid)},
                     {"creator group", names.group(*cgid)},
                     {"last shmat() time", names.time(*atime)},
                     {"last shmdt() time", names.time(*dtime)},
                     {"last shmctl() time", names.time(*ctime)}});
  }
  return items;
}

std::vector<OsdataItem> parse_sysvipc_sem(std::string_view text, const OsdataNames& names) {
  // key semid perms nsems uid gid cuid cgid otime ctime
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    auto f = fields_of(line);
    if (f.size() < 10) continue;
    auto key = number<int>(f[0]);
    auto semid = number<int>(f[1]);
    auto perms = number<unsigned>(f[2], 8);
    auto nsems = number<unsigned>(f[3]);
    auto uid = number<uint32_t>(f[4]), gid = number<uint32_t>(f[5]);
    auto cuid = number<uint32_t>(f[6]), cgid = number<uint32_t>(f[7]);
    auto otime = number<long long>(f[8]), ctime = number<long long>(f[9]);
    if (!key || !semid || !perms || !nsems || !uid || !gid || !cuid || !cgid || !otime || !ctime) continue;
    items.push_back({{"key", std::to_string(*key)},
                     {"semid", std::to_string(*semid)},
                     {"permissions", octal(*perms)},
                     {"num semaphores", std::to_string(*nsems)},
                     {"user", names.user(*uid)},
                     {"group", names.group(*gid)},
                     {"creator user", names.user(*cuid)},
                     {"creator group", names.group(*cgid)},
                     {"last semop() time", names.time(*otime)},
                     {"last semctl() time", names.time(*ctime)}});
  }
  return items;
}

std::vector<OsdataItem> parse_sysvipc_msg(std::string_view text, const OsdataNames& names) {
  // key msqid perms cbytes qnum lspid lrpid uid gid cuid cgid stime rtime ctime
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    auto f = fields_of(line);
    if (f.size() < 14) continue;
    auto key = number<int>(f[0]);
    auto msqid = number<int>(f[1]);
    auto perms = number<unsigned>(f[2], 8);
    auto cbytes = number<unsigned long long>(f[3]), qnum = number<unsigned long long>(f[4]);
    auto lspid = number<long long>(f[5]), lrpid = number<long long>(f[6]);
    auto uid = number<uint32_t>(f[7]), gid = number<uint32_t>(f[8]);
    auto cuid = number<uint32_t>(f[9]), cgid = number<uint32_t>(f[10]);
    auto stime = number<long long>(f[11]), rtime = number<long long>(f[12]), ctime = number<long long>(f[13]);
    if (!key || !msqid || !perms || !cbytes || !qnum || !lspid || !lrpid || !uid || !gid || !cuid || !cgid ||
        !stime || !rtime || !ctime)
      continue;
    items.push_back({{"key", std::to_string(*key)},
                     {"msqid", std::to_string(*msqid)},
                     {"permissions", octal(*perms)},
                     {"num used bytes", std::to_string(*cbytes)},
                     {"num messages", std::to_string(*qnum)},
                     {"last msgsnd() command", names.command(*lspid)},
                     {"last msgrcv() command", names.command(*lrpid)},
                     {"user", names.user(*uid)},
                     {"group", names.group(*gid)},
                     {"creator user", names.user(*cuid)},
                     {"creator group", names.group(*cgid)},
                     {"last msgsnd() time", names.time(*stime)},
                     {"last msgrcv() time", names.time(*rtime)},
                     {"last msgctl() time", names.time(*ctime)}});
  }
  return items;
}

std::vector<OsdataItem> parse_net_sockets(std::string_view text, bool ipv6, bool tcp, const OsdataNames& names) {
  // sl: local:port remote:port st tx:rx tr:when retrnsmt uid timeout inode ...
  std::vector<OsdataItem> items;
  for (std::string_view line : lines_of(text)) {
    auto f = fields_of(line);
    if (f.size() < 10 || f[0].empty() || f[0].back() != ':' || !number<long long>(f[0].substr(0, f[0].size() - 1)))
      continue;
    auto split = [](std::string_view s) -> std::pair<std::string_view, std::string_view> {
      size_t c = s.find(':');
      if (c == std::string_view::npos) return {};
      return {s.substr(0, c), s.substr(c + 1)};
    };
    auto [local_hex, local_port_hex] = split(f[1]);
    auto [remote_hex, remote_port_hex] = split(f[2]);
    auto local = socket_address(local_hex, ipv6), remote = socket_address(remote_hex, ipv6);
    auto local_port = number<unsigned>(local_port_hex, 16), remote_port = number<unsigned>(remote_port_hex, 16);
    auto state = number<unsigned>(f[3], 16);
    auto uid = number<uint32_t>(f[7]);
    if (!local || !remote || !local_port || !remote_port || !state || !uid) continue;
    items.push_back({{"local address", *local},
                     {"local port", std::to_string(*local_port)},
                     {"remote address", *remote},
                     {"remote port", std::to_string(*remote_port)},
                     {"state", socket_state(*state)},
                     {"user", names.user(*uid)},
                     {"family", ipv6 ? "INET6" : "INET"},
                     {"protocol", tcp ? "STREAM" : "DGRAM"}});
  }
  return items;
}

}  // namespace backend
