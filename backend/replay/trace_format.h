// The trace directory `branchstub record` writes and `branchstub replay` reads (pure file I/O,
// no ptrace):
//   header   text: "branchstub-trace VERSION", then one "key value" line per fact (argv, env,
//            cwd, exe and its hash, auxv and AT_RANDOM bytes in hex, recorded pid/tid, exit)
//   events   binary: typed records one after another (TraceEvent), each with its position
//   data     binary: the bytes the recorded system calls wrote into the program's memory;
//            events point into it (offset, length)
//   files/   copies of the files the program mapped, named N-BASENAME, hashed (FNV-1a 64)
// The header is written last: a directory without one is an unfinished recording.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/error.h"

namespace backend::replay {

// 2: Instruction events (a version 1 trace lacks them: its replay would diverge at the first cpuid).
inline constexpr int kTraceVersion = 2;

enum class EventKind : uint32_t {
  Syscall = 1,  // a system call: number, arguments, result, the memory it wrote
  Rdtsc = 2,    // an rdtsc/rdtscp trapped by PR_SET_TSC: the value it returned
  Signal = 3,   // a signal delivered to the program: args[0] si_code, args[1] flags (below)
  Exit = 4,     // the program's end: exit status or terminating signal
  // cpuid, rdrand, rdseed or rdpid (nr: NondeterministicInsn::Kind) at pc: args[0..3] what it
  // produced (NondeterministicResult), args[4] what it read (input_of)
  Instruction = 5,
};

// Signal args[1]: an asynchronous signal (a timer's, another process's) that arrived right at
// the return of the syscall before it; writes[0] holds its siginfo_t (address 0). Replay sends
// it at that syscall's exit. Without the flag: a signal the program raised itself (a fault, a
// kill to itself), which recurs by itself.
inline constexpr uint64_t kSignalAtSyscallExit = 1;
// Signal args[1]: an asynchronous signal that arrived inside the program's own code, at `pc`
// with `branches` taken; args[2] is register_digest() of the thread there, args[3] its rcx
// (the iterations left of a `rep` string instruction it interrupted; 0 in older traces),
// writes[0] its siginfo_t. Replay runs the thread to that pc at that count, checks the digest
// and sends it.
inline constexpr uint64_t kSignalInCode = 2;

struct MemoryWrite {
  uint64_t addr = 0;
  uint64_t data_offset = 0;  // into `data`
  uint64_t length = 0;
};

struct TraceEvent {
  EventKind kind = EventKind::Syscall;
  uint64_t position = 0;  // index of the event in the trace (the replay's coordinate)
  // Taken branches of the thread before this event (its exact count, from the first
  // instruction after exec): the replay checks it at every syscall, rdtsc and signal.
  uint64_t branches = 0;
  uint64_t pc = 0;           // the instruction after the syscall / at the rdtsc; for checks
  int64_t nr = 0;            // Syscall: number; Signal: signal number; Exit: status or -signal
  uint64_t args[6] = {};     // Syscall arguments; Rdtsc: args[0] = rax, args[1] = rdx, args[2] = rcx
  int64_t result = 0;        // Syscall: rax at its exit
  int32_t mapped_file = -1;  // Syscall mmap of a file: index into TraceHeader::files
  std::vector<MemoryWrite> writes;
};

struct MappedFile {
  std::string path;       // where the program found it
  std::string copy;       // name under files/
  uint64_t hash = 0;      // FNV-1a 64 of the whole file
  uint64_t size = 0;
};

struct TraceHeader {
  int version = kTraceVersion;
  std::vector<std::string> argv;
  std::vector<std::string> env;  // KEY=VALUE, exactly as the program got it
  std::string cwd;
  std::string exe;               // absolute path of the program
  uint64_t exe_hash = 0;
  std::vector<uint8_t> auxv;     // /proc/PID/auxv at the exec stop, as recorded (before our edit)
  std::vector<uint8_t> at_random;  // the 16 bytes AT_RANDOM pointed at
  pid_t pid = 0;                 // the recorded process (its getpid answers)
  uint64_t event_count = 0;
  bool complete = false;         // the program ran to its end
  int exit_status = 0;           // as Exit's nr: status, or -signal
  std::vector<MappedFile> files;
  // The descriptors open when the program started (nullopt: a trace from before they were kept).
  std::optional<std::vector<int>> fds;
  // Signal dispositions ignored and signals blocked when the program started (bit n-1 for
  // signal n, as /proc/PID/status shows them; nullopt: a trace from before they were kept).
  std::optional<uint64_t> sig_ignored, sig_blocked;
  // The recording's CPU (backend/host/cpu_id.h's CpuFeatures): "vendor family model stepping",
  // its feature words and XCR0; replay checks them against its own.
  std::string cpu;
  std::vector<uint32_t> cpu_features;
  uint64_t xcr0 = 0;
  // Recorded with the system-call buffer: its memory sat beside the ring, which the replay
  // maps the same size so that the program's own mappings land where they did.
  bool syscall_buffer = false;
};

// FNV-1a, 64 bits: a quick fingerprint for "this is the file we recorded" (not a security hash).
uint64_t fnv1a64(const void* data, size_t size, uint64_t seed = 0xcbf29ce484222325ULL);
Result<uint64_t> hash_file(const std::string& path, uint64_t* size = nullptr);

std::string to_hex(const std::vector<uint8_t>& bytes);
std::optional<std::vector<uint8_t>> from_hex(const std::string& text);

// The header as text and back (unit-tested without a directory).
std::string format_header(const TraceHeader& h);
Result<TraceHeader> parse_header(const std::string& text);

// One event as bytes and back; `at` advances past the record. Error on a truncated or unknown
// record (the message says which byte).
std::vector<uint8_t> encode_event(const TraceEvent& e);
Result<TraceEvent> decode_event(const std::vector<uint8_t>& bytes, size_t& at);

class TraceWriter {
 public:
  // Creates DIR (and DIR/files); error if DIR exists and is not empty.
  static Result<std::unique_ptr<TraceWriter>> create(const std::string& dir);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  const std::string& dir() const { return dir_; }
  uint64_t next_position() const { return position_; }
  // Appends bytes to `data`: the MemoryWrite that points at them.
  MemoryWrite add_data(uint64_t addr, const std::vector<uint8_t>& bytes);
  // Writes the event (its position is set here).
  Result<void> add_event(TraceEvent e);
  // Copies (or hard-links) a mapped file into files/ once per path: its index in the header.
  Result<int> add_file(const std::string& path, TraceHeader& header);
  // Flushes the streams and writes the header (event_count set here).
  Result<void> finish(TraceHeader& header);

 private:
  explicit TraceWriter(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
  FILE* events_ = nullptr;
  FILE* data_ = nullptr;
  uint64_t data_size_ = 0;
  uint64_t position_ = 0;
};

class TraceReader {
 public:
  static Result<TraceReader> open(const std::string& dir);
  const TraceHeader& header() const { return header_; }
  const std::vector<TraceEvent>& events() const { return events_; }
  // The bytes of one memory write (from `data`).
  Result<std::vector<uint8_t>> bytes(const MemoryWrite& w) const;
  std::string file_copy_path(int index) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  TraceHeader header_;
  std::vector<TraceEvent> events_;
  std::vector<uint8_t> data_;
};

}  // namespace backend::replay
