// Raw inferior memory through /proc/PID/mem (pread/pwrite), with a PTRACE_PEEKDATA/POKEDATA
// fallback. No breakpoint shadowing here: breakpoints.h layers that on top.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>

#include "backend/error.h"

namespace backend {

class ProcMemory {
 public:
  ProcMemory() = default;
  explicit ProcMemory(pid_t pid) { open(pid); }
  ~ProcMemory();
  ProcMemory(const ProcMemory&) = delete;
  ProcMemory& operator=(const ProcMemory&) = delete;

  // (Re)opens /proc/pid/mem: needed again after exec (the old file refers to the old mm).
  void open(pid_t pid);
  void close();
  pid_t pid() const { return pid_; }
  // Reads as much as possible from addr; returns the readable prefix length, or an error when
  // not even the first byte was readable.
  Result<size_t> read(uint64_t addr, std::span<uint8_t> out) const;
  Result<size_t> write(uint64_t addr, std::span<const uint8_t> data) const;

 private:
  size_t peek(uint64_t addr, std::span<uint8_t> out) const;
  size_t poke(uint64_t addr, std::span<const uint8_t> data) const;
  pid_t pid_ = 0;
  int fd_ = -1;
};

}  // namespace backend
