// What /proc and the dynamic loader's r_debug say about a process: auxv, exe, maps, threads,
// loaded libraries (link_map walk), thread name and core.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backend/error.h"
#include "backend/memory_region.h"

namespace backend {

Result<std::string> read_text_file(const std::string& path);
Result<std::vector<uint8_t>> read_auxv(pid_t pid);
Result<std::string> read_exe_path(pid_t pid);
Result<std::vector<MemoryRegion>> read_memory_map(pid_t pid);
std::vector<pid_t> list_tasks(pid_t pid);           // /proc/pid/task, sorted
std::string read_thread_name(pid_t pid, pid_t tid);  // comm without the newline, "" if gone
int read_thread_core(pid_t pid, pid_t tid);          // field 39 of stat, -1 if unknown
char read_thread_state(pid_t pid, pid_t tid);        // field 3 of stat (R, S, t, Z...), '?' if gone
// Parent and real/effective user and group ids (/proc/PID/status); -1 where unreadable.
struct ProcessIds { long ppid = -1, real_uid = -1, effective_uid = -1, real_gid = -1, effective_gid = -1; };
ProcessIds read_process_ids(pid_t pid);
// A thread's seccomp mode (the Seccomp field of its status): 0 none, 1 strict, 2 filter; -1
// where unreadable.
int read_seccomp_mode(pid_t pid, pid_t tid);
// One auxv entry's value (0 if absent).
uint64_t auxv_value(std::span<const uint8_t> auxv, uint64_t type);

using ReadMemoryFn = std::function<size_t(uint64_t addr, std::span<uint8_t> out)>;
// Walks r_debug.r_map from DT_DEBUG of the main executable (and the other link-map namespaces
// when r_version >= 2). *main_lm is the program's own entry, which is not in the list. An
// empty list when the loader has not filled r_debug yet (at the ld.so entry); an error when
// the program has no DT_DEBUG at all (static, or ld.so started as the program).
Result<std::vector<LibraryInfo>> read_libraries(std::span<const uint8_t> auxv, const ReadMemoryFn& read,
                                                uint64_t* main_lm);

}  // namespace backend
