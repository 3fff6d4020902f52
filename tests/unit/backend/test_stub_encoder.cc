// The block-patching source's encoders: relocation, jumps, ModRM operands (checked by decoding
// them back with capstone), the choice of displaced instructions, the stub area's placement,
// and stubs executed for real in this process (a loop and a return patched, the ring read back).
#include <catch2/catch.hpp>

#include <asm/prctl.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/btrace/patch/stub_encoder.h"
#include "backend/ptrace/remote_syscall.h"
#include "backend/btrace/patch/area_writes.h"
#include "backend/ptrace/proc_memory.h"

using namespace backend;
using namespace backend::patch;

namespace {
Insn decode_one(std::vector<uint8_t> bytes, uint64_t addr) {
  auto insns = decode_all(bytes, addr);
  REQUIRE(insns);
  REQUIRE(!insns->empty());
  return insns->front();
}

// Points this thread's gs base at a ring head for the stubs run here (as the server does for
// each thread of the program), and puts the old base back.
class GsBase {
 public:
  explicit GsBase(uint64_t head) {
    ::syscall(SYS_arch_prctl, ARCH_GET_GS, &old_);
    set(head);
  }
  ~GsBase() { set(old_); }
  void set(uint64_t head) { ::syscall(SYS_arch_prctl, ARCH_SET_GS, head); }

 private:
  unsigned long old_ = 0;
};

// Pages this test may write code into and run (nullptr, with a warning, where none can be had).
uint8_t* rwx_pages(size_t bytes) {
  void* mem = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem != MAP_FAILED) return static_cast<uint8_t*>(mem);
  WARN("no RWX mapping here: the execution part is not run");
  return nullptr;
}

bool contains(const std::vector<uint8_t>& code, std::initializer_list<uint8_t> needle) {
  return std::search(code.begin(), code.end(), needle.begin(), needle.end()) != code.end();
}
}  // namespace

TEST_CASE("relocate re-targets rip-relative operands and refuses branches", "[patch]") {
  // mov rax,[rip+0x10] at 0x1000: reads 0x1017
  Insn in = decode_one({0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00}, 0x1000);
  CHECK(in.rip_relative);
  CHECK(in.disp_offset == 3);
  auto moved = relocate(in, 0x2000);
  REQUIRE(moved);
  Insn back = decode_one(*moved, 0x2000);
  int32_t d;
  std::memcpy(&d, moved->data() + 3, 4);
  CHECK(0x2000 + 7 + static_cast<int64_t>(d) == 0x1017);
  CHECK(back.len == 7);
  // cmp dword [rip+8], 5: the displacement sits before the immediate
  Insn cmp = decode_one({0x83, 0x3d, 0x08, 0x00, 0x00, 0x00, 0x05}, 0x5000);
  auto c2 = relocate(cmp, 0x5100);
  REQUIRE(c2);
  std::memcpy(&d, c2->data() + cmp.disp_offset, 4);
  CHECK(0x5100 + 7 + static_cast<int64_t>(d) == 0x5000 + 7 + 8);
  CHECK((*c2)[6] == 0x05);
  // a plain instruction is copied as is; too far is refused; branches never move
  Insn add = decode_one({0x48, 0x83, 0xc0, 0x03}, 0x1000);
  CHECK(relocate(add, 0x9999) == std::vector<uint8_t>{0x48, 0x83, 0xc0, 0x03});
  CHECK(!relocate(in, 0x1000 + (uint64_t{1} << 32)));
  Insn jne = decode_one({0x75, 0x05}, 0x1000);
  CHECK(jne.flow);
  CHECK(!relocate(jne, 0x2000));
}

TEST_CASE("relocate re-targets a 16-bit rip-relative store (66 prefix)", "[patch]") {
  // mov word [rip+0x14fdd], ax at 0x8078 (capstone 4 reports its disp as 2 bytes; it is 4)
  Insn in = decode_one({0x66, 0x89, 0x05, 0xdd, 0x4f, 0x01, 0x00}, 0x8078);
  REQUIRE(in.rip_relative);
  CHECK(in.disp_offset == 3);
  uint64_t target = 0x8078 + 7 + 0x14fdd;
  auto r = relocate(in, 0x40000000);
  REQUIRE(r);
  REQUIRE(r->size() == 7);
  int32_t d;
  std::memcpy(&d, r->data() + 3, 4);
  CHECK(0x40000000 + 7 + static_cast<int64_t>(d) == static_cast<int64_t>(target));
  // with an immediate after the displacement: mov word [rip+d], imm16
  Insn imm = decode_one({0x66, 0xc7, 0x05, 0x10, 0x00, 0x00, 0x00, 0x34, 0x12}, 0x9000);
  REQUIRE(imm.rip_relative);
  auto r2 = relocate(imm, 0x9000 - 0x100);
  REQUIRE(r2);
  std::memcpy(&d, r2->data() + 3, 4);
  CHECK(d == 0x10 + 0x100);
  CHECK((*r2)[7] == 0x34);
}

TEST_CASE("jmp rel32 encodes both directions and refuses what rel32 cannot reach", "[patch]") {
  CHECK(jmp_rel32(0x1000, 0x1005) == std::vector<uint8_t>{0xe9, 0, 0, 0, 0});
  CHECK(jmp_rel32(0x1000, 0x1000) == std::vector<uint8_t>{0xe9, 0xfb, 0xff, 0xff, 0xff});
  CHECK(!jmp_rel32(0x1000, 0x1000 + (uint64_t{1} << 31) + 5));
  CHECK(jmp_rel32(0x1000, 0x1000 + (uint64_t{1} << 31) + 4));
}

TEST_CASE("ModRM operands decode back to what was encoded", "[patch]") {
  std::vector<Operand> ops;
  Operand r11; r11.is_reg = true; r11.reg = 11; ops.push_back(r11);
  Operand sib; sib.base = 0; sib.index = 1; sib.scale = 8; sib.disp = 0x10; ops.push_back(sib);
  Operand r12; r12.base = 12; ops.push_back(r12);
  Operand r13; r13.base = 13; r13.index = 14; r13.scale = 2; r13.disp = -8; ops.push_back(r13);
  Operand abs; abs.disp = 0x601000; ops.push_back(abs);
  Operand idx_only; idx_only.index = 9; idx_only.scale = 4; idx_only.disp = 0x400; ops.push_back(idx_only);
  Operand fs; fs.base = 3; fs.segment = 0x64; ops.push_back(fs);
  Operand rip; rip.rip = true; rip.rip_target = 0x7000; ops.push_back(rip);
  for (const Operand& op : ops) {
    std::vector<uint8_t> code{0x90};  // something before it: `at` is where the jmp itself starts
    REQUIRE(emit_modrm(code, 0x4000 + 1, 0xff, 4, op, false));
    auto insns = decode_all(code, 0x4000);
    REQUIRE(insns);
    REQUIRE(insns->size() == 2);
    const Insn& j = (*insns)[1];
    REQUIRE(j.operand);
    CHECK(j.len == code.size() - 1);
    CHECK(j.operand->is_reg == op.is_reg);
    if (op.is_reg) {
      CHECK(j.operand->reg == op.reg);
      continue;
    }
    CHECK(j.operand->rip == op.rip);
    if (op.rip) {
      CHECK(j.operand->rip_target == op.rip_target);
      continue;
    }
    CHECK(j.operand->base == op.base);
    CHECK(j.operand->index == op.index);
    if (op.index >= 0) CHECK(j.operand->scale == op.scale);
    CHECK(j.operand->disp == op.disp);
    CHECK(j.operand->segment == op.segment);
  }
  Operand far; far.rip = true; far.rip_target = 0x4000 + (uint64_t{1} << 33);
  std::vector<uint8_t> code;
  CHECK(!emit_modrm(code, 0x4000, 0xff, 4, far, false));
  Operand rsp_index; rsp_index.base = 0; rsp_index.index = 4;
  CHECK(!emit_modrm(code, 0x4000, 0xff, 4, rsp_index, false));
}

TEST_CASE("displacement covers five bytes from the end, never before the block start", "[patch]") {
  // add rax,3 (4); dec rdi (3); jnz (2)
  auto insns = decode_all(std::vector<uint8_t>{0x48, 0x83, 0xc0, 0x03, 0x48, 0xff, 0xcf, 0x75, 0xf7}, 0x100);
  REQUIRE(insns);
  REQUIRE(insns->size() == 3);
  CHECK(choose_displacement(*insns, 0x100) == std::optional<size_t>(1));  // dec + jnz
  CHECK(choose_displacement(*insns, 0x105) == std::nullopt);              // a block starts at dec+1: no
  CHECK(choose_displacement(*insns, 0x104) == std::optional<size_t>(1));
  // jmp rel32 alone is enough; ret alone is not
  auto jmp = decode_all(std::vector<uint8_t>{0xe9, 0, 0, 0, 0}, 0x100);
  CHECK(choose_displacement(*jmp, 0x100) == std::optional<size_t>(0));
  auto ret = decode_all(std::vector<uint8_t>{0x5d, 0xc3}, 0x100);
  CHECK(choose_displacement(*ret, 0x100) == std::nullopt);
}

TEST_CASE("syscall numbers set in the block are known, anything else writing rax is not", "[patch]") {
  auto number = [](std::vector<uint8_t> bytes) {
    auto insns = decode_all(bytes, 0x100);
    REQUIRE(insns);
    return syscall_number(*insns);
  };
  // mov $1,%eax; mov %rbx,%rdi; syscall (glibc's write)
  CHECK(number({0xb8, 0x01, 0, 0, 0, 0x48, 0x89, 0xdf, 0x0f, 0x05}) == std::optional<uint64_t>(1));
  // xor %eax,%eax; syscall (read)
  CHECK(number({0x31, 0xc0, 0x0f, 0x05}) == std::optional<uint64_t>(0));
  // mov $0xf,%rax; syscall (__restore_rt: rt_sigreturn)
  CHECK(number({0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05}) == std::optional<uint64_t>(15));
  // mov %rdi,%rax; syscall (the syscall() function): unknown
  CHECK(number({0x48, 0x89, 0xf8, 0x0f, 0x05}) == std::nullopt);
  // mov $1,%eax; cpuid (writes eax implicitly); syscall: unknown
  CHECK(number({0xb8, 0x01, 0, 0, 0, 0x0f, 0xa2, 0x0f, 0x05}) == std::nullopt);
  // mov $1,%eax; mov %dl,%al (a partial write); syscall: unknown
  CHECK(number({0xb8, 0x01, 0, 0, 0, 0x88, 0xd0, 0x0f, 0x05}) == std::nullopt);
  // nothing sets rax in the block; the block does not end in syscall
  CHECK(number({0x48, 0x89, 0xdf, 0x0f, 0x05}) == std::nullopt);
  CHECK(number({0xb8, 0x01, 0, 0, 0, 0xc3}) == std::nullopt);
}

TEST_CASE("dynamic stubs only for operands they can compute", "[patch]") {
  CHECK(dynamic_supported(decode_one({0xc3}, 0x10), FlowKind::Return));
  CHECK(dynamic_supported(decode_one({0xc2, 0x08, 0x00}, 0x10), FlowKind::Return));
  CHECK(dynamic_supported(decode_one({0xff, 0xe0}, 0x10), FlowKind::IndirectJump));                     // jmp rax
  CHECK(dynamic_supported(decode_one({0xf2, 0xff, 0x25, 0, 0, 0, 0}, 0x10), FlowKind::IndirectJump));  // bnd jmp [rip]
  CHECK(dynamic_supported(decode_one({0x41, 0xff, 0xd3}, 0x10), FlowKind::IndirectCall));              // call r11
  CHECK(!dynamic_supported(decode_one({0xff, 0xe4}, 0x10), FlowKind::IndirectJump));                    // jmp rsp
  CHECK(!dynamic_supported(decode_one({0xff, 0x14, 0x24}, 0x10), FlowKind::IndirectCall));              // call [rsp]
  CHECK(!dynamic_supported(decode_one({0x66, 0xff, 0xe0}, 0x10), FlowKind::IndirectJump));              // 16-bit
}

TEST_CASE("stub area: below the code when free, always within rel32 reach", "[patch]") {
  constexpr uint64_t lo = 0x555555554000, hi = 0x555555559000, size = 1 << 20;
  std::vector<std::pair<uint64_t, uint64_t>> used{{lo - 0x1000, hi + 0x3000}, {0x7ffff7dd0000, 0x7ffff7ff0000}};
  auto a = free_range_near(used, lo, hi, size);
  REQUIRE(a);
  CHECK(*a + size <= lo - 0x1000);
  CHECK(*a % 4096 == 0);
  CHECK(hi - *a < (uint64_t{1} << 31));
  // everything below taken within reach: above it then
  std::vector<std::pair<uint64_t, uint64_t>> crowded{{0, hi + 0x3000}};
  auto b = free_range_near(crowded, lo, hi, size);
  REQUIRE(b);
  CHECK(*b >= hi + 0x3000);
  CHECK(*b + size - lo < (uint64_t{1} << 31));
  CHECK(!free_range_near({{0, 0x7ffffffff000}}, lo, hi, size));
}

// Code at P: tramp: call f; ret.   f: xor eax,eax; L: add rax,3; dec rdi; jnz L; add rax,0; ret
// The jnz (with the dec before it) and the ret (with the add before it) are patched with real
// stubs; f(5) must still return 15 and the ring must hold the 4 taken jnz and the return.
TEST_CASE("patched loop and return run natively and fill the ring", "[patch]") {
  auto* p = rwx_pages(0x3000);
  if (!p) return;
  uint64_t P = reinterpret_cast<uint64_t>(p);
  const uint8_t tramp[] = {0xe8, 0x3b, 0x00, 0x00, 0x00, 0xc3};  // call P+0x40; ret
  const uint8_t f[] = {0x31, 0xc0, 0x48, 0x83, 0xc0, 0x03, 0x48, 0xff, 0xcf, 0x75, 0xf7, 0x48, 0x83, 0xc0, 0x00, 0xc3};
  std::memcpy(p, tramp, sizeof tramp);
  std::memcpy(p + 0x40, f, sizeof f);
  uint64_t L = P + 0x42, jnz_block_end = P + 0x4b, ret_block = P + 0x4b;
  // data: head, ring, table (16 slots, then their 16 destinations) holding tramp's return
  // address, which leads to itself
  std::vector<uint64_t> data(1024, 0);
  uint64_t head_addr = reinterpret_cast<uint64_t>(&data[0]);
  uint64_t ring = reinterpret_cast<uint64_t>(&data[8]);
  uint64_t table = reinterpret_cast<uint64_t>(&data[512]);
  data[0] = ring;
  data[511] = 15;  // the mask in use, read by every probe
  const size_t slot = hash_slot(P + 5, 15);
  data[512 + slot] = P + 5;
  data[512 + 16 + slot] = P + 5;

  auto loop_insns = decode_all(std::span<const uint8_t>(p + 0x42, jnz_block_end - L), L);
  REQUIRE(loop_insns);
  auto k = choose_displacement(*loop_insns, L);
  REQUIRE(k == std::optional<size_t>(1));
  StubSpec cond;
  cond.kind = FlowKind::CondJump;
  cond.displaced.assign(loop_insns->begin() + 1, loop_insns->end() - 1);
  cond.flow = loop_insns->back();
  cond.target = L;
  cond.edge_id = 7;
  auto s1 = build_stub(cond, P + 0x1000);
  REQUIRE(s1);
  CHECK(s1->exact.size() == 2);
  CHECK(s1->exact[0].second == P + 0x46);  // the dec
  CHECK(s1->exact[1].second == P + 0x49);  // the jnz
  CHECK(s1->ring_stores.size() == 1);

  auto ret_insns = decode_all(std::span<const uint8_t>(p + 0x4b, 5), ret_block);
  REQUIRE(ret_insns);
  REQUIRE(choose_displacement(*ret_insns, ret_block) == std::optional<size_t>(0));
  StubSpec ret;
  ret.kind = FlowKind::Return;
  ret.displaced.assign(ret_insns->begin(), ret_insns->end() - 1);
  ret.flow = ret_insns->back();
  ret.edge_id = 9;
  ret.table_addr = table;
  ret.table_mask = 15;
  auto s2 = build_stub(ret, P + 0x2000);
  REQUIRE(s2);
  REQUIRE(s2->miss_int3);

  std::memcpy(p + 0x1000, s1->code.data(), s1->code.size());
  std::memcpy(p + 0x2000, s2->code.data(), s2->code.size());
  auto j1 = jmp_rel32(P + 0x46, P + 0x1000);
  auto j2 = jmp_rel32(P + 0x4b, P + 0x2000);
  std::memcpy(p + 0x46, j1->data(), 5);
  std::memcpy(p + 0x4b, j2->data(), 5);

  GsBase gs(head_addr);
  auto fn = reinterpret_cast<long (*)(long)>(P);
  CHECK(fn(5) == 15);
  REQUIRE(data[0] == ring + 4 * 4 + 12);
  auto* words = reinterpret_cast<const uint8_t*>(&data[8]);
  for (int i = 0; i < 4; ++i) {
    uint32_t w;
    std::memcpy(&w, words + 4 * i, 4);
    CHECK(w == 7);
  }
  uint32_t w;
  uint64_t target;
  std::memcpy(&w, words + 16, 4);
  std::memcpy(&target, words + 20, 8);
  CHECK(w == (9 | kDynamicEntry));
  CHECK(target == P + 5);
  // once more from an empty ring: the same again (nothing kept between calls)
  data[0] = ring;
  CHECK(fn(1) == 3);
  CHECK(data[0] == ring + 12);  // jnz never taken; the return recorded
  // a table hit goes to the target's destination (a translation: here `add rax,100; ret`)
  const uint8_t translation[] = {0x48, 0x83, 0xc0, 0x64, 0xc3};
  std::memcpy(p + 0x60, translation, sizeof translation);
  data[512 + 16 + slot] = P + 0x60;
  data[0] = ring;
  CHECK(fn(1) == 103);
  CHECK(data[0] == ring + 12);  // recorded as the return to tramp all the same
  std::memcpy(&target, words + 4, 8);
  CHECK(target == P + 5);
  data[512 + 16 + slot] = P + 5;
  // The mask in use is read from the table's header at each probe (the table grows in place):
  // under a smaller one the target is found at its slot for that mask.
  const size_t small = hash_slot(P + 5, 7);
  data[512 + slot] = data[512 + 16 + slot] = 0;
  data[511] = 7;
  data[512 + small] = P + 5;
  data[512 + 16 + small] = P + 0x60;
  data[0] = ring;
  CHECK(fn(1) == 103);
  CHECK(data[0] == ring + 12);
  data[512 + small] = data[512 + 16 + small] = 0;
  data[511] = 15;
  data[512 + slot] = data[512 + 16 + slot] = P + 5;
  // the inline cache filled with the return address: a 4-byte entry, the cached edge's id
  REQUIRE(s2->cache);
  uint64_t cache_at = P + 0x2000 + *s2->cache;
  CHECK(cache_at % 8 == 0);
  uint32_t cached_id = 21;
  std::memcpy(p + 0x2000 + *s2->cache, &P, 8);  // another target first: a miss, as before
  std::memcpy(p + 0x2000 + *s2->cache + 8, &cached_id, 4);
  data[0] = ring;
  CHECK(fn(2) == 6);
  CHECK(data[0] == ring + 4 + 12);  // one taken jnz, the return through the table
  uint64_t ret_to = P + 5;
  std::memcpy(p + 0x2000 + *s2->cache, &ret_to, 8);
  std::memcpy(p + 0x2000 + *s2->cache + 16, &ret_to, 8);  // where a hit goes: the target itself
  data[0] = ring;
  CHECK(fn(3) == 9);
  REQUIRE(data[0] == ring + 2 * 4 + 4);
  std::memcpy(&w, words + 8, 4);
  CHECK(w == 21);
  CHECK(fn(4) == 12);  // a hit again
  CHECK(data[0] == ring + 2 * 4 + 4 + 3 * 4 + 4);
  // Another thread's ring: a second head named by the gs base; the first ring is untouched.
  std::vector<uint64_t> other(64, 0);
  uint64_t other_ring = reinterpret_cast<uint64_t>(&other[8]);
  other[0] = other_ring;
  uint64_t first_head = data[0];
  gs.set(reinterpret_cast<uint64_t>(&other[0]));
  CHECK(fn(2) == 6);
  CHECK(other[0] == other_ring + 4 + 4);  // one taken jnz, the return through the cache
  CHECK(data[0] == first_head);
  uint32_t o;
  std::memcpy(&o, &other[8], 4);
  CHECK(o == 7);
  ::munmap(p, 0x3000);
}

TEST_CASE("stubs find the ring head through gs, never at a fixed address", "[patch]") {
  const uint8_t load[] = {0x65, 0x48, 0x8b, 0x04, 0x25, 0, 0, 0, 0};   // mov rax,gs:[0]
  const uint8_t store[] = {0x65, 0x48, 0x89, 0x04, 0x25, 0, 0, 0, 0};  // mov gs:[0],rax
  auto check = [&](const StubSpec& spec, size_t pairs) {
    auto s = build_stub(spec, 0x500000);
    REQUIRE(s);
    size_t loads = 0, stores = 0;
    for (size_t i = 0; i + sizeof load <= s->code.size(); ++i) {
      loads += std::memcmp(s->code.data() + i, load, sizeof load) == 0;
      stores += std::memcmp(s->code.data() + i, store, sizeof store) == 0;
    }
    CHECK(loads == pairs);
    CHECK(stores == pairs);
    CHECK(s->ring_stores.size() == pairs);
    CHECK_FALSE(contains(s->code, {0x48, 0xa1}));  // no movabs rax,[moffs64] left
    // each ring store follows a head load (the guard-page restart sets rax to the ring start)
    for (uint32_t off : s->ring_stores) CHECK(off < s->code.size());
  };
  StubSpec jmp;
  jmp.kind = FlowKind::Jump;
  jmp.flow = decode_one({0xe9, 0x00, 0x01, 0x00, 0x00}, 0x400000);
  jmp.target = 0x400105;
  jmp.edge_id = 3;
  check(jmp, 1);
  StubSpec call = jmp;
  call.kind = FlowKind::Call;
  call.flow = decode_one({0xe8, 0x00, 0x01, 0x00, 0x00}, 0x400000);
  check(call, 1);
  StubSpec ret;
  ret.kind = FlowKind::Return;
  ret.flow = decode_one({0xc3}, 0x400000);
  ret.edge_id = 4;
  ret.table_addr = 0x700000;
  ret.table_mask = 15;
  check(ret, 2);  // the inline-cache hit and the table hit
}

TEST_CASE("area writes: kept in a copy, sent at flush in merged ranges, dropped with their area", "[patch]") {
  // this process's own memory stands for the program's (written through /proc/self/mem)
  std::vector<uint8_t> area(8192, 0);
  ProcMemory mem(::getpid());
  const uint64_t A = reinterpret_cast<uint64_t>(area.data());
  AreaWrites w;
  w.add_area(A, A + area.size());
  const uint8_t stub[] = {1, 2, 3, 4};
  const uint8_t far[] = {9};
  CHECK(w.write(mem, A + 16, stub, false));
  CHECK(w.write(mem, A + 100, stub, false));  // close to the first: one range
  CHECK(w.write(mem, A + 6000, far, false));
  CHECK(!w.write(mem, A + 8190, stub, false));  // crosses the area's end: the caller's
  CHECK(!w.write(mem, A - 4, stub, false));
  CHECK(w.pending());
  CHECK(area[16] == 0);  // nothing in memory yet
  REQUIRE(w.flush(mem));
  CHECK(!w.pending());
  CHECK(area[16] == 1);
  CHECK(area[19] == 4);
  CHECK(area[100] == 1);
  CHECK(area[6000] == 9);
  CHECK(area[50] == 0);  // the gap came from the copy: still zero
  // direct: in memory at once, nothing pending; the copy stays exact for later merges
  CHECK(w.write(mem, A + 40, far, true));
  CHECK(area[40] == 9);
  CHECK(!w.pending());
  CHECK(w.write(mem, A + 30, stub, false));
  CHECK(w.write(mem, A + 50, stub, false));  // one range [30, 54): byte 40 comes from the copy
  area[40] = 7;  // (the program never writes there; if it did, a merged flush would undo it)
  REQUIRE(w.flush(mem));
  CHECK(area[40] == 9);
  // an unmapped area: its pending writes go with it
  CHECK(w.write(mem, A + 200, stub, false));
  w.remove_area(A);
  CHECK(!w.pending());
  CHECK(!w.write(mem, A + 200, stub, false));
}

TEST_CASE("area writes: a writable area's scattered ranges go in gathered writes", "[patch]") {
  // more ranges than one process_vm_writev takes (1024), far enough apart not to merge
  std::vector<uint8_t> area(3000 * 512, 0);
  ProcMemory mem(::getpid());
  const uint64_t A = reinterpret_cast<uint64_t>(area.data());
  AreaWrites w;
  w.add_area(A, A + area.size(), true);
  for (uint64_t i = 0; i < 3000; ++i) {
    const uint8_t v[] = {static_cast<uint8_t>(i), static_cast<uint8_t>(i >> 8)};
    CHECK(w.write(mem, A + i * 512 + 7, v, false));
  }
  CHECK(area[7] == 0);
  REQUIRE(w.flush(mem));
  CHECK(!w.pending());
  bool all = true;
  for (uint64_t i = 0; i < 3000; ++i)
    all = all && area[i * 512 + 7] == static_cast<uint8_t>(i) && area[i * 512 + 8] == static_cast<uint8_t>(i >> 8) &&
          area[i * 512 + 6] == 0 && area[i * 512 + 9] == 0;
  CHECK(all);
}

TEST_CASE("code writes: gathered per page, overlaid on reads, dropped, flushed around what is there", "[patch]") {
  // three pages of this process's memory stand for code; the middle one is read-only to the
  // process itself (as code is: /proc/pid/mem writes it all the same)
  const size_t P = 4096;
  auto* raw = static_cast<uint8_t*>(::mmap(nullptr, 4 * P, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(raw != MAP_FAILED);
  const uint64_t A = reinterpret_cast<uint64_t>(raw);
  std::memset(raw, 0x90, 3 * P);
  REQUIRE(::munmap(raw + 3 * P, P) == 0);  // the page after: unmapped
  ProcMemory mem(::getpid());
  CodeWrites w;
  CHECK(!w.pending());
  const uint8_t jmp[] = {0xe9, 1, 2, 3, 4};
  w.write(A + P - 2, jmp);  // across the first page boundary
  w.write(A + 2 * P + 100, jmp);
  CHECK(w.pending());
  CHECK(w.overlaps(A + P - 2, 1));
  CHECK(w.overlaps(A + P + 2, 1));
  CHECK(!w.overlaps(A + P + 3, 10));
  CHECK(w.overlaps(A + P - 10, 9));
  CHECK(!w.overlaps(A + P - 10, 8));
  CHECK(raw[P - 2] == 0x90);  // nothing in memory yet
  // a read sees memory as it will be
  uint8_t buf[8];
  std::memset(buf, 0x90, sizeof buf);
  w.overlay(A + P - 4, buf);
  const uint8_t seen[] = {0x90, 0x90, 0xe9, 1, 2, 3, 4, 0x90};
  CHECK(std::memcmp(buf, seen, sizeof buf) == 0);
  // the program (here: this test) changed a byte between two writes of the run: kept
  raw[P + 50] = 0xcc;
  REQUIRE(::mprotect(raw + P, P, PROT_READ) == 0);
  REQUIRE(w.flush(mem));
  CHECK(!w.pending());
  CHECK(std::memcmp(raw + P - 2, jmp, 5) == 0);
  CHECK(std::memcmp(raw + 2 * P + 100, jmp, 5) == 0);
  CHECK(raw[P + 50] == 0xcc);
  CHECK(raw[P - 3] == 0x90);
  CHECK(raw[P + 3] == 0x90);
  // dropped (its memory unmapped): not written
  const uint8_t orig[] = {0x90, 0x90, 0x90, 0x90, 0x90};
  w.write(A + 2 * P + 100, orig);
  w.write(A + P - 2, orig);
  w.drop(A + 2 * P, A + 3 * P);
  CHECK(!w.overlaps(A + 2 * P + 100, 5));
  CHECK(w.overlaps(A + P - 2, 5));
  REQUIRE(w.flush(mem));
  CHECK(raw[P - 2] == 0x90);
  CHECK(raw[P + 2] == 0x90);
  CHECK(raw[2 * P + 100] == 0xe9);  // the dropped write never went in
  // a run reaching unmapped memory: the read fails, each written stretch goes on its own
  w.write(A + 3 * P - 1, jmp);  // its last 4 bytes would land in the unmapped page
  w.write(A + 2 * P + 10, jmp);
  CHECK(!w.flush(mem));
  CHECK(std::memcmp(raw + 2 * P + 10, jmp, 5) == 0);
  CHECK(!w.pending());
  ::munmap(raw, 3 * P);
}

// The system-call buffer's stub, run for real here: `mov $N,%eax; syscall; ret` with the mov
// patched; the call's record lands in the buffer. Without room (or with a size argument too
// large) the stub restores everything and stops at its int3: a SIGTRAP handler here does what
// the server does there (the thread goes to the original `syscall`), and nothing is recorded.
namespace {
uint64_t g_slow_to = 0;  // the original syscall of the stub whose int3 was hit
int g_slow_hits = 0;
void on_stub_int3(int, siginfo_t*, void* ctx) {
  auto* uc = static_cast<ucontext_t*>(ctx);
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(g_slow_to);
  ++g_slow_hits;
}
}  // namespace

TEST_CASE("a buffered system call leaves its record, without room it takes the original syscall", "[patch][syscall_buffer]") {
  auto* p = rwx_pages(0x3000);
  if (!p) return;
  uint64_t P = reinterpret_cast<uint64_t>(p);
  std::vector<uint64_t> gs_block(16, 0), buffer(4096, 0);
  uint64_t buf = reinterpret_cast<uint64_t>(buffer.data());
  auto reset = [&](uint64_t room) {
    gs_block[0] = 0x1234000;  // a ring head: the record takes it down as it is
    gs_block[kGsSyscallBufNext / 8] = buf;
    gs_block[kGsSyscallBufEnd / 8] = room ? buf + room : 0;
  };
  // f at P: stat(rdi, rsi); g at P+0x40: readlink(rdi, rsi, rdx)
  auto make = [&](uint64_t at, uint64_t nr) {
    const uint8_t code[] = {0xb8, static_cast<uint8_t>(nr), 0, 0, 0, 0x0f, 0x05, 0xc3};
    std::memcpy(reinterpret_cast<uint8_t*>(at), code, sizeof code);
    auto insns = decode_all(std::span<const uint8_t>(reinterpret_cast<uint8_t*>(at), 7), at);
    REQUIRE(insns);
    REQUIRE(insns->size() == 2);
    SyscallStubSpec spec;
    spec.displaced = {insns->front()};
    spec.syscall_addr = at + 5;
    spec.nr = nr;
    spec.out = *buffered_syscall_output(nr);
    uint64_t stub_at = P + 0x1000 + (at - P) * 16;
    auto stub = build_syscall_stub(spec, stub_at);
    REQUIRE(stub);
    REQUIRE(stub->exits.size() == 1);
    CHECK(stub->exits[0].second == at + 7);
    REQUIRE(stub->exact.size() == 2);
    CHECK(stub->exact[1].second == at + 5);
    REQUIRE(stub->miss_int3);
    CHECK(stub->code[*stub->miss_int3] == 0xcc);
    std::memcpy(reinterpret_cast<uint8_t*>(stub_at), stub->code.data(), stub->code.size());
    auto j = jmp_rel32(at, stub_at);
    std::memcpy(reinterpret_cast<uint8_t*>(at), j->data(), 5);
  };
  make(P, SYS_stat);
  make(P + 0x40, SYS_readlink);
  auto f = reinterpret_cast<long (*)(const char*, struct stat*)>(P);
  auto g = reinterpret_cast<long (*)(const char*, char*, size_t)>(P + 0x40);
  struct sigaction sa {}, old {};
  sa.sa_sigaction = on_stub_int3;
  sa.sa_flags = SA_SIGINFO;
  REQUIRE(::sigaction(SIGTRAP, &sa, &old) == 0);
  GsBase gs(reinterpret_cast<uint64_t>(gs_block.data()));

  reset(8 * 4096);
  struct stat st {};
  const char* path = "/";
  CHECK(f(path, &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(gs_block[kGsSyscallBufNext / 8] == buf + kSyscallRecordHeader + 144);
  CHECK(buffer[0] == SYS_stat);
  CHECK(buffer[1] == reinterpret_cast<uint64_t>(path));
  CHECK(buffer[2] == reinterpret_cast<uint64_t>(&st));
  CHECK(buffer[7] == 0);           // the result
  CHECK(buffer[8] == 0x1234000);   // the ring head
  CHECK(buffer[9] == 144);         // bytes written
  CHECK(buffer[10] == P + 7);      // after the original syscall
  CHECK(std::memcmp(&buffer[12], &st, 144) == 0);
  // a failing stat writes nothing
  CHECK(f("/no/such/file", &st) == -ENOENT);
  uint64_t* second = &buffer[(kSyscallRecordHeader + 144) / 8];
  CHECK(second[7] == static_cast<uint64_t>(-ENOENT));
  CHECK(second[9] == 0);
  CHECK(gs_block[kGsSyscallBufNext / 8] == buf + 2 * kSyscallRecordHeader + 144);

  reset(8 * 4096);
  char link[64] = {};
  long n = g("/proc/self/exe", link, sizeof link);
  REQUIRE(n > 0);
  CHECK(buffer[0] == SYS_readlink);
  CHECK(buffer[9] == static_cast<uint64_t>(n));
  CHECK(std::memcmp(&buffer[12], link, static_cast<size_t>(n)) == 0);
  CHECK(gs_block[kGsSyscallBufNext / 8] == buf + kSyscallRecordHeader + ((static_cast<uint64_t>(n) + 7) & ~7ull));

  // no buffer, then no room for the largest record: the int3, then the original syscall
  g_slow_to = P + 5;
  reset(0);
  CHECK(f(path, &st) == 0);
  reset(kSyscallRecordHeader + 100);
  CHECK(f(path, &st) == 0);
  CHECK(g_slow_hits == 2);
  CHECK(gs_block[kGsSyscallBufNext / 8] == buf);
  // a size argument above the buffer's limit: the same
  g_slow_to = P + 0x45;
  reset(8 * 4096);
  std::vector<char> big(2 * kSyscallRecordMaxData);
  CHECK(g("/proc/self/exe", big.data(), big.size()) == n);
  CHECK(g_slow_hits == 3);
  CHECK(gs_block[kGsSyscallBufNext / 8] == buf);
  ::sigaction(SIGTRAP, &old, nullptr);
  ::munmap(p, 0x3000);
}
