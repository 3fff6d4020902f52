// Our perf events (BTS, PT, the probe's test opens): opened close-on-exec, so that a program
// we launch later never inherits another program's trace, and disabled before they are
// closed, so that a copy of the descriptor somewhere (a fork that has not exec'd yet) cannot
// keep the hardware recording after `record stop`.
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "backend/error.h"

namespace backend {

// The flags every perf_event_open of ours passes (PERF_FLAG_FD_CLOEXEC).
unsigned long perf_open_flags();

class PerfEvent {
 public:
  // perf_event_open(attr, tid, cpu, group -1, perf_open_flags()); the raw errno on failure
  // (callers turn it into gdbserver's texts).
  static Result<PerfEvent> open(const perf_event_attr& attr, pid_t tid, int cpu = -1);
  PerfEvent() = default;
  PerfEvent(PerfEvent&& other) noexcept;
  PerfEvent& operator=(PerfEvent&& other) noexcept;
  PerfEvent(const PerfEvent&) = delete;
  PerfEvent& operator=(const PerfEvent&) = delete;
  ~PerfEvent();  // PERF_EVENT_IOC_DISABLE, then close
  int fd() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  explicit PerfEvent(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// A MAP_SHARED mapping, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  // mmap(nullptr, len, prot, MAP_SHARED, fd, offset); the errno on failure.
  static Result<Mapping> map(int fd, size_t len, int prot, off_t offset = 0);
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t size() const { return len_; }

 private:
  void* addr_ = nullptr;
  size_t len_ = 0;
};

}  // namespace backend
