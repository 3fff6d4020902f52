// read_libraries (qXfer:libraries-svr4) on a hand-built memory image: program headers found
// through the auxv, the dynamic section, r_debug and link_map chains, as gdbserver walks them.
#include <elf.h>
#include <link.h>

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/ptrace/proc_info.h"

using namespace backend;

namespace {

// A sparse little memory: bytes at addresses, everything else unreadable.
class Image {
 public:
  void put(uint64_t addr, const void* data, size_t n) {
    const auto* b = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) bytes_[addr + i] = b[i];
  }
  void put_u64(uint64_t addr, uint64_t v) { put(addr, &v, 8); }
  void put_string(uint64_t addr, const std::string& s) { put(addr, s.c_str(), s.size() + 1); }
  size_t read(uint64_t addr, std::span<uint8_t> out) const {
    size_t n = 0;
    for (; n < out.size(); ++n) {
      auto it = bytes_.find(addr + n);
      if (it == bytes_.end()) break;
      out[n] = it->second;
    }
    return n;
  }

 private:
  std::map<uint64_t, uint8_t> bytes_;
};

constexpr uint64_t kBias = 0x555555554000;
constexpr uint64_t kPhdr = kBias + 0x40;
constexpr uint64_t kDynamic = kBias + 0x3000;
constexpr uint64_t kRDebug = 0x7ffff7ffd000;

std::vector<uint8_t> auxv_for(uint64_t phdr, uint64_t phnum) {
  std::vector<uint64_t> words = {AT_PHDR, phdr, AT_PHENT, sizeof(Elf64_Phdr), AT_PHNUM, phnum, AT_NULL, 0};
  std::vector<uint8_t> out(words.size() * 8);
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

// A PIE program: PT_PHDR and PT_DYNAMIC; the dynamic section holds `dyn` then DT_NULL.
void program(Image& m, std::vector<Elf64_Dyn> dyn, bool with_dynamic = true) {
  Elf64_Phdr ph[2] = {};
  ph[0].p_type = PT_PHDR;
  ph[0].p_vaddr = kPhdr - kBias;
  ph[1].p_type = with_dynamic ? PT_DYNAMIC : PT_LOAD;
  ph[1].p_vaddr = kDynamic - kBias;
  m.put(kPhdr, ph, sizeof ph);
  dyn.push_back(Elf64_Dyn{DT_NULL, {0}});
  m.put(kDynamic, dyn.data(), dyn.size() * sizeof(Elf64_Dyn));
}

void r_debug_at(Image& m, uint64_t addr, int version, uint64_t r_map, uint64_t r_next = 0) {
  int32_t v = version;
  m.put(addr, &v, 4);
  m.put_u64(addr + offsetof(struct r_debug, r_map), r_map);
  m.put_u64(addr + offsetof(struct r_debug_extended, r_next), r_next);
}

void link_map_at(Image& m, uint64_t lm, const std::string& name, uint64_t l_addr, uint64_t next, uint64_t prev) {
  uint64_t name_addr = lm + 0x100;
  m.put_string(name_addr, name);
  m.put_u64(lm + offsetof(struct link_map, l_addr), l_addr);
  m.put_u64(lm + offsetof(struct link_map, l_name), name_addr);
  m.put_u64(lm + offsetof(struct link_map, l_ld), l_addr + 0x2000);
  m.put_u64(lm + offsetof(struct link_map, l_next), next);
  m.put_u64(lm + offsetof(struct link_map, l_prev), prev);
}

Result<std::vector<LibraryInfo>> walk(const Image& m, uint64_t* main_lm) {
  auto auxv = auxv_for(kPhdr, 2);
  return read_libraries(auxv, [&m](uint64_t a, std::span<uint8_t> out) { return m.read(a, out); }, main_lm);
}

}  // namespace

TEST_CASE("libraries: the first link_map entry is main-lm, the rest are libraries", "[libraries]") {
  Image m;
  program(m, {{DT_DEBUG, {kRDebug}}});
  r_debug_at(m, kRDebug, 1, 0x1000);
  // The program's own entry has a name here (as when ld.so names it): still not a library.
  link_map_at(m, 0x1000, "/usr/bin/prog", 0, 0x2000, 0);
  link_map_at(m, 0x2000, "linux-vdso.so.1", 0x7fff0000, 0x3000, 0x1000);
  link_map_at(m, 0x3000, "/lib/libc.so.6", 0x7ffff7d00000, 0x4000, 0x2000);
  link_map_at(m, 0x4000, "", 0x7ffff7fc0000, 0, 0x3000);  // unnamed: skipped
  uint64_t main_lm = 0;
  auto libs = walk(m, &main_lm);
  REQUIRE(libs.ok());
  CHECK(main_lm == 0x1000);
  REQUIRE(libs->size() == 2);
  CHECK((*libs)[0].name == "linux-vdso.so.1");
  CHECK((*libs)[0].lm == 0x2000);
  CHECK((*libs)[1].name == "/lib/libc.so.6");
  CHECK((*libs)[1].l_addr == 0x7ffff7d00000);
  CHECK((*libs)[1].l_ld == 0x7ffff7d02000);
  CHECK((*libs)[1].lmid == kRDebug);
}

TEST_CASE("libraries: no DT_DEBUG is an error, an empty r_debug an empty list", "[libraries]") {
  uint64_t main_lm = 1;
  SECTION("ld.so started as the program: a dynamic section without DT_DEBUG") {
    Image m;
    program(m, {{DT_HASH, {0x1234}}});
    CHECK_FALSE(walk(m, &main_lm).ok());
  }
  SECTION("a static program: no PT_DYNAMIC") {
    Image m;
    program(m, {}, false);
    CHECK_FALSE(walk(m, &main_lm).ok());
  }
  SECTION("at the loader's entry, DT_DEBUG is still 0") {
    Image m;
    program(m, {{DT_DEBUG, {0}}});
    auto libs = walk(m, &main_lm);
    REQUIRE(libs.ok());
    CHECK(libs->empty());
    CHECK(main_lm == 0);
  }
}

TEST_CASE("libraries: a broken l_prev ends the walk, a bad r_version reads nothing", "[libraries]") {
  Image m;
  program(m, {{DT_DEBUG, {kRDebug}}});
  r_debug_at(m, kRDebug, 1, 0x1000);
  link_map_at(m, 0x1000, "", 0, 0x2000, 0);
  link_map_at(m, 0x2000, "/lib/a.so", 1, 0x3000, 0x1000);
  link_map_at(m, 0x3000, "/lib/b.so", 2, 0x4000, 0x9999);  // not linked back to 0x2000
  link_map_at(m, 0x4000, "/lib/c.so", 3, 0, 0x3000);
  uint64_t main_lm = 0;
  auto libs = walk(m, &main_lm);
  REQUIRE(libs.ok());
  REQUIRE(libs->size() == 1);
  CHECK((*libs)[0].name == "/lib/a.so");

  r_debug_at(m, kRDebug, 0, 0x1000);
  libs = walk(m, &main_lm);
  REQUIRE(libs.ok());
  CHECK(libs->empty());
}

TEST_CASE("libraries: r_version 2 chains the other link-map namespaces", "[libraries]") {
  Image m;
  constexpr uint64_t kSecond = 0x7ffff7ffe000;
  program(m, {{DT_DEBUG, {kRDebug}}});
  r_debug_at(m, kRDebug, 2, 0x1000, kSecond);
  link_map_at(m, 0x1000, "", 0, 0x2000, 0);
  link_map_at(m, 0x2000, "/lib/libc.so.6", 1, 0, 0x1000);
  // A dlmopen namespace: its first entry is a library, not a program.
  r_debug_at(m, kSecond, 2, 0x5000, 0);
  link_map_at(m, 0x5000, "/lib/libm.so.6", 5, 0, 0);
  uint64_t main_lm = 0;
  auto libs = walk(m, &main_lm);
  REQUIRE(libs.ok());
  CHECK(main_lm == 0x1000);
  REQUIRE(libs->size() == 2);
  CHECK((*libs)[0].lmid == kRDebug);
  CHECK((*libs)[1].name == "/lib/libm.so.6");
  CHECK((*libs)[1].lmid == kSecond);
}
