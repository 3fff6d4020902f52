// The block-patching source's warm plan on disk (backend/btrace/patch/plan_cache.h): the file
// format both ways, what a damaged file gives, the key of a module file, and save's merge.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "backend/btrace/patch/plan_cache.h"
#include "tests/unit/temp_dir.h"

using backend::patch::encode_plan;
using backend::patch::ModulePlan;
using backend::patch::parse_plan;
using backend::patch::PlanCache;

namespace {

ModulePlan sample() {
  ModulePlan p;
  p.code_bytes = 0x20000;
  p.file_offset = 0x1000;
  p.starts = {{0x10, 0x24, 0xdeadbeef}, {0x30, 0x30, 7}, {0x1fff0, 0x1fffe, 0}};
  return p;
}

struct TempDir : testutil::TempDir {
  TempDir() : testutil::TempDir("bs-plan") {}
};

}  // namespace

TEST_CASE("a plan's file round-trips", "[plan_cache]") {
  ModulePlan p = sample();
  auto bytes = encode_plan(p);
  REQUIRE(bytes.size() == 32 + 3 * 12);
  REQUIRE(std::string(bytes.begin(), bytes.begin() + 8) == "BSPLAN02");
  auto back = parse_plan(bytes);
  REQUIRE(back);
  CHECK(back->code_bytes == p.code_bytes);
  CHECK(back->file_offset == p.file_offset);
  CHECK(back->starts == p.starts);
  // Empty plans too.
  ModulePlan empty;
  empty.code_bytes = 4096;
  auto e = parse_plan(encode_plan(empty));
  REQUIRE(e);
  CHECK(e->starts.empty());
}

TEST_CASE("parse_plan sorts and drops repeated starts", "[plan_cache]") {
  ModulePlan p = sample();
  p.starts = {{0x30, 0x30, 1}, {0x10, 0x24, 2}, {0x30, 0x30, 1}, {0x30, 0x30, 3}};
  auto back = parse_plan(encode_plan(p));
  REQUIRE(back);
  CHECK(back->starts == std::vector<backend::patch::PlanStart>{{0x10, 0x24, 2}, {0x30, 0x30, 1}, {0x30, 0x30, 3}});
}

TEST_CASE("parse_plan refuses what is not a whole plan", "[plan_cache]") {
  auto good = encode_plan(sample());
  SECTION("wrong magic, or the older format (no hashes)") {
    good[7] = '3';
    CHECK_FALSE(parse_plan(good));
    good[7] = '1';
    CHECK_FALSE(parse_plan(good));
  }
  SECTION("truncated, or bytes after the last pair") {
    for (size_t n = 0; n < good.size(); ++n)
      CHECK_FALSE(parse_plan(std::span<const uint8_t>(good.data(), n)));
    good.push_back(0);
    CHECK_FALSE(parse_plan(good));
  }
  SECTION("a count larger than the file") {
    good[24] = 0xff;
    CHECK_FALSE(parse_plan(good));
  }
  SECTION("the reserved word set") {
    good[28] = 1;
    CHECK_FALSE(parse_plan(good));
  }
  SECTION("a block end outside the mapping, or before its start") {
    ModulePlan p = sample();
    p.starts.back().end = static_cast<uint32_t>(p.code_bytes);
    CHECK_FALSE(parse_plan(encode_plan(p)));
    p = sample();
    p.starts.front() = {0x24, 0x10, 0};
    CHECK_FALSE(parse_plan(encode_plan(p)));
  }
}

TEST_CASE("parse_plan never crashes on damaged files, and whatever it accepts holds", "[plan_cache]") {
  std::mt19937 rng(1234);
  auto good = encode_plan(sample());
  for (int round = 0; round < 20000; ++round) {
    auto bytes = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    if (rng() % 8 == 0) bytes.resize(rng() % (bytes.size() + 1));
    auto p = parse_plan(bytes);
    if (!p) continue;
    for (const auto& s : p->starts) {
      REQUIRE(s.start <= s.end);
      REQUIRE(s.end < p->code_bytes);
    }
  }
}

TEST_CASE("block_hash is FNV-1a over the bytes: a start moved by a byte hashes otherwise", "[plan_cache]") {
  using backend::patch::block_hash;
  CHECK(block_hash({}) == 0x811c9dc5u);
  const uint8_t a[] = {'a'};
  CHECK(block_hash(a) == 0xe40c292cu);  // FNV-1a 32 of "a"
  const uint8_t code[] = {0x55, 0x48, 0x89, 0xe5, 0x74, 0x02};
  CHECK(block_hash(code) != block_hash(std::span<const uint8_t>(code + 1, sizeof code - 1)));
}

TEST_CASE("a module's key: its build id, and none for a file replaced since it was mapped", "[plan_cache]") {
  // This test program is an ELF file; Debian's toolchain gives it a build id.
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  struct stat st {};
  REQUIRE(::stat(self.c_str(), &st) == 0);
  std::string key = PlanCache::key_of(self, st.st_ino);
  REQUIRE(!key.empty());
  CHECK((key[0] == 'b' || key[0] == 'f'));
  CHECK(PlanCache::key_of(self, st.st_ino) == key);
  CHECK(PlanCache::key_of(self, st.st_ino + 1).empty());  // another inode: not the file mapped
  CHECK(PlanCache::key_of("/nonexistent/file", 0).empty());
  CHECK(PlanCache::key_of("relative/path", 0).empty());
  // Not an ELF file: no key.
  TempDir dir;
  std::string text = (dir.path / "text").string();
  std::ofstream(text) << "not an elf file\n";
  CHECK(PlanCache::key_of(text, 0).empty());
  // An ELF file without a build id: keyed by what changes when the file does.
  auto copy = dir.path / "copy";
  std::filesystem::copy_file(self, copy);
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // Turn the build-id note's type into another one: the file has no build id then.
    auto at = all.find(std::string("GNU\0", 4));
    while (at != std::string::npos && at >= 4) {
      uint32_t type;
      std::memcpy(&type, all.data() + at - 4, 4);
      if (type == 3) {  // NT_GNU_BUILD_ID
        uint32_t other = 0x7fff;
        f.seekp(static_cast<std::streamoff>(at - 4));
        f.write(reinterpret_cast<const char*>(&other), 4);
      }
      at = all.find(std::string("GNU\0", 4), at + 1);
    }
  }
  std::string fkey = PlanCache::key_of(copy.string(), 0);
  REQUIRE(!fkey.empty());
  CHECK(fkey[0] == 'f');
  std::ofstream(copy, std::ios::app) << "x";  // changed: another key
  CHECK(PlanCache::key_of(copy.string(), 0) != fkey);
}

TEST_CASE("save writes the union with the plan on disk, load reads it back", "[plan_cache]") {
  TempDir dir;
  PlanCache cache((dir.path / "a" / "b").string());  // made on the first save
  REQUIRE(cache.enabled());
  CHECK_FALSE(cache.load("bkey"));
  ModulePlan p = sample();
  REQUIRE(cache.save("bkey", p));
  auto back = cache.load("bkey");
  REQUIRE(back);
  CHECK(back->starts == p.starts);
  ModulePlan more = sample();
  more.starts = {{0x40, 0x48, 5}, {0x10, 0x24, 0xdeadbeef}};
  REQUIRE(cache.save("bkey", more));
  back = cache.load("bkey");
  REQUIRE(back);
  CHECK(back->starts.size() == 4);
  // Not merged when asked so (a start of the old plan was wrong), nor with a plan of another
  // mapping (size or offset).
  REQUIRE(cache.save("bkey", more, false));
  CHECK(cache.load("bkey")->starts.size() == 2);
  ModulePlan other = sample();
  other.code_bytes = 0x30000;
  REQUIRE(cache.save("bkey", other));
  CHECK(cache.load("bkey")->starts == other.starts);
  // Nothing else is left in the directory (the temporary file was renamed).
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path / "a" / "b")) files += e.is_regular_file();
  CHECK(files == 1);
  // Off: nothing read or written.
  PlanCache off("");
  CHECK_FALSE(off.enabled());
  CHECK_FALSE(off.save("bkey", p));
  CHECK_FALSE(off.load("bkey"));
}

TEST_CASE("the default directory follows XDG_CACHE_HOME, then HOME", "[plan_cache]") {
  std::string xdg = std::getenv("XDG_CACHE_HOME") ? std::getenv("XDG_CACHE_HOME") : "";
  std::string home = std::getenv("HOME") ? std::getenv("HOME") : "";
  ::setenv("XDG_CACHE_HOME", "/x/cache", 1);
  CHECK(backend::patch::default_plan_dir() == "/x/cache/branchstub/plans");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  CHECK(backend::patch::default_plan_dir() == "/home/u/.cache/branchstub/plans");
  ::setenv("HOME", "relative", 1);
  CHECK(backend::patch::default_plan_dir().empty());
  if (!xdg.empty()) ::setenv("XDG_CACHE_HOME", xdg.c_str(), 1);
  if (!home.empty()) ::setenv("HOME", home.c_str(), 1);
  else ::unsetenv("HOME");
}
