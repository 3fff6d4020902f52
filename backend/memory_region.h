// A mapping of a process's address space (one line of /proc/PID/maps), and a loaded library
// (one entry of the dynamic loader's link map): plain values shared by the /proc readers, the
// process and the server.
#pragma once

#include <cstdint>
#include <string>

namespace backend {

struct MemoryRegion {
  uint64_t start = 0, end = 0;
  bool read = false, write = false, exec = false;
  std::string name;   // path or [heap]/[stack]/[vdso]...
  uint64_t offset = 0;  // file offset of `start` (the maps file's third column); 0 if unknown
  uint64_t inode = 0;   // the mapped file's inode (the fifth column); 0 if none
  bool shared = false;  // MAP_SHARED ('s' in the fourth column)
};

// lmid: the r_debug of the library's link-map namespace (gdbserver's lmid attribute).
struct LibraryInfo { std::string name; uint64_t lm = 0, l_addr = 0, l_ld = 0, lmid = 0; };

}  // namespace backend
