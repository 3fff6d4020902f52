// AccessDecoder without a child: short, empty and undecodable input, the cache, random bytes.
// Against the CPU: test_access_decoder_table.cc and test_access_decoder_sweep.cc.
#include <catch2/catch.hpp>

#include <sys/user.h>

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "backend/x86/access_decoder.h"

using namespace backend;

TEST_CASE("mem_access: short, empty and undecodable input", "[mem_access]") {
  AccessDecoder d;
  user_regs_struct r{};
  r.rip = 0x401000;
  r.rbx = 0x5000;
  auto none = [&](std::vector<uint8_t> bytes) {
    InsnAccesses a = d.decode(bytes, r);
    INFO("bytes: " << bytes.size());
    CHECK_FALSE(a.exact);
    CHECK(a.len == 0);
    CHECK(a.accesses.empty());
  };
  none({});
  none({0x48, 0x8b});              // mov rax, [rbx] cut short
  none({0x48, 0x8b, 0x83, 0x10});  // mov rax, [rbx+disp32] cut inside the displacement
  none({0x06});                    // push es: invalid in 64-bit mode
  none({0x0f, 0x04});
  none(std::vector<uint8_t>(16, 0x66));  // prefixes only
  std::vector<uint8_t> too_long(17, 0x66);  // 14 prefixes + nop [rax]: 17 bytes, the CPU raises #UD
  too_long[14] = 0x0f;
  too_long[15] = 0x1f;
  too_long[16] = 0x00;
  none(too_long);

  // A complete instruction followed by anything: only the first one counts.
  std::vector<uint8_t> code = {0x48, 0x8b, 0x03, 0xff, 0xff, 0xff, 0xff, 0xff};
  InsnAccesses a = d.decode(code, r);
  CHECK(a.exact);
  CHECK(a.len == 3);
  REQUIRE(a.accesses.size() == 1);
  CHECK(a.accesses[0].addr == 0x5000);
  // The cached decoding must not be used for bytes that stop short of it.
  none({0x48, 0x8b});
}

TEST_CASE("mem_access: decodings are cached per address and checked against the bytes", "[mem_access]") {
  AccessDecoder d;
  user_regs_struct r{};
  const uint64_t at = 0x401000;
  r.rip = at;
  r.rbx = 0x1000;
  r.rcx = 0x7000;
  const std::vector<uint8_t> load = {0x48, 0x8b, 0x43, 0x08, 0xcc, 0xcc};  // mov rax, [rbx+8]
  const std::vector<uint8_t> other = {0x48, 0x8b, 0x01, 0xcc, 0xcc, 0xcc};  // mov rax, [rcx]

  InsnAccesses a = d.decode(load, r);
  REQUIRE(a.accesses.size() == 1);
  CHECK(a.accesses[0].addr == 0x1008);
  CHECK(d.stats().decodes == 1);
  CHECK(d.stats().cache_hits == 0);
  CHECK(d.stats().cached == 1);

  // Same address, other registers: the recipe is reused and evaluated afresh.
  r.rbx = 0x2000;
  InsnAccesses b;
  b.accesses.reserve(4);
  d.decode(load, r, b);
  REQUIRE(b.accesses.size() == 1);
  CHECK(b.accesses[0].addr == 0x2008);
  CHECK(d.stats().decodes == 1);
  CHECK(d.stats().cache_hits == 1);

  // Same address, new bytes (code was rewritten without an invalidate): decoded again.
  a = d.decode(other, r);
  REQUIRE(a.accesses.size() == 1);
  CHECK(a.accesses[0].addr == 0x7000);
  CHECK(d.stats().decodes == 2);
  CHECK(d.stats().cached == 1);

  // invalidate() drops exactly the decodings whose bytes overlap the range.
  d.decode(load, r);  // back to the 4-byte load at `at`
  r.rip = at + 0x100;
  d.decode(load, r);
  CHECK(d.stats().cached == 2);
  d.invalidate(at + 4, 8);  // just after the first instruction
  d.invalidate(at - 32, 32);  // just before it
  CHECK(d.stats().cached == 2);
  d.invalidate(at + 3, 1);  // its last byte
  CHECK(d.stats().cached == 1);
  uint64_t decodes = d.stats().decodes;
  r.rip = at;
  d.decode(load, r);
  CHECK(d.stats().decodes == decodes + 1);
  d.invalidate(0, ~uint64_t{0});  // a range so large the whole cache is scanned
  CHECK(d.stats().cached == 0);
  d.decode(load, r);
  CHECK(d.stats().cached == 1);
  d.clear();
  CHECK(d.stats().cached == 0);
}

TEST_CASE("mem_access: random bytes never crash and give sane answers", "[mem_access]") {
  AccessDecoder d;
  std::mt19937_64 rng(12345);
  user_regs_struct r{};
  std::vector<uint8_t> code(16);
  for (int i = 0; i < 200000; ++i) {
    for (auto& b : code) b = static_cast<uint8_t>(rng());
    r.rip = rng() & 0xffff;  // few addresses: the cache sees both hits and byte mismatches
    r.rsp = rng();
    r.rbx = rng();
    r.rsi = rng();
    r.rdi = rng();
    r.rcx = rng() & 3;
    size_t n = rng() % 17;
    InsnAccesses a = d.decode(std::span<const uint8_t>(code.data(), n), r);
    REQUIRE(a.len <= n);
    REQUIRE(a.len <= 15);
    if (a.len == 0) REQUIRE_FALSE(a.exact);
    if (!a.exact) REQUIRE(a.accesses.empty());
    for (const MemAccess& m : a.accesses) {
      REQUIRE(m.size > 0);
      REQUIRE(m.size <= 256);  // enter with nesting level 31 is the largest
      REQUIRE((m.read || m.write));
    }
  }
  CHECK(d.stats().cache_hits > 0);
}
