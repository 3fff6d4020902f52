// What the block-patching trace source does to a stopped inferior from outside: runs a system
// call in it (mmap/mprotect/munmap of the area that holds the stubs and the ring), and finds an
// address range near a module for that area (stubs are reached with rel32 jumps).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "backend/error.h"
#include "backend/memory_region.h"
#include "backend/ptrace/proc_memory.h"

namespace backend::patch {

// Runs system call `nr` in thread tid, which must be in a ptrace stop, with a `syscall`
// instruction written over its pc for one single step; the bytes and every register (orig_rax
// too, so an interrupted system call still restarts) are put back. Returns the call's result
// (a negative errno on failure). A signal that arrives meanwhile is queued again for the thread.
// `at`: where the `syscall` goes instead of the pc (code no other thread runs: other threads of
// the program may be running while this one is stopped); 0 = the thread's pc.
Result<int64_t> inject_syscall(pid_t pid, pid_t tid, const ProcMemory& mem, long nr, std::array<uint64_t, 6> args,
                               uint64_t at = 0);

// As inject_syscall, from any ptrace stop, a system-call stop included (where a single step
// would only finish the call under way): at an entry stop the pending call is turned into
// `nr` and, once it is done, the `syscall` instruction is run again (a new entry stop of the
// same call, registers as they were); at an exit stop the instruction before the pc runs `nr`
// and the registers are put back (the thread is at an exit stop again, as the caller found
// it). Elsewhere it is inject_syscall at the pc.
// `at`: as inject_syscall's, where a `syscall` may be written when none is before the pc.
Result<int64_t> inject_syscall_at_stop(pid_t pid, pid_t tid, const ProcMemory& mem, long nr,
                                       std::array<uint64_t, 6> args, uint64_t at = 0);

// A page-aligned free range of `size` bytes between the `used` ranges ([start, end), sorted),
// such that every byte of it is within rel32 reach (with a margin) of every byte of [lo, hi).
// Below lo first (the heap grows above a program), nearest first. nullopt if none.
std::optional<uint64_t> free_range_near(const std::vector<std::pair<uint64_t, uint64_t>>& used, uint64_t lo,
                                        uint64_t hi, uint64_t size);

// Left free below code we map near: ld.so and mmap place new mappings right below the lowest
// ones, and an area of ours there would move the libraries loaded after it.
inline constexpr uint64_t kKeepClear = uint64_t{1} << 30;
inline constexpr uint64_t kMapFixedNoReplace = 0x100000;  // MAP_FIXED_NOREPLACE (Linux 4.17; before: a hint)

// free_range_near over a process's mappings, with the kKeepClear below lo kept free; where
// nothing is free so, anywhere in reach (none when keep_clear_only).
std::optional<uint64_t> free_range_below_clear(const std::vector<MemoryRegion>& maps, uint64_t lo, uint64_t hi,
                                               uint64_t size, bool keep_clear_only = false);

}  // namespace backend::patch
