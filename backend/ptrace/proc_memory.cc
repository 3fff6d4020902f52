#include "backend/ptrace/proc_memory.h"

#include <fcntl.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

namespace backend {

ProcMemory::~ProcMemory() { close(); }

void ProcMemory::open(pid_t pid) {
  close();
  pid_ = pid;
  fd_ = ::open(fmt::format("/proc/{}/mem", pid).c_str(), O_RDWR | O_CLOEXEC);
}

void ProcMemory::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

// Word-wise fallback; the tracee must be ptrace-stopped.
size_t ProcMemory::peek(uint64_t addr, std::span<uint8_t> out) const {
  size_t done = 0;
  while (done < out.size()) {
    uint64_t a = addr + done, aligned = a & ~7ull;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, pid_, reinterpret_cast<void*>(aligned), nullptr);
    if (errno != 0) break;
    size_t skip = a - aligned, n = std::min<size_t>(8 - skip, out.size() - done);
    std::memcpy(out.data() + done, reinterpret_cast<uint8_t*>(&word) + skip, n);
    done += n;
  }
  return done;
}

size_t ProcMemory::poke(uint64_t addr, std::span<const uint8_t> data) const {
  size_t done = 0;
  while (done < data.size()) {
    uint64_t a = addr + done, aligned = a & ~7ull;
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, pid_, reinterpret_cast<void*>(aligned), nullptr);
    if (errno != 0) break;
    size_t skip = a - aligned, n = std::min<size_t>(8 - skip, data.size() - done);
    std::memcpy(reinterpret_cast<uint8_t*>(&word) + skip, data.data() + done, n);
    if (ptrace(PTRACE_POKEDATA, pid_, reinterpret_cast<void*>(aligned), reinterpret_cast<void*>(word)) != 0) break;
    done += n;
  }
  return done;
}

Result<size_t> ProcMemory::read(uint64_t addr, std::span<uint8_t> out) const {
  if (out.empty()) return size_t{0};
  size_t done = 0;
  int err = EIO;
  if (fd_ >= 0) {
    while (done < out.size()) {
      ssize_t n = pread64(fd_, out.data() + done, out.size() - done, static_cast<off64_t>(addr + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) err = errno;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (done == 0) done = peek(addr, out);
  if (done == 0)
    return Error{err, fmt::format("Cannot access memory at address {:#x}", addr)};
  return done;
}

Result<size_t> ProcMemory::write(uint64_t addr, std::span<const uint8_t> data) const {
  if (data.empty()) return size_t{0};
  size_t done = 0;
  int err = EIO;
  if (fd_ >= 0) {
    while (done < data.size()) {
      ssize_t n = pwrite64(fd_, data.data() + done, data.size() - done, static_cast<off64_t>(addr + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n < 0) err = errno;
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  if (done < data.size()) done += poke(addr + done, data.subspan(done));
  if (done < data.size())
    return Error{err, fmt::format("Cannot write memory at address {:#x}", addr + done)};
  return done;
}

}  // namespace backend
