// Private to PatchTracer's implementation files (patch_tracer*.cc): constants and a helper they
// share. Not for other code.
#pragma once

#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/user.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

namespace backend {

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kTableSlots = 1 << 17;       // instrumented block starts (half used at most)
// The slots in use at first: the table doubles as it fills (PatchTracer::grow_table), so that a
// short run touches a few pages of it, not the 2 MB a table spread over every slot touches.
constexpr uint32_t kTableFirstSlots = 1 << 11;

inline uint64_t pc_of(pid_t tid) {
  errno = 0;
  long v = ::ptrace(PTRACE_PEEKUSER, tid, reinterpret_cast<void*>(offsetof(user_regs_struct, rip)), nullptr);
  return errno ? 0 : static_cast<uint64_t>(v);
}

}  // namespace

}  // namespace backend
