// extended_insn_length against objdump (binutils 2.40): the byte sequences are instructions of
// Debian 12's libc.so.6 that capstone 4 cannot decode (glibc's *_evex string functions), and
// VEX/EVEX forms around them; lengths as objdump reports them. common_insn_length against
// capstone itself, on all of libc and libstdc++ and on random bytes.
#include <capstone/capstone.h>
#include <catch2/catch.hpp>
#include <elf.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

#include "backend/x86/block_cache.h"
#include "backend/x86/insn_length.h"

using namespace backend;

namespace {

std::optional<X86Length> len_of(std::vector<uint8_t> bytes, size_t pad = 8) {
  bytes.resize(bytes.size() + pad, 0x90);  // what follows the instruction in memory
  return extended_insn_length(bytes);
}

}  // namespace

TEST_CASE("x86 length: what capstone 4 cannot decode", "[x86len]") {
  struct Case { std::vector<uint8_t> bytes; uint8_t len; const char* what; };
  std::vector<Case> cases = {
      {{0xc5, 0xfb, 0x92, 0xc9}, 4, "kmovd %ecx,%k1"},
      {{0xc5, 0xfb, 0x93, 0xc0}, 4, "kmovd %k0,%eax"},
      {{0xc5, 0x7b, 0x93, 0xc0}, 4, "kmovd %k0,%r8d"},
      {{0xc4, 0xe1, 0xfb, 0x93, 0xc0}, 5, "kmovq %k0,%rax"},
      {{0xc4, 0xe1, 0xf9, 0x98, 0xc8}, 5, "kortestd %k0,%k1"},
      {{0xc4, 0xe1, 0xf8, 0x98, 0xc0}, 5, "kortestq %k0,%k0"},
      {{0xc4, 0xe1, 0xf5, 0x45, 0xc0}, 5, "kord %k0,%k1,%k0"},
      {{0x62, 0xf3, 0x65, 0xa9, 0x25, 0xe2, 0x01}, 7, "vpternlogd $0x1,%ymm2,%ymm3,%ymm4{%k1}{z}"},
      {{0x62, 0xe3, 0x75, 0x20, 0x25, 0x54, 0x17, 0xff, 0xde}, 9, "vpternlogd $0xde,-0x20(%rdi,%rdx,1),%ymm17,%ymm18"},
      {{0x62, 0xe3, 0x75, 0x20, 0x25, 0x57, 0xfd, 0xde}, 8, "vpternlogd $0xde,-0x60(%rdi),%ymm17,%ymm18"},
      {{0x0f, 0x01, 0xee}, 3, "rdpkru"},
      {{0x0f, 0x01, 0xef}, 3, "wrpkru"},
      // decoded by capstone too, same rules
      {{0xc5, 0xf8, 0x77}, 3, "vzeroupper (no ModRM)"},
      {{0x62, 0xf2, 0x7d, 0x48, 0x78, 0x14, 0x0f}, 7, "vpbroadcastb (%rdi,%rcx,1),%zmm2"},
      {{0x62, 0xe1, 0xfe, 0x28, 0x6f, 0x4c, 0x16, 0xfc}, 8, "vmovdqu64 -0x80(%rsi,%rdx,1),%ymm17"},
      {{0xc5, 0xfd, 0x70, 0xc0, 0x1b}, 5, "vpshufd $0x1b,%ymm0,%ymm0 (map 0F imm8)"},
      {{0xc4, 0xe3, 0x7d, 0x38, 0xc1, 0x01}, 6, "vinserti128 (map 0F3A imm8)"},
      {{0x64, 0xc5, 0xfd, 0x6f, 0x04, 0x25, 0x10, 0x00, 0x00, 0x00}, 10, "fs: vmovdqa 0x10,%ymm0 (SIB, no base)"},
      {{0xc5, 0xfd, 0x6f, 0x80, 0x00, 0x01, 0x00, 0x00}, 8, "vmovdqa 0x100(%rax),%ymm0 (disp32)"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    auto l = len_of(c.bytes);
    REQUIRE(l);
    CHECK(l->len == c.len);
    CHECK_FALSE(l->rip_relative);
  }
}

TEST_CASE("x86 length: the hint-NOP space, CET's rdssp among it", "[x86len]") {
  using B = std::vector<uint8_t>;
  CHECK(backend::hint_nop_length(B{0xf3, 0x48, 0x0f, 0x1e, 0xc8}) == 5);  // rdsspq %rax (capstone 4: unknown)
  CHECK(backend::hint_nop_length(B{0xf3, 0x0f, 0x1e, 0xfa}) == 4);        // endbr64
  CHECK(backend::hint_nop_length(B{0x0f, 0x1f, 0x40, 0x00}) == 4);        // nopl 0x0(%rax)
  CHECK(backend::hint_nop_length(B{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}) == 6);  // nopw 0x0(%rax,%rax,1)
  CHECK(backend::hint_nop_length(B{0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00}) == 8);  // nopl 0x0(%rax,%rax,1)
  CHECK(backend::hint_nop_length(B{0x0f, 0x18, 0x0d, 1, 2, 3, 4}) == 7);  // prefetcht0 0x4030201(%rip)
  CHECK(backend::hint_nop_length(B{0x0f, 0x18, 0x0c, 0x25, 1, 2, 3, 4}) == 8);  // prefetcht0 0x4030201 (SIB, no base)
  CHECK_FALSE(backend::hint_nop_length(B{0x0f, 0x0b}));                   // ud2: another opcode
  CHECK_FALSE(backend::hint_nop_length(B{0xf3, 0x0f, 0x1e}));             // cut short before the ModRM
  CHECK_FALSE(backend::hint_nop_length(B{0x0f, 0x1f, 0x80, 0x00}));       // cut short in the disp32
}

TEST_CASE("x86 length: [rip+disp32] operands say where the displacement is", "[x86len]") {
  // vmovdqa 0x4d429(%rip),%ymm10
  auto l = len_of({0xc5, 0x7d, 0x6f, 0x15, 0x29, 0xd4, 0x04, 0x00});
  REQUIRE(l);
  CHECK(l->len == 8);
  CHECK(l->rip_relative);
  CHECK(l->disp_offset == 4);
  // EVEX vpcmpub $0,0x10(%rip),%ymm1,%k1 : disp after the ModRM, imm8 after the disp
  l = len_of({0x62, 0xf3, 0x75, 0x28, 0x3e, 0x0d, 0x10, 0x00, 0x00, 0x00, 0x00});
  REQUIRE(l);
  CHECK(l->len == 11);
  CHECK(l->disp_offset == 6);
  // under an address-size prefix it is [eip+disp32]: not relocatable
  l = len_of({0x67, 0xc5, 0x7d, 0x6f, 0x15, 0x29, 0xd4, 0x04, 0x00});
  REQUIRE(l);
  CHECK(l->len == 9);
  CHECK(l->rip_relative);
  CHECK(l->disp_offset == 0);
}

TEST_CASE("x86 length: anything else, malformed or cut short is refused", "[x86len]") {
  CHECK_FALSE(len_of({0x90}));                    // nop: not ours to decode
  CHECK_FALSE(len_of({0xe8, 0, 0, 0, 0}));        // call
  CHECK_FALSE(len_of({0x0f, 0x01, 0x10}));        // 0F 01 with a memory operand (lgdt)
  CHECK_FALSE(len_of({0x66, 0xc5, 0xf8, 0x77}));  // 66 before VEX: #UD
  CHECK_FALSE(len_of({0x48, 0xc5, 0xf8, 0x77}));  // REX before VEX: #UD
  CHECK_FALSE(len_of({0xc4, 0xe0, 0x7d, 0x6f, 0xc0}));  // VEX map 0
  CHECK_FALSE(len_of({0x62, 0xf1, 0x79, 0x48, 0x6f, 0xc0}));  // EVEX with P1 bit 2 clear
  CHECK_FALSE(len_of({0x62, 0xf4, 0x7d, 0x48, 0x6f, 0xc0}));  // EVEX map 4
  CHECK_FALSE(len_of({0xc5, 0xfd, 0x6f, 0x80, 0x00}, 0));    // disp32 cut short
  CHECK_FALSE(len_of({}, 0));
  CHECK_FALSE(len_of({0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0x65, 0xc5, 0xf8, 0x77}, 0));
}

TEST_CASE("x86: the slot a jmp or call through [rip+disp32] reads its target from", "[x86len]") {
  using V = std::vector<uint8_t>;
  auto slot = [](V b, uint64_t next) { return rip_indirect_slot(b, next); };
  // ls's getenv@plt at 0x555555558040: jmp *0x1ffc2(%rip), its GOT slot 0x555555578008
  CHECK(slot({0xff, 0x25, 0xc2, 0xff, 0x01, 0x00}, 0x555555558046) == 0x555555578008);
  CHECK(slot({0xf2, 0xff, 0x25, 0xc2, 0xff, 0x01, 0x00}, 0x555555558047) == 0x555555578009);  // bnd jmp
  CHECK(slot({0xff, 0x15, 0xf8, 0xff, 0xff, 0xff}, 0x1000) == 0xff8);            // call *-8(%rip)
  CHECK(slot({0x3e, 0xff, 0x25, 0x10, 0, 0, 0}, 0x2000) == 0x2010);              // notrack jmp
  CHECK(slot({0x41, 0xff, 0x25, 0x10, 0, 0, 0}, 0x2000) == 0x2010);              // REX: still rip-relative
  CHECK_FALSE(slot({0xff, 0xe0}, 0x1000));                                       // jmp *%rax
  CHECK_FALSE(slot({0xff, 0x20}, 0x1000));                                       // jmp *(%rax)
  CHECK_FALSE(slot({0xff, 0x24, 0x25, 0x10, 0, 0, 0}, 0x1000));                  // jmp *0x10 (absolute, SIB)
  CHECK_FALSE(slot({0xff, 0x35, 0x10, 0, 0, 0}, 0x1000));                        // push 0x10(%rip): not a branch
  CHECK_FALSE(slot({0x64, 0xff, 0x25, 0x10, 0, 0, 0}, 0x1000));                  // fs: another segment
  CHECK_FALSE(slot({0x66, 0xff, 0x25, 0x10, 0, 0, 0}, 0x1000));                  // 16-bit operand
  CHECK_FALSE(slot({0xff, 0x25, 0x10, 0, 0}, 0x1000));                           // cut short
  CHECK_FALSE(slot({0xff, 0x25, 0x10, 0, 0, 0, 0x90}, 0x1000));                  // longer than the instruction
}

TEST_CASE("BlockCache: a block made of AVX-512 mask instructions ends at its real branch", "[x86len][decoder]") {
  // __strlen_evex's loop tail: kortestd %k0,%k1 ; kmovd %k0,%eax ; je -> block ends at the je
  std::vector<uint8_t> code = {0xc4, 0xe1, 0xf9, 0x98, 0xc8, 0xc5, 0xfb, 0x93, 0xc0, 0x74, 0xf5, 0xc3};
  const uint64_t base = 0x400000;
  BlockCache cache([&](uint64_t addr, std::span<uint8_t> out) -> size_t {
    if (addr < base || addr >= base + code.size()) return 0;
    size_t n = std::min<size_t>(out.size(), base + code.size() - addr);
    std::copy_n(code.begin() + static_cast<long>(addr - base), n, out.begin());
    return n;
  });
  auto b = cache.block_at(base);
  REQUIRE(b);
  CHECK(b->insn_count == 3);
  CHECK(b->end.addr == base + 9);
  CHECK(b->end.kind == FlowKind::CondJump);
  CHECK(b->end.direct_target == base);
  auto one = cache.insn_at(base + 5);
  REQUIRE(one);
  CHECK(one->first == 4);
  CHECK_FALSE(one->second);
}

// ---------------------------------------------------------------- common_insn_length vs capstone

namespace {

struct Capstone {
  csh h = 0;
  cs_insn* insn = nullptr;
  Capstone() {
    REQUIRE(cs_open(CS_ARCH_X86, CS_MODE_64, &h) == CS_ERR_OK);
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    insn = cs_malloc(h);
  }
  ~Capstone() {
    cs_free(insn, 1);
    cs_close(&h);
  }
  bool decode(const uint8_t* p, size_t size, uint64_t addr) {
    return cs_disasm_iter(h, &p, &size, &addr, insn);
  }
  // Anything that transfers control, traps or is a system call.
  bool flow() const {
    for (int g : {CS_GRP_JUMP, CS_GRP_CALL, CS_GRP_RET, CS_GRP_INT, CS_GRP_IRET})
      if (cs_insn_group(h, insn, g)) return true;
    switch (insn->id) {
      case X86_INS_SYSCALL: case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_SYSRET:
      case X86_INS_UD0: case X86_INS_UD2: case X86_INS_UD2B: case X86_INS_HLT: case X86_INS_XBEGIN:
      case X86_INS_XABORT: case X86_INS_LJMP: case X86_INS_LCALL: case X86_INS_INT3:
        return true;
      default:
        return false;
    }
  }
  bool rip_relative() const {
    const cs_x86& x = insn->detail->x86;
    for (uint8_t i = 0; i < x.op_count; ++i)
      if (x.operands[i].type == X86_OP_MEM && x.operands[i].mem.base == X86_REG_RIP) return true;
    return false;
  }
};

// The bytes of an ELF file's .text section (empty when it cannot be read).
std::vector<uint8_t> text_of(const char* path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (file.size() < sizeof(Elf64_Ehdr)) return {};
  Elf64_Ehdr eh;
  std::memcpy(&eh, file.data(), sizeof eh);
  if (eh.e_shoff + uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file.size() || eh.e_shstrndx >= eh.e_shnum) return {};
  auto shdr = [&](size_t i) {
    Elf64_Shdr s;
    std::memcpy(&s, file.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof s);
    return s;
  };
  Elf64_Shdr names = shdr(eh.e_shstrndx);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr s = shdr(i);
    if (names.sh_offset + s.sh_name + 6 > file.size()) continue;
    if (std::strcmp(reinterpret_cast<const char*>(file.data() + names.sh_offset + s.sh_name), ".text") != 0) continue;
    if (s.sh_offset + s.sh_size > file.size()) return {};
    return std::vector<uint8_t>(file.begin() + static_cast<long>(s.sh_offset), file.begin() + static_cast<long>(s.sh_offset + s.sh_size));
  }
  return {};
}

// Where common_insn_length answers for the bytes at p, capstone decodes the same length, no
// control flow, and the same [rip+disp32] (its disp32 at the same offset).
void check_against(Capstone& cs, const uint8_t* p, size_t size, size_t* answered) {
  auto fast = common_insn_length(std::span<const uint8_t>(p, size));
  if (!fast) return;
  ++*answered;
  INFO("bytes " << [&] {
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(size, 15); ++i) s += fmt::format("{:02x} ", p[i]);
    return s;
  }());
  REQUIRE(cs.decode(p, size, 0x1000));
  INFO(cs.insn->mnemonic << " " << cs.insn->op_str);
  REQUIRE(cs.insn->size == fast->len);
  REQUIRE_FALSE(cs.flow());
  REQUIRE(cs.rip_relative() == fast->rip_relative);
  if (fast->rip_relative) REQUIRE(cs.insn->detail->x86.encoding.disp_offset == fast->disp_offset);
}

}  // namespace

TEST_CASE("x86 length: common instructions as capstone decodes them (libc, libstdc++)", "[x86len]") {
  Capstone cs;
  for (const char* lib : {"/lib/x86_64-linux-gnu/libc.so.6", "/lib/x86_64-linux-gnu/libstdc++.so.6"}) {
    auto text = text_of(lib);
    if (text.empty()) continue;  // not on this machine
    size_t total = 0, answered = 0;
    // A linear sweep as capstone decodes it (data between functions is decoded too: what
    // capstone makes of it is checked the same way).
    for (size_t at = 0; at < text.size();) {
      size_t size = text.size() - at;
      check_against(cs, text.data() + at, size, &answered);
      ++total;
      if (cs.decode(text.data() + at, size, 0x1000)) at += cs.insn->size;
      else if (auto ext = extended_insn_length(std::span<const uint8_t>(text.data() + at, size))) at += ext->len;
      else ++at;
    }
    INFO(lib << ": " << answered << " of " << total << " instructions without capstone");
    CHECK(total > 10000);
    CHECK(answered * 2 > total);  // most of them: else the fast path no longer pays
  }
}

TEST_CASE("x86 length: common instructions as capstone decodes them (random bytes)", "[x86len]") {
  Capstone cs;
  std::mt19937_64 rng(20261124);
  // Prefixes, REX and opcodes drawn often enough that every table entry is met with many
  // ModRM/SIB/immediate combinations.
  const uint8_t prefixes[] = {0x66, 0xf2, 0xf3, 0x2e, 0x3e, 0x64, 0x65, 0x67, 0xf0, 0x48, 0x41, 0x4c, 0x40};
  size_t answered = 0;
  for (int round = 0; round < 400000; ++round) {
    uint8_t buf[15];
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    size_t k = 0;
    for (int np = static_cast<int>(rng() % 4); np > 0; --np) buf[k++] = prefixes[rng() % sizeof prefixes];
    if (rng() % 2) buf[k] = 0x0f;  // half of them in the 0F map
    check_against(cs, buf, sizeof buf, &answered);
  }
  CHECK(answered > 100000);
}
