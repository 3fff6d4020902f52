// Memory that the block-patching source maps into the program and into the server at once (one
// memfd, MAP_SHARED on both sides): the stub areas, the table and the rings. The server writes
// stubs and table slots with a store and drains a ring where it lies, instead of one /proc or
// process_vm system call per write or read (on `ls -l` that was a fifth of the server's time).
//
// The program gets the memfd from a memfd_create run in it; the server takes a copy of that
// descriptor with pidfd_getfd (Linux 5.6; allowed to whoever may ptrace the program), maps it,
// and the program maps it and closes its descriptor. Where any step fails the caller maps
// private memory as before: sharing is only ever a speed-up.
//
// A fork child inherits the mappings shared with its parent; the child never runs patched
// code (its code is put back before it runs: PatchTracer::restore_into), so it never writes
// there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>

#include "backend/error.h"
#include "backend/ptrace/proc_memory.h"

namespace backend::patch {

// The server's view of one shared mapping (unmapped with it).
class SharedView {
 public:
  SharedView() = default;
  SharedView(uint8_t* data, uint64_t size) : data_(data), size_(size) {}
  ~SharedView();
  SharedView(SharedView&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  SharedView& operator=(SharedView&& o) noexcept;
  SharedView(const SharedView&) = delete;
  SharedView& operator=(const SharedView&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

struct SharedMapping {
  uint64_t addr = 0;  // where the program has it
  SharedView view;    // where the server has it
};

// Maps `size` bytes (a multiple of the page size) shared between the program and the server:
// in the program at `addr` with `prot` (`exact`: there or not at all, never over another
// mapping; else addr is a hint, 0: anywhere), the system calls run in thread tid (stopped) from `syscall_at` (see
// inject_syscall), `name_at`: a NUL-terminated name in the program's memory (what its maps show).
// An error leaves nothing mapped on either side.
Result<SharedMapping> map_shared(pid_t pid, pid_t tid, const ProcMemory& mem, uint64_t addr, bool exact, uint64_t size,
                                 int prot, uint64_t syscall_at, uint64_t name_at);

}  // namespace backend::patch
