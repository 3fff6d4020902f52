#include <catch2/catch.hpp>

#include "backend/ptrace/registers.h"

using namespace backend;

TEST_CASE("register layout follows GDB's x86-64 tdesc order", "[registers]") {
  auto l = make_register_layout(0x2e7);  // x87 SSE AVX AVX-512 PKRU
  REQUIRE(l.regs.size() == 149);
  CHECK(l.total_bytes == 2420);
  CHECK(l.regs[0].name == "rax");
  CHECK(l.regs[6].type == "data_ptr");
  CHECK(l.regs[16].name == "rip");
  CHECK(l.regs[16].type == "code_ptr");
  CHECK(l.regs[17].bitsize == 32);
  CHECK(l.regs[24].name == "st0");
  CHECK(l.regs[24].bitsize == 80);
  CHECK(l.regs[34].name == "ftag");
  CHECK(l.regs[34].group == "float");
  CHECK(l.regs[40].name == "xmm0");
  CHECK(l.regs[56].name == "mxcsr");
  CHECK(l.regs[56].group == "vector");
  CHECK(l.regs[57].name == "orig_rax");
  CHECK(l.regs[57].feature == "org.gnu.gdb.i386.linux");
  CHECK(l.regs[58].name == "fs_base");
  CHECK(l.regs[60].name == "ymm0h");
  CHECK(l.regs[60].type == "uint128");
  CHECK(l.regs[76].name == "xmm16");
  CHECK(l.regs[92].name == "ymm16h");
  CHECK(l.regs[108].name == "k0");
  CHECK(l.regs[116].name == "zmm0h");
  CHECK(l.regs[116].type == "v2ui128");
  CHECK(l.regs[148].name == "pkru");
  CHECK(l.regs[148].offset == 2416);
  CHECK(l.find("rip") == 16);
  for (size_t i = 1; i < l.regs.size(); ++i) {
    CHECK(l.regs[i].regnum == static_cast<int>(i));
    CHECK(l.regs[i].offset == l.regs[i - 1].offset + static_cast<size_t>(l.regs[i - 1].bitsize / 8));
  }
}

TEST_CASE("register layout without AVX is the classic 560 bytes", "[registers]") {
  auto l = make_register_layout(0x3);
  CHECK(l.regs.size() == 60);
  CHECK(l.total_bytes == 560);
  auto avx = make_register_layout(0x7);
  CHECK(avx.regs.size() == 76);
  CHECK(avx.total_bytes == 816);
}

TEST_CASE("host XCR0 has x87 and SSE", "[registers]") {
  CHECK((host_xcr0() & 0x3) == 0x3);
}

TEST_CASE("register file get/set", "[registers]") {
  auto l = make_register_layout(0x3);
  RegisterFile f;
  f.bytes.assign(l.total_bytes, 0);
  f.valid.assign(l.regs.size(), false);
  f.set_u64(l, RegisterLayout::kRip, 0x401000);
  f.set_u64(l, RegisterLayout::kEflags, 0x246);
  CHECK(f.pc(l) == 0x401000);
  CHECK(f.get_u64(l, RegisterLayout::kEflags) == 0x246);
  CHECK(f.valid[RegisterLayout::kRip]);
}
