// Which system calls a recording may hold, how the replay treats each, and which memory each
// one writes (x86-64 numbers). Pure: no ptrace; the recorder and the replayer apply it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace backend::replay {

enum class ReplayAs {
  Emulate,        // not run again: the recorded result and memory are put in place
  Execute,        // run again (it shapes the address space or the kernel's state for the
                  // program: mmap, brk, sigaction...); its result must equal the recorded one
  ExecuteAnyResult,  // run again; its result is then replaced by the recorded one (set_tid_address)
  ExecuteUnchecked,  // run again, result not compared (rt_sigreturn, exit)
  OpenFile,       // openat: replaced by an open of the trace's copy (a mapped file) or of
                  // /dev/null, so file descriptors stay numbered as recorded
  SignalSelf,     // kill/tgkill/tkill to the program itself: run again, the pid made the replay's
  Placeholder,    // makes a descriptor the replay cannot make alike (a network socket, an accepted
                  // connection, an eventfd, an epoll set...): replaced by an open of /dev/null, so
                  // descriptors stay numbered as recorded; what is done with it is emulated
  Exec,           // execve/execveat: run again when it succeeded (the new image is loaded from the
                  // same path), emulated when it failed (a PATH search's misses); at its return both
                  // runs set the new image up alike (exec_setup.h), AT_RANDOM from the trace
  Refuse,         // not supported in this slice: the recording stops with `why`
};

struct SyscallPolicy {
  ReplayAs as = ReplayAs::Refuse;
  std::string why;  // Refuse: the message
};

// The name of a syscall ("read"), or "syscall N" for one this table does not name.
std::string syscall_name(long nr);


// How many arguments nr takes (the ones the replay compares), 6 if unknown.
int syscall_arg_count(long nr);

struct Range {
  uint64_t addr = 0;
  uint64_t length = 0;
};
// Reads the program's memory (iovec arrays, struct pointers); false if it could not.
using MemoryReader = std::function<bool(uint64_t addr, void* out, size_t size)>;

// How syscall nr with these arguments is recorded and replayed. `self` is the recorded
// process's pid (a signal to itself is sent again in the replay; to another process, emulated).
// `read`: the program's memory at the entry, for calls whose flags lie there (clone3); without
// it (the replay, which follows what the recording accepted) they are not looked at.
SyscallPolicy syscall_policy(long nr, const uint64_t args[6], int64_t self, const MemoryReader* read = nullptr);
// The memory syscall nr wrote into the program, from its arguments and result.
std::vector<Range> written_ranges(long nr, const uint64_t args[6], int64_t result, const MemoryReader& read);

// Whether the descriptor a ReplayAs::Placeholder call made is close-on-exec (the placeholder
// must be too: an exec closes it, or leaves it, as it did the recorded one).
bool placeholder_cloexec(long nr, const uint64_t args[6]);

// Why a call that completed did something a replay cannot give back (descriptors received
// over a socket), or "" when it can be replayed. Read at the call's return.
std::string unreplayable_result(long nr, const uint64_t args[6], int64_t result, const MemoryReader& read);

}  // namespace backend::replay
