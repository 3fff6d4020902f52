#include "server/hostio.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "protocol/fileio.h"

namespace server {

namespace {
// GDB asks for PacketSize bytes to fill its one-block read-ahead cache, even for a 4-byte read:
// a smaller reply keeps scattered reads (DWARF of large debug files) cheap.
constexpr uint64_t kMaxPread = 0x4000;
}

HostIo::~HostIo() {
  for (auto& [client, host] : fds_) ::close(host);
}

std::string HostIo::resolve(const std::string& path) const {
  // A process's filesystem view; the same as ours unless it lives in another mount namespace.
  if (fs_pid_ == 0 || path.empty() || path[0] != '/') return path;
  return "/proc/" + std::to_string(fs_pid_) + "/root" + path;
}

std::string HostIo::setfs(int pid) {
  if (pid < 0) return protocol::file_error(EINVAL);
  if (pid != 0 && ::access(("/proc/" + std::to_string(pid) + "/root").c_str(), F_OK) != 0)
    return protocol::file_error(errno);
  fs_pid_ = pid;
  return protocol::file_result(0);
}

std::string HostIo::open(const std::string& path, int fileio_flags, int mode) {
  int flags = protocol::fileio_to_host_open_flags(fileio_flags);
  if (flags < 0) return protocol::file_error(EINVAL);
  bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
  if (writes && !allow_writes_) return protocol::file_error(EACCES);
  int fd = ::open(resolve(path).c_str(), flags | O_CLOEXEC | O_NOCTTY, mode & 0777);
  if (fd < 0) return protocol::file_error(errno);
  int client = next_fd_++;
  fds_[client] = fd;
  return protocol::file_result(client);
}

std::string HostIo::close(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return protocol::file_error(EBADF);
  ::close(it->second);
  fds_.erase(it);
  return protocol::file_result(0);
}

std::string HostIo::pread(int fd, uint64_t count, uint64_t offset) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return protocol::file_error(EBADF);
  std::vector<uint8_t> data(std::min(count, kMaxPread));
  ssize_t n = ::pread(it->second, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return protocol::file_error(errno);
  return protocol::file_data(n, std::span<const uint8_t>(data.data(), static_cast<size_t>(n)));
}

std::string HostIo::pwrite(int fd, uint64_t offset, std::span<const uint8_t> data) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return protocol::file_error(EBADF);
  if (!allow_writes_) return protocol::file_error(EACCES);
  ssize_t n = ::pwrite(it->second, data.data(), data.size(), static_cast<off_t>(offset));
  if (n < 0) return protocol::file_error(errno);
  return protocol::file_result(n);
}

std::string HostIo::fstat(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return protocol::file_error(EBADF);
  struct stat st {};
  if (::fstat(it->second, &st) != 0) return protocol::file_error(errno);
  std::string encoded = protocol::encode_fio_stat(st);
  return protocol::file_data(static_cast<int64_t>(encoded.size()),
                             std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(encoded.data()), encoded.size()));
}

std::string HostIo::unlink(const std::string& path) {
  if (!allow_writes_) return protocol::file_error(EACCES);
  if (::unlink(resolve(path).c_str()) != 0) return protocol::file_error(errno);
  return protocol::file_result(0);
}

std::string HostIo::readlink(const std::string& path) {
  char buffer[4096];
  ssize_t n = ::readlink(resolve(path).c_str(), buffer, sizeof buffer);
  if (n < 0) return protocol::file_error(errno);
  return protocol::file_data(n, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buffer), static_cast<size_t>(n)));
}

}  // namespace server
