#include "backend/btrace/perf/perf_event.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace backend {

unsigned long perf_open_flags() { return PERF_FLAG_FD_CLOEXEC; }

Result<PerfEvent> PerfEvent::open(const perf_event_attr& attr, pid_t tid, int cpu) {
  int fd = static_cast<int>(::syscall(SYS_perf_event_open, &attr, tid, cpu, -1, perf_open_flags()));
  if (fd < 0) return Error{errno, "perf_event_open"};
  return PerfEvent(fd);
}

PerfEvent::PerfEvent(PerfEvent&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

PerfEvent& PerfEvent::operator=(PerfEvent&& other) noexcept {
  if (this != &other) {
    PerfEvent gone(std::exchange(fd_, std::exchange(other.fd_, -1)));
  }
  return *this;
}

PerfEvent::~PerfEvent() {
  if (fd_ < 0) return;
  ::ioctl(fd_, PERF_EVENT_IOC_DISABLE, 0);
  ::close(fd_);
}

Result<Mapping> Mapping::map(int fd, size_t len, int prot, off_t offset) {
  void* addr = ::mmap(nullptr, len, prot, MAP_SHARED, fd, offset);
  if (addr == MAP_FAILED) return Error{errno, "mmap"};
  Mapping m;
  m.addr_ = addr;
  m.len_ = len;
  return m;
}

Mapping::Mapping(Mapping&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)), len_(std::exchange(other.len_, 0)) {}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (addr_) ::munmap(addr_, len_);
    addr_ = std::exchange(other.addr_, nullptr);
    len_ = std::exchange(other.len_, 0);
  }
  return *this;
}

Mapping::~Mapping() {
  if (addr_) ::munmap(addr_, len_);
}

}  // namespace backend
