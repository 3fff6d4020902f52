// What record and replay both do to the program at its exec stop, before its first
// instruction, so that both runs start alike: the vDSO is hidden from glibc (AT_SYSINFO_EHDR
// becomes AT_IGNORE in the auxiliary vector on the stack, so time functions make system calls
// that are recorded), and AT_RANDOM's 16 bytes are read (record) or put back (replay); the
// open descriptors are listed (record) or made the recorded ones (replay).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/error.h"

namespace backend::replay {

struct ExecFacts {
  std::vector<uint8_t> auxv;       // /proc/PID/auxv before the edit
  uint64_t at_random_addr = 0;
  std::vector<uint8_t> at_random;  // the bytes there
  std::vector<int> fds;            // open descriptors, ascending
  uint64_t sig_ignored = 0;        // SigIgn: dispositions SIG_IGN (bit n-1: signal n)
  uint64_t sig_blocked = 0;        // SigBlk: the signal mask
};

// pid is stopped at its exec (ptrace). `random`, when not empty, replaces AT_RANDOM's bytes.
Result<ExecFacts> prepare_exec(pid_t pid, const std::vector<uint8_t>& random = {});

// Makes pid's open descriptors (stopped at its exec) exactly `want`: the ones it inherited
// that the recording did not have are closed, the missing ones opened on /dev/null, by system
// calls run in it. The program opens files at the numbers the kernel picks (the lowest free),
// which the replay must get as recorded, whatever the replay server inherited.
Result<void> match_descriptors(pid_t pid, const std::vector<int>& want);

// Makes pid's ignored dispositions and signal mask (stopped at its exec) the recorded ones:
// a program inherits both through exec (a shell's background job ignores SIGINT), and a replay
// server that inherited others would have the kernel act otherwise on the signals the replay
// sends (a recorded SIGTERM left pending would kill it).
Result<void> match_signal_state(pid_t pid, uint64_t ignored, uint64_t blocked);

// Open descriptors of pid, ascending (/proc/PID/fd).
Result<std::vector<int>> open_descriptors(pid_t pid);

// /proc/PID/<name> read whole (environ, auxv).
Result<std::vector<uint8_t>> read_proc_file(pid_t pid, const std::string& name);

}  // namespace backend::replay
