#include "server/hostio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "protocol/fileio.h"

namespace server {

namespace reply = protocol::reply;

namespace {
// GDB asks for PacketSize bytes to fill its one-block read-ahead cache, even for a 4-byte read:
// a smaller reply keeps scattered reads (DWARF of large debug files) cheap.
constexpr uint64_t kMaxPread = 0x4000;
}

HostIo::~HostIo() {
  for (auto& [client, host] : fds_) ::close(host);
}

std::string HostIo::os_proc_path(const std::string& path) const {
  std::string out;
  size_t at = 0;
  for (const char* word : {"/proc/", "/task/"}) {
    size_t len = std::strlen(word);
    if (path.compare(at, len, word) != 0) break;
    size_t end = std::min(path.find('/', at + len), path.size());
    std::string number = path.substr(at + len, end - at - len);
    if (number.empty() || number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) break;
    out += word + std::to_string(os_pid(std::stoi(number)));
    at = end;
  }
  return out.empty() ? path : out + path.substr(at);
}

std::string HostIo::resolve(const std::string& given) const {
  std::string path = given;
  // /proc/PID/... (and /proc/PID/task/TID/...) of a process known by another pid to the client
  // (a replay's recorded one).
  if (os_pid_ && path.rfind("/proc/", 0) == 0) path = os_proc_path(path);
  // A process's filesystem view; the same as ours unless it lives in another mount namespace.
  if (fs_pid_ == 0 || path.empty() || path[0] != '/') return path;
  return "/proc/" + std::to_string(os_pid(fs_pid_)) + "/root" + path;
}

int HostIo::os_pid(int client_pid) const {
  int os = client_pid > 0 && os_pid_ ? os_pid_(client_pid) : 0;
  return os > 0 ? os : client_pid;
}

// The client's pid is kept, not the system's: a replay that goes back to its start runs in a
// new process under the same client pid.
protocol::Reply HostIo::setfs(int pid) {
  if (pid < 0) return reply::FileError{EINVAL};
  if (pid != 0 && ::access(("/proc/" + std::to_string(os_pid(pid)) + "/root").c_str(), F_OK) != 0)
    return reply::FileError{errno};
  fs_pid_ = pid;
  return reply::FileResult{0};
}

protocol::Reply HostIo::open(const std::string& path, int fileio_flags, int mode) {
  int flags = protocol::fileio_to_host_open_flags(fileio_flags);
  if (flags < 0) return reply::FileError{EINVAL};
  bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
  if (writes && !allow_writes_) return reply::FileError{EACCES};
  int fd = ::open(resolve(path).c_str(), flags | O_CLOEXEC | O_NOCTTY, mode & 0777);
  if (fd < 0) return reply::FileError{errno};
  int client = next_fd_++;
  fds_[client] = fd;
  return reply::FileResult{client};
}

protocol::Reply HostIo::close(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return reply::FileError{EBADF};
  ::close(it->second);
  fds_.erase(it);
  return reply::FileResult{0};
}

protocol::Reply HostIo::pread(int fd, uint64_t count, uint64_t offset) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return reply::FileError{EBADF};
  std::vector<uint8_t> data(std::min(count, kMaxPread));
  ssize_t n = ::pread(it->second, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return reply::FileError{errno};
  data.resize(static_cast<size_t>(n));
  return reply::FileData{std::move(data)};
}

protocol::Reply HostIo::pwrite(int fd, uint64_t offset, std::span<const uint8_t> data) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return reply::FileError{EBADF};
  if (!allow_writes_) return reply::FileError{EACCES};
  ssize_t n = ::pwrite(it->second, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return reply::FileError{errno};
  return reply::FileResult{n};
}

namespace {
protocol::Reply stat_reply(const struct stat& st) {
  std::string encoded = protocol::encode_fio_stat(st);
  return reply::FileData{std::vector<uint8_t>(encoded.begin(), encoded.end())};
}
}  // namespace

protocol::Reply HostIo::fstat(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return reply::FileError{EBADF};
  struct stat st {};
  if (::fstat(it->second, &st) != 0) return reply::FileError{errno};
  return stat_reply(st);
}

protocol::Reply HostIo::stat(const std::string& path, bool follow_link) {
  // Seen from the setfs process, as every other path (gdbserver 17 does so for lstat only).
  std::string where = resolve(path);
  struct stat st {};
  int r = follow_link ? ::stat(where.c_str(), &st) : ::lstat(where.c_str(), &st);
  if (r != 0) return reply::FileError{errno};
  return stat_reply(st);
}

protocol::Reply HostIo::unlink(const std::string& path) {
  if (!allow_writes_) return reply::FileError{EACCES};
  if (::unlink(resolve(path).c_str()) != 0) return reply::FileError{errno};
  return reply::FileResult{0};
}

protocol::Reply HostIo::readlink(const std::string& path) {
  char buffer[4096];
  ssize_t n = ::readlink(resolve(path).c_str(), buffer, sizeof buffer);
  if (n < 0) return reply::FileError{errno};
  return reply::FileData{std::vector<uint8_t>(buffer, buffer + n)};
}

}  // namespace server
