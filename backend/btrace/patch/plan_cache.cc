// The warm plan's file format and directory (see plan_cache.h).
#include "backend/btrace/patch/plan_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "backend/host/elf_file.h"

namespace backend::patch {

namespace {

constexpr char kMagic[8] = {'B', 'S', 'P', 'L', 'A', 'N', '0', '2'};
constexpr size_t kEntry = 12;
constexpr size_t kHeader = 8 + 8 + 8 + 4 + 4;

void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t get(std::span<const uint8_t> in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[at + i]} << (8 * i);
  return v;
}

// mkdir -p, private to the user (plans say which code of which files they ran).
bool make_dirs(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

uint32_t block_hash(std::span<const uint8_t> bytes) {
  uint32_t h = 0x811c9dc5u;
  for (uint8_t b : bytes) h = (h ^ b) * 0x01000193u;
  return h;
}

std::vector<uint8_t> encode_plan(const ModulePlan& plan) {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put(out, plan.code_bytes, 8);
  put(out, plan.file_offset, 8);
  put(out, plan.starts.size(), 4);
  put(out, 0, 4);
  for (const PlanStart& s : plan.starts) {
    put(out, s.start, 4);
    put(out, s.end, 4);
    put(out, s.hash, 4);
  }
  return out;
}

std::optional<ModulePlan> parse_plan(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, 8) != 0) return std::nullopt;
  ModulePlan plan;
  plan.code_bytes = get(bytes, 8, 8);
  plan.file_offset = get(bytes, 16, 8);
  uint64_t count = get(bytes, 24, 4);
  if (get(bytes, 28, 4) != 0 || count > PlanCache::kMaxStarts || bytes.size() != kHeader + count * kEntry) return std::nullopt;
  plan.starts.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    size_t at = kHeader + i * kEntry;
    PlanStart s{static_cast<uint32_t>(get(bytes, at, 4)), static_cast<uint32_t>(get(bytes, at + 4, 4)),
                static_cast<uint32_t>(get(bytes, at + 8, 4))};
    if (s.start > s.end || s.end >= plan.code_bytes) return std::nullopt;
    plan.starts.push_back(s);
  }
  std::sort(plan.starts.begin(), plan.starts.end());
  plan.starts.erase(std::unique(plan.starts.begin(), plan.starts.end()), plan.starts.end());
  return plan;
}

std::string default_plan_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && xdg[0] == '/') return std::string(xdg) + "/branchstub/plans";
  if (const char* home = std::getenv("HOME"); home && home[0] == '/') return std::string(home) + "/.cache/branchstub/plans";
  return {};
}

std::string PlanCache::key_of(const std::string& path, uint64_t inode) {
  struct stat st {};
  if (path.empty() || path[0] != '/' || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  if (inode && st.st_ino != inode) return {};
  auto elf = ElfFile::open(path);
  if (!elf) return {};
  std::string id = elf->build_id();
  if (!id.empty()) return "b" + id;
  // No build id: what changes when the file does (FNV-1a over the four).
  uint64_t h = 0xcbf29ce484222325ull;
  const uint64_t parts[] = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                           static_cast<uint64_t>(st.st_size),
                           static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000u + static_cast<uint64_t>(st.st_mtim.tv_nsec)};
  for (uint64_t v : parts)
    for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  return fmt::format("f{:016x}", h);
}

std::string PlanCache::path_of(const std::string& key) const { return dir_ + "/" + key + ".plan"; }

std::optional<ModulePlan> PlanCache::load(const std::string& key) const {
  if (!enabled() || key.empty()) return std::nullopt;
  std::ifstream in(path_of(key), std::ios::binary);
  if (!in) return std::nullopt;
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_plan(bytes);
}

bool PlanCache::save(const std::string& key, const ModulePlan& plan, bool merge) const {
  if (!enabled() || key.empty() || !make_dirs(dir_)) return false;
  ModulePlan merged = plan;
  if (auto old = merge ? load(key) : std::nullopt; old && old->code_bytes == plan.code_bytes && old->file_offset == plan.file_offset)
    merged.starts.insert(merged.starts.end(), old->starts.begin(), old->starts.end());
  std::sort(merged.starts.begin(), merged.starts.end());
  merged.starts.erase(std::unique(merged.starts.begin(), merged.starts.end()), merged.starts.end());
  if (merged.starts.size() > kMaxStarts) merged.starts.resize(kMaxStarts);
  std::vector<uint8_t> bytes = encode_plan(merged);
  // Written beside and renamed: a reader (another server) sees the old file or the new one.
  std::string tmp = fmt::format("{}.{}.tmp", path_of(key), ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = ::close(fd) == 0 && done == bytes.size();
  if (ok) ok = ::rename(tmp.c_str(), path_of(key).c_str()) == 0;
  if (!ok) ::unlink(tmp.c_str());
  return ok;
}

}  // namespace backend::patch
