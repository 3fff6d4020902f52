// Session, host I/O: vFile:stat and vFile:lstat (GDB 16/17) on real files, and qExecAndArgs
// (GDB 18) before anything ran.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "protocol/fileio.h"
#include "protocol/hex.h"
#include "protocol/replies.h"
#include "server/hostio.h"
#include "tests/unit/server/session_harness.h"

using fake::SessionHarness;
using server::HostIo;

namespace {

std::string hex(const std::string& s) { return protocol::to_hex(std::string_view(s)); }

// "F40;" + the escaped 64-byte fio_stat of `st`.
std::string stat_reply(const struct stat& st) {
  return "F40;" + protocol::escape_binary(protocol::encode_fio_stat(st));
}

}  // namespace

TEST_CASE("host io: vFile:stat follows a symbolic link, vFile:lstat does not") {
  char dir[] = "/tmp/bs_hostio_XXXXXX";
  REQUIRE(::mkdtemp(dir));
  std::string file = std::string(dir) + "/file", link = std::string(dir) + "/link";
  FILE* f = std::fopen(file.c_str(), "w");
  REQUIRE(f);
  std::fputs("twelve bytes", f);
  std::fclose(f);
  REQUIRE(::symlink("file", link.c_str()) == 0);
  struct stat of_file {}, of_link {};
  REQUIRE(::stat(file.c_str(), &of_file) == 0);
  REQUIRE(::lstat(link.c_str(), &of_link) == 0);

  SessionHarness h;
  h.gdb_handshake();
  CHECK(h.request("vFile:stat:" + hex(link)) == stat_reply(of_file));
  CHECK(h.request("vFile:lstat:" + hex(link)) == stat_reply(of_link));
  CHECK(h.request("vFile:lstat:" + hex(file)) == stat_reply(of_file));
  // The size field (offset 28, 8 bytes big-endian) of the file through the link: 12.
  std::string fio = protocol::unescape_binary(h.request("vFile:stat:" + hex(link)).substr(4));
  REQUIRE(fio.size() == 64);
  CHECK(fio.substr(28, 8) == std::string("\0\0\0\0\0\0\0\x0c", 8));
  // Failures carry GDB's fileio errno: ENOENT 2, ENOTDIR 20.
  CHECK(h.request("vFile:stat:" + hex(std::string(dir) + "/none")) == "F-1,2");
  CHECK(h.request("vFile:lstat:" + hex(file + "/below")) == "F-1,14");
  CHECK(h.request("vFile:stat:zz") == "E.vFile:stat: bad arguments");

  ::unlink(link.c_str());
  ::unlink(file.c_str());
  ::rmdir(dir);
}

TEST_CASE("host io: qExecAndArgs says U while nothing was run") {
  SessionHarness h;
  h.gdb_handshake();
  CHECK(h.request("qExecAndArgs") == "U");
}

TEST_CASE("host io: /proc/PID paths of a process the client knows by another pid (a replay)") {
  HostIo io;
  const int self = static_cast<int>(::getpid());
  const int recorded = 999999;  // no such process: the client's pid of the replay
  io.set_os_pid([&](int pid) { return pid == recorded ? self : 0; });
  std::string status = "/proc/" + std::to_string(recorded) + "/task/" + std::to_string(recorded) + "/status";
  auto opened = io.open(status, 0 /* O_RDONLY in fileio */, 0);
  auto* fd = std::get_if<protocol::reply::FileResult>(&opened);
  REQUIRE(fd);
  auto data = io.pread(static_cast<int>(fd->result), 4096, 0);
  auto* bytes = std::get_if<protocol::reply::FileData>(&data);
  REQUIRE(bytes);
  std::string text(bytes->bytes.begin(), bytes->bytes.end());
  CHECK(text.find("Pid:\t" + std::to_string(self) + "\n") != std::string::npos);
  (void)io.close(static_cast<int>(fd->result));
  // Other pids and other paths are left alone.
  auto other = io.open("/proc/" + std::to_string(recorded) + "/status", 0, 0);
  CHECK(std::holds_alternative<protocol::reply::FileResult>(other));
  auto missing = io.open("/proc/999998/status", 0, 0);
  CHECK(std::holds_alternative<protocol::reply::FileError>(missing));
}

TEST_CASE("host io: vFile:setfs follows the client's pid to the process that has it now (a replay restarted)") {
  HostIo io;
  const int self = static_cast<int>(::getpid());
  const int recorded = 999999;  // the client's pid of the replay
  int now = self;               // the system's pid behind it, until the replay starts again
  io.set_os_pid([&](int pid) { return pid == recorded ? now : 0; });
  REQUIRE(std::holds_alternative<protocol::reply::FileResult>(io.setfs(recorded)));
  auto first = io.open("/proc/self/status", 0, 0);
  CHECK(std::holds_alternative<protocol::reply::FileResult>(first));
  // The replay went back to its start: a new process, gone the old one (here: no such pid).
  now = 999998;
  auto gone = io.open("/proc/self/status", 0, 0);
  auto* err = std::get_if<protocol::reply::FileError>(&gone);
  REQUIRE(err);
  CHECK(err->host_errno == ENOENT);
  now = self;  // and a live one again: paths resolve through it, not through the pid setfs saw
  CHECK(std::holds_alternative<protocol::reply::FileResult>(io.open("/proc/self/status", 0, 0)));
  // An unknown pid is refused at setfs, as before.
  CHECK(std::holds_alternative<protocol::reply::FileError>(io.setfs(999997)));
}
