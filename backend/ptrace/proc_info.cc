#include "backend/ptrace/proc_info.h"

#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

namespace backend {

Result<std::string> read_text_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error("Cannot open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return errno_error("Cannot read " + path, e);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

Result<std::vector<uint8_t>> read_auxv(pid_t pid) {
  auto text = read_text_file(fmt::format("/proc/{}/auxv", pid));
  if (!text) return text.error();
  return std::vector<uint8_t>(text->begin(), text->end());
}

Result<std::string> read_exe_path(pid_t pid) {
  std::string link = fmt::format("/proc/{}/exe", pid);
  char buf[4096];
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n < 0) return errno_error("Cannot read " + link);
  return std::string(buf, static_cast<size_t>(n));
}

Result<std::vector<MemoryRegion>> read_memory_map(pid_t pid) {
  auto text = read_text_file(fmt::format("/proc/{}/maps", pid));
  if (!text) return text.error();
  std::vector<MemoryRegion> out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    // start-end perms offset dev inode [path]
    MemoryRegion r;
    char perms[8] = {};
    unsigned long long start = 0, end = 0, offset = 0, inode = 0;
    int consumed = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %llu %n", &start, &end, perms, &offset, &inode, &consumed) < 4)
      continue;
    r.start = start;
    r.offset = offset;
    r.inode = inode;
    r.end = end;
    r.read = perms[0] == 'r';
    r.write = perms[1] == 'w';
    r.exec = perms[2] == 'x';
    r.shared = perms[3] == 's';
    if (consumed > 0 && static_cast<size_t>(consumed) <= line.size()) r.name = line.substr(static_cast<size_t>(consumed));
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<pid_t> list_tasks(pid_t pid) {
  std::vector<pid_t> out;
  DIR* d = ::opendir(fmt::format("/proc/{}/task", pid).c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_thread_name(pid_t pid, pid_t tid) {
  auto text = read_text_file(fmt::format("/proc/{}/task/{}/comm", pid, tid));
  if (!text) return {};
  std::string s = *text;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

ProcessIds read_process_ids(pid_t pid) {
  ProcessIds ids;
  auto text = read_text_file(fmt::format("/proc/{}/status", pid));
  if (!text) return ids;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line.substr(line.find(':') == std::string::npos ? line.size() : line.find(':') + 1));
    if (line.rfind("PPid:", 0) == 0) fields >> ids.ppid;
    else if (line.rfind("Uid:", 0) == 0) fields >> ids.real_uid >> ids.effective_uid;  // real, effective, saved, fs
    else if (line.rfind("Gid:", 0) == 0) fields >> ids.real_gid >> ids.effective_gid;
  }
  return ids;
}

int read_seccomp_mode(pid_t pid, pid_t tid) {
  auto text = read_text_file(fmt::format("/proc/{}/task/{}/status", pid, tid));
  if (!text) return -1;
  size_t at = text->find("\nSeccomp:");
  if (at == std::string::npos) return -1;
  std::istringstream fields(text->substr(at + 9));
  int mode = -1;
  fields >> mode;
  return fields ? mode : -1;
}

char read_thread_state(pid_t pid, pid_t tid) {
  auto text = read_text_file(fmt::format("/proc/{}/task/{}/stat", pid, tid));
  if (!text) return '?';
  size_t p = text->rfind(')');  // the command name (field 2) may hold spaces and ')'
  return p != std::string::npos && p + 2 < text->size() ? (*text)[p + 2] : '?';
}

int read_thread_core(pid_t pid, pid_t tid) {
  auto text = read_text_file(fmt::format("/proc/{}/task/{}/stat", pid, tid));
  if (!text) return -1;
  // The command name (field 2) may hold spaces and ')': count fields after the last ')'.
  size_t p = text->rfind(')');
  if (p == std::string::npos) return -1;
  std::istringstream in(text->substr(p + 1));
  std::string field;
  for (int i = 3; i <= 39; ++i) {
    if (!(in >> field)) return -1;
    if (i == 39) return std::atoi(field.c_str());
  }
  return -1;
}

uint64_t auxv_value(std::span<const uint8_t> auxv, uint64_t type) {
  for (size_t off = 0; off + 16 <= auxv.size(); off += 16) {
    uint64_t t, v;
    std::memcpy(&t, auxv.data() + off, 8);
    std::memcpy(&v, auxv.data() + off + 8, 8);
    if (t == type) return v;
    if (t == AT_NULL) break;
  }
  return 0;
}

namespace {
bool read_u64(const ReadMemoryFn& read, uint64_t addr, uint64_t& out) {
  return read(addr, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&out), 8)) == 8;
}

std::string read_c_string(const ReadMemoryFn& read, uint64_t addr) {
  std::string s;
  char chunk[64];
  while (s.size() < 4096) {
    size_t n = read(addr + s.size(), std::span<uint8_t>(reinterpret_cast<uint8_t*>(chunk), sizeof chunk));
    if (n == 0) break;
    size_t len = strnlen(chunk, n);
    s.append(chunk, len);
    if (len < n) break;
  }
  return s;
}
}  // namespace

Result<std::vector<LibraryInfo>> read_libraries(std::span<const uint8_t> auxv, const ReadMemoryFn& read,
                                                uint64_t* main_lm) {
  std::vector<LibraryInfo> libs;
  if (main_lm) *main_lm = 0;
  uint64_t phdr = auxv_value(auxv, AT_PHDR), phnum = auxv_value(auxv, AT_PHNUM);
  uint64_t phent = auxv_value(auxv, AT_PHENT);
  if (phdr == 0 || phnum == 0) return Error{EIO, "The auxiliary vector has no program headers (AT_PHDR)."};
  if (phent == 0) phent = sizeof(Elf64_Phdr);

  std::vector<Elf64_Phdr> headers(phnum);
  for (uint64_t i = 0; i < phnum; ++i)
    if (read(phdr + i * phent, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&headers[i]), sizeof(Elf64_Phdr))) !=
        sizeof(Elf64_Phdr))
      return Error{EIO, fmt::format("Cannot read the program headers at {:#x}", phdr)};

  // Load bias: where PT_PHDR says the headers are vs where they really are.
  uint64_t bias = 0;
  bool have_bias = false;
  for (const auto& h : headers)
    if (h.p_type == PT_PHDR) {
      bias = phdr - h.p_vaddr;
      have_bias = true;
    }
  if (!have_bias)
    for (const auto& h : headers)
      if (h.p_type == PT_LOAD && h.p_offset == 0) {
        bias = (phdr - sizeof(Elf64_Ehdr)) - h.p_vaddr;  // headers usually follow the ELF header
        break;
      }

  uint64_t dynamic = 0;
  for (const auto& h : headers)
    if (h.p_type == PT_DYNAMIC) dynamic = h.p_vaddr + bias;
  // No DT_DEBUG in the main program (a static one, or ld.so started as the program): the
  // client must find the loader's r_debug itself (gdbserver answers E01 for the same reason).
  if (dynamic == 0) return Error{ENOENT, "The program has no dynamic section (DT_DEBUG)."};

  bool have_debug = false;
  uint64_t r_debug = 0;
  for (uint64_t off = 0; off < 4096 * 16; off += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d;
    if (read(dynamic + off, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&d), sizeof d)) != sizeof d) break;
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_DEBUG && !have_debug) {
      have_debug = true;
      r_debug = d.d_un.d_ptr;
    }
  }
  if (!have_debug) return Error{ENOENT, "The program has no DT_DEBUG entry."};

  // struct r_debug { int r_version; struct link_map* r_map; ElfW(Addr) r_brk; r_state;
  // r_ldbase; } and, from r_version 2, struct r_debug_extended's r_next: one r_debug per
  // link-map namespace (dlmopen). An r_debug still 0 (at the ld.so entry) is an empty list.
  uint64_t main_r_debug = r_debug;
  for (int namespaces = 0; r_debug != 0 && namespaces < 256; ++namespaces) {
    int32_t r_version = 0;
    if (read(r_debug, std::span<uint8_t>(reinterpret_cast<uint8_t*>(&r_version), sizeof r_version)) !=
            sizeof r_version ||
        r_version < 1)
      break;
    uint64_t lm = 0, prev = 0;
    if (!read_u64(read, r_debug + offsetof(struct r_debug, r_map), lm)) break;
    if (r_debug == main_r_debug) {
      // The first entry of the base namespace is the program itself: it is main-lm, not a
      // library (as gdbserver reports it, whatever name the loader gave it).
      if (main_lm) *main_lm = lm;
      prev = lm;
      if (lm != 0 && !read_u64(read, lm + offsetof(struct link_map, l_next), lm)) break;
    }
    for (int guard = 0; lm != 0 && guard < 100000; ++guard) {
      // struct link_map { l_addr; l_name; l_ld; l_next; l_prev; }
      uint64_t l_addr = 0, l_name = 0, l_ld = 0, l_next = 0, l_prev = 0;
      if (!read_u64(read, lm + offsetof(struct link_map, l_addr), l_addr) ||
          !read_u64(read, lm + offsetof(struct link_map, l_name), l_name) ||
          !read_u64(read, lm + offsetof(struct link_map, l_ld), l_ld) ||
          !read_u64(read, lm + offsetof(struct link_map, l_next), l_next) ||
          !read_u64(read, lm + offsetof(struct link_map, l_prev), l_prev))
        break;
      if (l_prev != prev) break;  // a list being changed (or corrupt): stop where it breaks
      std::string name = l_name ? read_c_string(read, l_name) : std::string();
      if (!name.empty()) libs.push_back(LibraryInfo{name, lm, l_addr, l_ld, r_debug});
      prev = lm;
      lm = l_next;
    }
    if (r_version < 2 || !read_u64(read, r_debug + offsetof(struct r_debug_extended, r_next), r_debug)) break;
  }
  return libs;
}

}  // namespace backend
