// `info os` tables: the /proc text parsers on fixed text, and the live tables on this machine.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backend/host/osdata.h"

using namespace backend;

namespace {

OsdataNames fixed_names() {
  return OsdataNames{
      [](uint32_t uid) { return uid == 0 ? std::string("root") : std::string(); },
      [](uint32_t gid) { return gid == 0 ? std::string("wheel") : std::string(); },
      [](long long pid) { return "cmd" + std::to_string(pid); },
      [](long long t) { return t == 0 ? std::string() : "t" + std::to_string(t); },
  };
}

std::vector<std::string> column_names(const OsdataItem& item) {
  std::vector<std::string> out;
  for (const auto& [name, value] : item) out.push_back(name);
  return out;
}

std::string value(const OsdataItem& item, const std::string& column) {
  for (const auto& [name, v] : item)
    if (name == column) return v;
  FAIL("no column " << column);
  return {};
}

}  // namespace

TEST_CASE("osdata: the types gdbserver serves, in its order", "[osdata]") {
  std::vector<std::string> names;
  for (const auto& t : osdata_types()) names.emplace_back(t.name);
  CHECK(names == std::vector<std::string>{"types", "cpus", "files", "modules", "msg", "processes", "procgroups",
                                          "semaphores", "shm", "sockets", "threads"});
  auto types = read_osdata("");
  REQUIRE(types);
  CHECK(types->type == "types");
  REQUIRE(types->items.size() == names.size() - 1);  // the list does not name itself
  CHECK(column_names(types->items[0]) == std::vector<std::string>{"Type", "Description", "Title"});
  CHECK(value(types->items[4], "Type") == "processes");
  CHECK(value(types->items[4], "Title") == "Processes");
  CHECK(value(types->items[4], "Description") == "Listing of all processes");
  CHECK_FALSE(read_osdata("nonsense"));
}

TEST_CASE("osdata: command lines", "[osdata]") {
  using namespace std::string_literals;
  CHECK(command_line_text("/bin/sleep\0" "10\0"s, "sleep") == "/bin/sleep 10 ");
  CHECK(command_line_text("", "kworker/0:1") == "[kworker/0:1]");
}

TEST_CASE("osdata: cpuinfo", "[osdata]") {
  auto items = parse_cpuinfo(
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\npower management:\n\n"
      "processor\t: 1\nflags\t\t: fpu vme\naddress sizes\t: 48 bits physical, 57 bits virtual\n");
  REQUIRE(items.size() == 2);
  CHECK(column_names(items[0]) == std::vector<std::string>{"processor", "vendor_id", "model name", "power management"});
  CHECK(value(items[0], "model name") == "Intel(R) Xeon(R)");
  CHECK(value(items[0], "power management").empty());
  CHECK(value(items[1], "processor") == "1");
  CHECK(value(items[1], "flags") == "fpu vme");
  CHECK(parse_cpuinfo("").empty());
}

TEST_CASE("osdata: kernel modules", "[osdata]") {
  auto items = parse_modules(
      "msr_helper 16384 0 - Live 0xffffffffc0a00000 (OE)\n"
      "kvm 1146880 1 kvm_intel, Live 0x0000000000000000\n"
      "broken line\n");
  REQUIRE(items.size() == 2);
  CHECK(column_names(items[0]) ==
        std::vector<std::string>{"name", "size", "num uses", "dependencies", "status", "address"});
  CHECK(value(items[0], "name") == "msr_helper");
  CHECK(value(items[0], "size") == "16384");
  CHECK(value(items[0], "address") == "ffffffffc0a00000");
  CHECK(value(items[1], "dependencies") == "kvm_intel,");
  CHECK(value(items[1], "address") == "0");
}

TEST_CASE("osdata: System V IPC", "[osdata]") {
  auto names = fixed_names();
  auto shm = parse_sysvipc_shm(
      "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime"
      "      dtime      ctime                   rss                  swap\n"
      "         0          3  1600                 65536   120   121      2     0     0  1000     0 1700000000"
      "          0 1700000001                  4096                     0\n",
      names);
  REQUIRE(shm.size() == 1);
  CHECK(column_names(shm[0]) ==
        std::vector<std::string>{"key", "shmid", "permissions", "size", "creator command", "last op. command",
                                 "num attached", "user", "group", "creator user", "creator group",
                                 "last shmat() time", "last shmdt() time", "last shmctl() time"});
  CHECK(value(shm[0], "permissions") == "1600");
  CHECK(value(shm[0], "creator command") == "cmd120");
  CHECK(value(shm[0], "user") == "root");
  CHECK(value(shm[0], "creator user").empty());
  CHECK(value(shm[0], "last shmat() time") == "t1700000000");
  CHECK(value(shm[0], "last shmdt() time").empty());

  auto sem = parse_sysvipc_sem(
      "       key      semid perms      nsems   uid   gid  cuid  cgid      otime      ctime\n"
      "  -1234567          7   600          4     0     0     0     0          0 1700000002\n",
      names);
  REQUIRE(sem.size() == 1);
  CHECK(value(sem[0], "key") == "-1234567");
  CHECK(value(sem[0], "num semaphores") == "4");
  CHECK(value(sem[0], "group") == "wheel");
  CHECK(value(sem[0], "last semctl() time") == "t1700000002");

  auto msg = parse_sysvipc_msg(
      "       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime"
      "      ctime\n"
      "        42          1   666          10          2   300   301     0     0     0     0          5          6"
      "          7\n",
      names);
  REQUIRE(msg.size() == 1);
  CHECK(column_names(msg[0]).size() == 14);
  CHECK(value(msg[0], "num used bytes") == "10");
  CHECK(value(msg[0], "last msgrcv() command") == "cmd301");
  CHECK(value(msg[0], "last msgctl() time") == "t7");
}

TEST_CASE("osdata: internet sockets", "[osdata]") {
  auto names = fixed_names();
  auto tcp = parse_net_sockets(
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1456 1\n"
      "   1: 0100007F:9C40 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 1457 1\n",
      false, true, names);
  REQUIRE(tcp.size() == 2);
  CHECK(column_names(tcp[0]) == std::vector<std::string>{"local address", "local port", "remote address",
                                                         "remote port", "state", "user", "family", "protocol"});
  CHECK(value(tcp[0], "local address") == "127.0.0.1");
  CHECK(value(tcp[0], "local port") == "8080");
  CHECK(value(tcp[0], "remote address") == "0.0.0.0");
  CHECK(value(tcp[0], "state") == "LISTEN");
  CHECK(value(tcp[0], "user") == "root");
  CHECK(value(tcp[0], "family") == "INET");
  CHECK(value(tcp[0], "protocol") == "STREAM");
  CHECK(value(tcp[1], "state") == "ESTABLISHED");
  CHECK(value(tcp[1], "local port") == "40000");

  auto udp6 = parse_net_sockets(
      "  sl  local_address                         remote_address                        st tx_queue rx_queue tr "
      "tm->when retrnsmt   uid  timeout inode ref pointer drops\n"
      "  5: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 "
      "00:00000000 00000000     0        0 999 2 0000000000000000 0\n",
      true, false, names);
  REQUIRE(udp6.size() == 1);
  CHECK(value(udp6[0], "local address") == "::1");
  CHECK(value(udp6[0], "local port") == "53");
  CHECK(value(udp6[0], "remote address") == "::");
  CHECK(value(udp6[0], "state") == "CLOSE");
  CHECK(value(udp6[0], "family") == "INET6");
  CHECK(value(udp6[0], "protocol") == "DGRAM");
}

TEST_CASE("osdata: the live process, thread and file tables show this test", "[osdata]") {
  std::string me = std::to_string(getpid());
  auto processes = read_osdata("processes");
  REQUIRE(processes);
  CHECK(processes->type == "processes");
  bool found = false;
  for (const auto& item : processes->items) {
    REQUIRE(column_names(item) == std::vector<std::string>{"pid", "user", "command", "cores"});
    if (value(item, "pid") != me) continue;
    found = true;
    CHECK(value(item, "command").find("unit_backend") != std::string::npos);
    CHECK_FALSE(value(item, "cores").empty());
  }
  CHECK(found);

  auto threads = read_osdata("threads");
  REQUIRE(threads);
  found = false;
  for (const auto& item : threads->items)
    found |= value(item, "pid") == me && value(item, "tid") == me && value(item, "command") == "unit_backend";
  CHECK(found);

  auto files = read_osdata("files");
  REQUIRE(files);
  CHECK(files->type == "files");
  found = false;
  for (const auto& item : files->items) found |= value(item, "pid") == me && value(item, "file descriptor") == "0";
  CHECK(found);

  auto groups = read_osdata("procgroups");
  REQUIRE(groups);
  CHECK(groups->type == "process groups");
  found = false;
  for (const auto& item : groups->items)
    found |= value(item, "pid") == me && value(item, "pgid") == std::to_string(getpgrp());
  CHECK(found);

  for (const char* type : {"cpus", "modules", "msg", "semaphores", "shm", "sockets"}) {
    INFO(type);
    CHECK(read_osdata(type));
  }
  CHECK(read_osdata("sockets")->type == "I sockets");
  CHECK(read_osdata("cpus")->items.size() >= 1);
}
