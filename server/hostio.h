// Host I/O (vFile): files opened on the server's side for the client (GDB reads the program
// and its libraries this way). Writes and unlinks are allowed unless --no-file-writes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>

#include "protocol/replies.h"

namespace server {

class HostIo {
 public:
  HostIo() = default;
  ~HostIo();
  HostIo(const HostIo&) = delete;
  HostIo& operator=(const HostIo&) = delete;

  void allow_writes(bool on) { allow_writes_ = on; }
  // The system's pid of a process the client names (a replay's differs): setfs and /proc/PID/ paths.
  void set_os_pid(std::function<int(int)> os_pid) { os_pid_ = std::move(os_pid); }
  // Each returns the complete reply: FileResult, FileError or FileData (the "F..." forms).
  protocol::Reply setfs(int pid);
  protocol::Reply open(const std::string& path, int fileio_flags, int mode);
  protocol::Reply close(int fd);
  protocol::Reply pread(int fd, uint64_t count, uint64_t offset);
  protocol::Reply pwrite(int fd, uint64_t offset, std::span<const uint8_t> data);
  protocol::Reply fstat(int fd);
  protocol::Reply unlink(const std::string& path);
  protocol::Reply readlink(const std::string& path);
  // vFile:stat (follow_link) / vFile:lstat: GDB's 64-byte fio_stat, or the errno.
  protocol::Reply stat(const std::string& path, bool follow_link);

 private:
  std::string resolve(const std::string& path) const;  // applies setfs (a process's root)
  std::string os_proc_path(const std::string& path) const;
  int os_pid(int client_pid) const;  // the system's pid now (client_pid where none is known)
  std::map<int, int> fds_;  // client fd -> host fd
  int next_fd_ = 3;
  int fs_pid_ = 0;  // vFile:setfs's process, as the client names it (0: the server's view)
  std::function<int(int)> os_pid_;
  bool allow_writes_ = true;
};

}  // namespace server
