// AccessDecoder against the real CPU, entry by entry: a table of instructions, each with a
// register setup and the access list it must produce, run by the harness in
// access_decoder_cpu.h (one single step in a child, checked against the bytes written, the
// page faults and the debug-register watchpoints).
#include <catch2/catch.hpp>

#include <sys/user.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "access_decoder_cpu.h"

using namespace access_cpu;

namespace {

// The low `size` bytes of a GPR after the step equal memory at the (single) computed read.
Post loads_into(unsigned long long user_regs_struct::*reg, uint32_t size) {
  return [reg, size](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses& a) {
    const MemAccess* read = nullptr;
    for (const MemAccess& m : a.accesses)
      if (m.read) read = &m;
    REQUIRE(read != nullptr);
    uint64_t got = r.after.*reg;
    for (uint32_t i = 0; i < size; ++i)
      CHECK(static_cast<uint8_t>(got >> (8 * i)) == s.mem(read->addr + i));
  };
}

// xmm1 after the step equals the 16 bytes at the computed read.
Post loads_xmm1() {
  return [](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses& a) {
    REQUIRE(a.accesses.size() == 1);
    uint8_t x[16];
    std::memcpy(x, reinterpret_cast<const uint8_t*>(r.fp_after.xmm_space) + 16, 16);
    for (int i = 0; i < 16; ++i) CHECK(x[i] == s.mem(a.accesses[0].addr + i));
  };
}

Post rip_is(uint64_t target) {
  return [target](const Entry&, const Setup&, const StepResult& r, const InsnAccesses&) {
    CHECK(r.after.rip == target);
  };
}

int32_t rel32(uint64_t from_next, uint64_t to) { return static_cast<int32_t>(to - from_next); }

std::vector<uint8_t> with_disp32(std::vector<uint8_t> b, size_t at, int32_t d) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(static_cast<uint32_t>(d) >> (8 * i));
  return b;
}

// Bytes verified with `as` + `objdump -d -M intel`.
std::vector<Entry> table() {
  using R = user_regs_struct;
  std::vector<Entry> t;
  auto rbx_at = [](uint64_t a) { return [a](Setup& s) { s.regs.rbx = a; }; };
  auto E = [&t](const char* n, std::vector<uint8_t> b, const char* sh,
                std::function<void(Setup&)> st = {}) -> Entry& {
    return t.emplace_back(n, std::move(b), sh, std::move(st));
  };

  // --- mov of every size, loads and stores; operands across page boundaries pin the sizes.
  E("mov al, [rbx]", {0x8a, 0x03}, "R1", rbx_at(kP1 + 0x10)).then(loads_into(&R::rax, 1));
  E("mov ax, [rbx] (across pages)", {0x66, 0x8b, 0x03}, "R2", rbx_at(kP1 - 1)).then(loads_into(&R::rax, 2));
  E("mov eax, [rbx] (ends at a page end)", {0x8b, 0x03}, "R4", rbx_at(kP1 - 4)).then(loads_into(&R::rax, 4));
  E("mov rax, [rbx] (across pages)", {0x48, 0x8b, 0x03}, "R8", rbx_at(kP2 - 5)).then(loads_into(&R::rax, 8));
  E("mov [rbx], cl", {0x88, 0x0b}, "W1", [](Setup& s) { s.regs.rbx = kP1 + 0x21; s.regs.rcx = 0x99; });
  E("mov [rbx], cx (across pages)", {0x66, 0x89, 0x0b}, "W2", rbx_at(kP1 - 1));
  E("mov [rbx], ecx", {0x89, 0x0b}, "W4", rbx_at(kP1 + 0x33));
  E("mov [rbx], rcx (across pages)", {0x48, 0x89, 0x0b}, "W8",
    [](Setup& s) { s.regs.rbx = kP1 - 3; s.regs.rcx = 0x1122334455667788; });
  E("mov dword [rbx], imm32", {0xc7, 0x03, 0x5a, 0x5a, 0x5a, 0x5a}, "W4", rbx_at(kP2 - 2));
  E("movabs al, [moffs64]", {0xa0, 0x10, 0x10, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00}, "R1")
      .then(loads_into(&R::rax, 1));
  E("mov [rbx], ds", {0x8c, 0x1b}, "W2", rbx_at(kP1 - 1));
  E("mov ds, [rbx] (null selector)", {0x8e, 0x1b}, "R2", [](Setup& s) {
    s.regs.rbx = kP1 - 1;
    s.poke16(kP1 - 1, 0);
  });
  E("movzx eax, word [rbx]", {0x0f, 0xb7, 0x03}, "R2", rbx_at(kP1 - 1)).then(loads_into(&R::rax, 2));
  E("movsxd rax, dword [rbx]", {0x48, 0x63, 0x03}, "R4", rbx_at(kP1 - 2)).then(loads_into(&R::rax, 4));

  // --- addressing forms
  E("mov rax, [rip+disp32]", with_disp32({0x48, 0x8b, 0x05, 0, 0, 0, 0}, 3, rel32(kCode + 7, kP1 + 0x40)), "R8")
      .then(loads_into(&R::rax, 8));
  E("mov [rip+disp32], rcx", with_disp32({0x48, 0x89, 0x0d, 0, 0, 0, 0}, 3, rel32(kCode + 7, kP2 - 4)), "W8",
    [](Setup& s) { s.regs.rcx = 0x0123456789abcdef; });
  E("mov rax, [rbx+rcx*8-0x18]", {0x48, 0x8b, 0x44, 0xcb, 0xe8}, "R8",
    [](Setup& s) { s.regs.rbx = kP0 + 0x100; s.regs.rcx = 0x200; })
      .then(loads_into(&R::rax, 8));
  E("mov [rbx+rsi*8-0x100], rdx", {0x48, 0x89, 0x94, 0xf3, 0x00, 0xff, 0xff, 0xff}, "W8",
    [](Setup& s) { s.regs.rbx = kP2 + 0x40; s.regs.rsi = 0x10; s.regs.rdx = 0x5555aaaa5555aaaa; });
  E("mov rax, fs:[rbx]", {0x64, 0x48, 0x8b, 0x03}, "R8", [](Setup& s) { s.fs(kP1); s.regs.rbx = 0x28; })
      .then(loads_into(&R::rax, 8));
  E("mov gs:[rbx+rcx*8], rax", {0x65, 0x48, 0x89, 0x04, 0xcb}, "W8",
    [](Setup& s) { s.gs(kP0 + 0x10); s.regs.rbx = 0x100; s.regs.rcx = 0x3; });
  E("mov al, fs:[disp32]", {0x64, 0x8a, 0x04, 0x25, 0x10, 0x00, 0x00, 0x00}, "R1", [](Setup& s) { s.fs(kP2); })
      .then(loads_into(&R::rax, 1));
  E("mov eax, [ebx] (0x67 drops the high half)", {0x67, 0x8b, 0x03}, "R4",
    [](Setup& s) { s.regs.rbx = 0xdead000000000000 | (kP1 + 0x30); })
      .then(loads_into(&R::rax, 4));
  E("mov eax, [eax+ecx*2] (0x67 wraps)", {0x67, 0x8b, 0x04, 0x48}, "R4",
    [](Setup& s) { s.regs.rax = 0xfffffff0; s.regs.rcx = (kP1 + 0x110) / 2; })
      .then(loads_into(&R::rax, 4));

  // --- stack
  E("push rax", {0x50}, "W8", [](Setup& s) { s.regs.rsp = kP2 + 4; s.regs.rax = 0x1111; });
  E("push qword [rbx]", {0xff, 0x33}, "R8 W8", [](Setup& s) { s.regs.rbx = kP0 + 0x80; s.regs.rsp = kP2 + 0x100; });
  E("push qword [rsp+8] (source with the old rsp)", {0xff, 0x74, 0x24, 0x08}, "R8 W8",
    [](Setup& s) { s.regs.rsp = kP2 - 8; });
  E("pushw imm16", {0x66, 0x68, 0x34, 0x12}, "W2", [](Setup& s) { s.regs.rsp = kP1 + 1; });
  E("push rax with 0x66 and REX.W (64 bits win)", {0x66, 0x48, 0x50}, "W8",
    [](Setup& s) { s.regs.rsp = kP1 + 4; s.regs.rax = 0x1234567890; });
  E("pop rax", {0x58}, "R8", [](Setup& s) { s.regs.rsp = kP1 - 4; }).then(loads_into(&R::rax, 8));
  E("pop qword [rbx]", {0x8f, 0x03}, "R8 W8", [](Setup& s) { s.regs.rsp = kP2 + 0x20; s.regs.rbx = kP0 + 0x40; });
  E("pop qword [rsp+8] (destination with the new rsp)", {0x8f, 0x44, 0x24, 0x08}, "R8 W8",
    [](Setup& s) { s.regs.rsp = kP1 - 16; });
  E("pushfq", {0x9c}, "W8", [](Setup& s) { s.regs.rsp = kP1 + 4; });
  E("popfq", {0x9d}, "R8", [](Setup& s) { s.regs.rsp = kP1 - 4; s.poke64(kP1 - 4, 0x246); });
  E("push fs (writes the whole slot)", {0x0f, 0xa0}, "W8", [](Setup& s) { s.regs.rsp = kP1 + 6; });
  // Intel reads the 2-byte selector, AMD the whole slot.
  E("pop gs (null selector; reads 2 or 8 bytes by vendor)", {0x0f, 0xa9}, host_quirks().segment_pop_reads_slot ? "R8" : "R2",
    [](Setup& s) {
    s.regs.rsp = kP1 - 2;
    s.poke64(kP1 - 2, 0);
  });
  E("call rel32", with_disp32({0xe8, 0, 0, 0, 0}, 1, rel32(kCode + 5, kFar)), "W8",
    [](Setup& s) { s.regs.rsp = kP1 + 4; })
      .stays().then(rip_is(kFar));
  E("call [rbx]", {0xff, 0x13}, "R8 W8",
    [](Setup& s) { s.regs.rbx = kP0 + 0x200; s.poke64(kP0 + 0x200, kFar); s.regs.rsp = kP2 + 0x10; })
      .stays().then(rip_is(kFar));
  E("call [rsp+8] (pointer with the old rsp)", {0xff, 0x54, 0x24, 0x08}, "R8 W8",
    [](Setup& s) { s.regs.rsp = kP1; s.poke64(kP1 + 8, kFar); })
      .stays().then(rip_is(kFar));
  E("ret", {0xc3}, "R8", [](Setup& s) { s.regs.rsp = kP1 - 4; s.poke64(kP1 - 4, kFar); }).stays().then(rip_is(kFar));
  E("ret imm16", {0xc2, 0x10, 0x00}, "R8", [](Setup& s) { s.regs.rsp = kP2 + 0x30; s.poke64(kP2 + 0x30, kFar); })
      .stays()
      .then([](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses&) {
        CHECK(r.after.rip == kFar);
        CHECK(r.after.rsp == s.regs.rsp + 8 + 0x10);
      });
  E("jmp [rbx]", {0xff, 0x23}, "R8", [](Setup& s) { s.regs.rbx = kP1 - 4; s.poke64(kP1 - 4, kFar); })
      .stays().then(rip_is(kFar));
  E("enter 0x20, 0", {0xc8, 0x20, 0x00, 0x00}, "W8", [](Setup& s) { s.regs.rsp = kP1 + 4; s.regs.rbp = 0x1234; })
      .write_probe([](const user_regs_struct& r) { return r.rsp - 8 - 0x20; });
  E("enter 0x1000, 0 (the allocation is only probed)", {0xc8, 0x00, 0x10, 0x00}, "W8",
    [](Setup& s) { s.regs.rsp = kP2 + 0x10; s.regs.rbp = 0x1234; })
      .write_probe([](const user_regs_struct& r) { return r.rsp - 8 - 0x1000; });
  E("enter 0x10, 3 (frame-pointer display)", {0xc8, 0x10, 0x00, 0x03}, "W32 R16",
    [](Setup& s) { s.regs.rsp = kP2 + 0x10; s.regs.rbp = kP1 + 8; })
      .write_probe([](const user_regs_struct& r) { return r.rsp - 32 - 0x10; });
  E("leave", {0xc9}, "R8", [](Setup& s) { s.regs.rbp = kP1 - 4; s.regs.rsp = kP0 + 0x10; })
      .then(loads_into(&R::rbp, 8));

  // --- string instructions: one element per single step
  auto si_di = [](uint64_t si, uint64_t di, uint64_t cx = 0, uint64_t flags = 0x202) {
    return [=](Setup& s) {
      s.regs.rsi = si;
      s.regs.rdi = di;
      s.regs.rcx = cx;
      s.regs.eflags = flags;
      s.regs.rax = 0x0102030405060708;
    };
  };
  constexpr uint64_t kDF = 0x602;  // IF | DF
  E("movsb", {0xa4}, "R1 W1", si_di(kP0 + 0x10, kP2 + 0x20));
  E("movsq (both across pages)", {0x48, 0xa5}, "R8 W8", si_di(kP1 - 4, kP2 - 2));
  E("rep movsb, rcx=5: first iteration only", {0xf3, 0xa4}, "R1 W1", si_di(kP0 + 0x10, kP2 + 0x20, 5))
      .stays()
      .then([](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses&) {
        CHECK(r.after.rip == kCode);  // the CPU traps after each iteration
        CHECK(r.after.rcx == 4);
        CHECK(r.after.rsi == s.regs.rsi + 1);
      });
  E("rep movsq, rcx=0: nothing", {0xf3, 0x48, 0xa5}, "", si_di(kP0 + 0x10, kP2 + 0x20, 0));
  E("rep movsq, rcx=3, DF=1", {0xf3, 0x48, 0xa5}, "R8 W8", si_di(kP0 + 0x10, kP2 + 0x20, 3, kDF))
      .stays()
      .then([](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses&) {
        CHECK(r.after.rip == kCode);
        CHECK(r.after.rdi == s.regs.rdi - 8);
      });
  E("stosd, DF=1", {0xab}, "W4", si_di(0, kP1 - 2, 0, kDF))
      .then([](const Entry&, const Setup& s, const StepResult& r, const InsnAccesses&) {
        CHECK(r.after.rdi == s.regs.rdi - 4);
      });
  E("rep stosq [edi] (0x67), ecx=3", {0x67, 0xf3, 0x48, 0xab}, "W8", [](Setup& s) {
    s.regs.rdi = 0x7777000000000000 | (kP1 + 0x40);
    s.regs.rcx = 0x5555000000000003;  // ecx counts under 0x67
    s.regs.rax = 0x1122334455667788;
  }).stays();
  E("rep stosq [edi] (0x67), ecx=0: nothing", {0x67, 0xf3, 0x48, 0xab}, "", [](Setup& s) {
    s.regs.rdi = kP1 + 0x40;
    s.regs.rcx = 0x5555000000000000;
  });
  E("cmpsb", {0xa6}, "R1 R1", si_di(kP0 + 0x300, kP1 - 1));
  E("repe cmpsb, rcx=2", {0xf3, 0xa6}, "R1 R1", si_di(kP0 + 0x300, kP1 - 1, 2)).stays();
  E("scasq", {0x48, 0xaf}, "R8", si_di(0, kP2 - 4));
  E("lodsw", {0x66, 0xad}, "R2", si_di(kP1 - 1, 0)).then(loads_into(&R::rax, 2));
  E("movsb fs:[rsi] (override on the source only)", {0x64, 0xa4}, "R1 W1",
    [](Setup& s) { s.fs(kP1); s.regs.rsi = 0x10; s.regs.rdi = kP2 + 0x10; });
  E("xlatb", {0xd7}, "R1", [](Setup& s) { s.regs.rbx = kP1 - 0x37; s.regs.rax = 0x1100 | 0x37; })
      .then(loads_into(&R::rax, 1));

  // --- read-modify-write, locked, compare-exchange
  E("xchg [rbx], rax", {0x48, 0x87, 0x03}, "RW8",
    [](Setup& s) { s.regs.rbx = kP1 - 4; s.regs.rax = 0x8877665544332211; })
      .then(loads_into(&R::rax, 8));
  E("cmpxchg [rbx], rcx (equal: stores rcx)", {0x48, 0x0f, 0xb1, 0x0b}, "RW8", [](Setup& s) {
    s.regs.rbx = kP1 - 4;
    s.regs.rax = s.u64(kP1 - 4);
    s.regs.rcx = ~s.regs.rax;
  });
  E("cmpxchg [rbx], rcx (not equal: still a write cycle)", {0x48, 0x0f, 0xb1, 0x0b}, "RW8", [](Setup& s) {
    s.regs.rbx = kP1 - 4;
    s.regs.rax = ~s.u64(kP1 - 4);
  }).writes_part().then(loads_into(&R::rax, 8));
  E("lock add [rbx], rax", {0xf0, 0x48, 0x01, 0x03}, "RW8",
    [](Setup& s) { s.regs.rbx = kP1 + 0x80; s.regs.rax = 0x0101010101010101; });
  E("xadd [rbx], rax", {0x48, 0x0f, 0xc1, 0x03}, "RW8",
    [](Setup& s) { s.regs.rbx = kP2 - 4; s.regs.rax = 0x0101010101010101; })
      .then(loads_into(&R::rax, 8));
  E("cmpxchg8b [rsi]", {0x0f, 0xc7, 0x0e}, "RW8", [](Setup& s) {
    s.regs.rsi = kP1 + 0x18;
    uint64_t v = s.u64(kP1 + 0x18);
    s.regs.rax = v & 0xffffffff;
    s.regs.rdx = v >> 32;
    s.regs.rbx = ~v & 0xffffffff;
    s.regs.rcx = (~v) >> 32;
  });
  E("lock cmpxchg16b [rsi]", {0xf0, 0x48, 0x0f, 0xc7, 0x0e}, "RW16", [](Setup& s) {
    s.regs.rsi = kP1 + 0x20;
    s.regs.rax = s.u64(kP1 + 0x20);
    s.regs.rdx = s.u64(kP1 + 0x28);
    s.regs.rbx = ~s.regs.rax;
    s.regs.rcx = ~s.regs.rdx;
  });
  E("add byte [rbx], 1", {0x80, 0x03, 0x01}, "RW1", rbx_at(kP2 + 0x7));
  E("rol qword [rbx], 8", {0x48, 0xc1, 0x03, 0x08}, "RW8", rbx_at(kP1 - 4));
  E("setne byte [rbx]", {0x0f, 0x95, 0x03}, "W1", rbx_at(kP1));
  E("cmovne eax, [rbx] (false: still reads)", {0x0f, 0x45, 0x03}, "R4",
    [](Setup& s) { s.regs.rbx = kP1 - 2; s.regs.eflags = 0x246; });
  E("imul rax, [rbx], 5", {0x48, 0x6b, 0x03, 0x05}, "R8", rbx_at(kP1 - 7));
  E("crc32 eax, byte [rbx]", {0xf2, 0x0f, 0x38, 0xf0, 0x03}, "R1", rbx_at(kP1)).needs(Need::Sse42);
  E("movbe [rbx], eax", {0x0f, 0x38, 0xf1, 0x03}, "W4", [](Setup& s) { s.regs.rbx = kP1 - 1; s.regs.rax = 0x11223344; })
      .needs(Need::Movbe);
  E("lfs eax, [rbx] (m16:32 = 6 bytes)", {0x0f, 0xb4, 0x03}, "R6",
    [](Setup& s) { s.regs.rbx = kP1 - 5; s.poke16(kP1 - 1, 0); });

  // --- bit strings: a register offset reaches beyond the operand
  E("bts [rbx], rax (bit 197: unit rbx+24)", {0x48, 0x0f, 0xab, 0x03}, "RW8",
    [](Setup& s) { s.regs.rbx = kP1 - 28; s.regs.rax = 197; })
      .writes_part();
  E("bts [rbx], rcx (bit -1: unit rbx-8)", {0x48, 0x0f, 0xab, 0x0b}, "RW8",
    [](Setup& s) { s.regs.rbx = kP1 + 4; s.regs.rcx = ~uint64_t{0}; })
      .writes_part();
  E("bt [rbx], eax (bit -33 as a 32-bit offset: unit rbx-8)", {0x0f, 0xa3, 0x03}, "R4",
    [](Setup& s) { s.regs.rbx = kP1 + 6; s.regs.rax = 0x12345678ffffffdf; });
  E("bts [rbx], ax (bit -32767: unit rbx-4096)", {0x66, 0x0f, 0xab, 0x03}, "RW2",
    [](Setup& s) { s.regs.rbx = kP2 + 0x101; s.regs.rax = 0x7777777777778001; })
      .writes_part();
  E("bts qword [rbx], 70 (immediate: modulo 64)", {0x48, 0x0f, 0xba, 0x2b, 0x46}, "RW8", rbx_at(kP1 - 4))
      .writes_part();

  // --- SSE / AVX / AVX-512 (zmm0/ymm0/xmm0 hold data, zmm1 a sign-bit mask, k1 = 0x0ff0)
  E("movdqu [rbx], xmm0", {0xf3, 0x0f, 0x7f, 0x03}, "W16", rbx_at(kP1 - 8));
  E("movdqu xmm1, [rbx]", {0xf3, 0x0f, 0x6f, 0x0b}, "R16", rbx_at(kP2 - 9)).then(loads_xmm1());
  E("movaps [rbx], xmm0", {0x0f, 0x29, 0x03}, "W16", rbx_at(kP1 + 0x40));
  E("movaps xmm1, [rbx]", {0x0f, 0x28, 0x0b}, "R16", rbx_at(kP0 + 0x70)).then(loads_xmm1());
  E("movq [rbx], xmm0", {0x66, 0x0f, 0xd6, 0x03}, "W8", rbx_at(kP1 - 3));
  E("movd [rbx], xmm0", {0x66, 0x0f, 0x7e, 0x03}, "W4", rbx_at(kP1 - 3));
  E("movhps [rbx], xmm0", {0x0f, 0x17, 0x03}, "W8", rbx_at(kP2 - 1));
  E("pinsrw xmm0, [rbx], 1", {0x66, 0x0f, 0xc4, 0x03, 0x01}, "R2", rbx_at(kP1 - 1));
  E("pextrd [rbx], xmm0, 1", {0x66, 0x0f, 0x3a, 0x16, 0x03, 0x01}, "W4", rbx_at(kP1 - 2)).needs(Need::Sse41);
  E("comiss xmm0, [rbx] (4 bytes; capstone says 16)", {0x0f, 0x2f, 0x03}, "R4", rbx_at(kP1 - 4));
  E("vcomisd xmm0, [rbx] (8 bytes; capstone says 16)", {0xc5, 0xf9, 0x2f, 0x03}, "R8", rbx_at(kP1 - 8))
      .needs(Need::Avx2);
  E("ldmxcsr [rbx]", {0x0f, 0xae, 0x13}, "R4", [](Setup& s) {
    s.regs.rbx = kP1 - 2;
    s.pokes.emplace_back(kP1 - 2, 0x80);  // 0x1f80, the default MXCSR
    s.pokes.emplace_back(kP1 - 1, 0x1f);
    s.pokes.emplace_back(kP1, 0);
    s.pokes.emplace_back(kP1 + 1, 0);
  });
  E("stmxcsr [rbx]", {0x0f, 0xae, 0x1b}, "W4", rbx_at(kP1 - 2));
  E("maskmovq mm0, mm1 (implicit [rdi], masked)", {0x0f, 0xf7, 0xc1}, "W8", [](Setup& s) { s.regs.rdi = kP1 + 0x60; })
      .writes_part();
  E("maskmovdqu xmm0, xmm1 (implicit [rdi], masked)", {0x66, 0x0f, 0xf7, 0xc1}, "W16",
    [](Setup& s) { s.regs.rdi = kP1 + 0x50; })
      .writes_part().may_touch_less();
  E("vmovdqu [rbx], ymm0", {0xc5, 0xfe, 0x7f, 0x03}, "W32", rbx_at(kP2 - 16)).needs(Need::Avx2);
  E("vmovdqu ymm1, [rbx]", {0xc5, 0xfe, 0x6f, 0x0b}, "R32", rbx_at(kP1 - 31)).needs(Need::Avx2);
  E("vmovss [rbx], xmm0", {0xc5, 0xfa, 0x11, 0x03}, "W4", rbx_at(kP1 - 1)).needs(Need::Avx2);
  E("vpbroadcastd ymm2, [rbx] (one dword)", {0xc4, 0xe2, 0x7d, 0x58, 0x13}, "R4", rbx_at(kP1 - 4)).needs(Need::Avx2);
  E("vextracti128 [rbx], ymm0, 1", {0xc4, 0xe3, 0x7d, 0x39, 0x03, 0x01}, "W16", rbx_at(kP1 - 15)).needs(Need::Avx2);
  E("vcvtps2ph [rbx], ymm0, 0", {0xc4, 0xe3, 0x7d, 0x1d, 0x03, 0x00}, "W16", rbx_at(kP1 - 8)).needs(Need::F16c);
  E("vpmaskmovd [rbx], ymm1, ymm0 (masked: all 32 bytes count)", {0xc4, 0xe2, 0x75, 0x8e, 0x03}, "W32",
    rbx_at(kP1 + 0x100))
      .needs(Need::Avx2).writes_part().may_touch_less();
  E("vmovdqu64 [rbx], zmm0", {0x62, 0xf1, 0xfe, 0x48, 0x7f, 0x03}, "W64", rbx_at(kP1 - 32)).needs(Need::Avx512);
  E("vmovdqu64 zmm1, [rbx+0x40] (disp8*64)", {0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x4b, 0x01}, "R64",
    rbx_at(kP1 - 0x40 - 0x3f))
      .needs(Need::Avx512);
  E("vmovdqu32 [rbx]{k1}, zmm0 (masked: all 64 bytes count)", {0x62, 0xf1, 0x7e, 0x49, 0x7f, 0x03}, "W64",
    rbx_at(kP1 + 0x80))
      .needs(Need::Avx512).writes_part().may_touch_less();
  E("vaddps zmm2, zmm0, [rbx]{1to16} (one dword)", {0x62, 0xf1, 0x7c, 0x58, 0x58, 0x13}, "R4", rbx_at(kP1 - 4))
      .needs(Need::Avx512);
  E("vpmovqd [rbx], zmm0 (down-convert: 32 bytes)", {0x62, 0xf2, 0x7e, 0x48, 0x35, 0x03}, "W32", rbx_at(kP1 - 16))
      .needs(Need::Avx512);
  E("kmovw [rbx], k1", {0xc5, 0xf8, 0x91, 0x0b}, "W2", rbx_at(kP1 - 1)).needs(Need::Avx512);
  // Sizes capstone 4 gets wrong (found by the sweep below).
  E("{evex} vaddss xmm0, xmm0, [rbx] (4 bytes)", {0x62, 0xf1, 0x7e, 0x08, 0x58, 0x03}, "R4", rbx_at(kP1 - 4))
      .needs(Need::Avx512);
  E("{evex} vmovq xmm0, [rbx] (8 bytes)", {0x62, 0xf1, 0xfe, 0x08, 0x7e, 0x03}, "R8", rbx_at(kP1 - 8))
      .needs(Need::Avx512);
  E("vpmovzxbq zmm0, [rbx] (8 bytes)", {0x62, 0xf2, 0x7d, 0x48, 0x32, 0x03}, "R8", rbx_at(kP1 - 8))
      .needs(Need::Avx512);
  E("vpmovqb [rbx], zmm0 (8 bytes)", {0x62, 0xf2, 0x7e, 0x48, 0x32, 0x03}, "W8", rbx_at(kP1 - 4))
      .needs(Need::Avx512);

  // --- x87 (st0 = pi)
  E("fld tbyte [rbx]", {0xdb, 0x2b}, "R10", rbx_at(kP1 - 9));
  E("fstp tbyte [rbx]", {0xdb, 0x3b}, "W10", rbx_at(kP1 - 9));
  E("fld qword [rbx]", {0xdd, 0x03}, "R8", rbx_at(kP1 - 7));
  E("fstp dword [rbx]", {0xd9, 0x1b}, "W4", rbx_at(kP1 - 3));
  E("fild word [rbx]", {0xdf, 0x03}, "R2", rbx_at(kP1 - 1));
  E("fistp qword [rbx]", {0xdf, 0x3b}, "W8", rbx_at(kP1 - 7));
  E("fnstcw [rbx]", {0xd9, 0x3b}, "W2", rbx_at(kP1 - 1));
  E("fnstsw [rbx] (2 bytes)", {0xdd, 0x3b}, "W2", rbx_at(kP1 - 1));

  // --- no access at all: the pages may even be PROT_NONE
  E("lea rax, [rbx+rcx*8]", {0x48, 0x8d, 0x04, 0xcb}, "", [](Setup& s) { s.regs.rbx = kP1; s.regs.rcx = 4; });
  E("nopw 0x0(%rax,%rax,1)", {0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00}, "", [](Setup& s) { s.regs.rax = kP1 / 2; });
  E("prefetcht0 [rbx]", {0x0f, 0x18, 0x0b}, "", rbx_at(kP1 + 0x40));
  E("prefetchw [rbx]", {0x0f, 0x0d, 0x0b}, "", rbx_at(kP1 + 0x40));

  // --- cache-line flushes: a 1-byte read as far as watchpoints go
  E("clflush [rbx]", {0x0f, 0xae, 0x3b}, "R1", rbx_at(kP1 + 0x43));
  E("clflushopt [rbx]", {0x66, 0x0f, 0xae, 0x3b}, "R1", rbx_at(kP1 - 1)).needs(Need::Clflushopt);
  E("clwb [rbx]", {0x66, 0x0f, 0xae, 0x33}, "R1", rbx_at(kP1 + 0x13)).needs(Need::Clwb);
  E("cpuid", {0x0f, 0xa2}, "");
  E("rdpid rax (capstone 4 calls it rdseed)", {0xf3, 0x0f, 0xc7, 0xf8}, "", [](Setup& s) { s.regs.rax = kP1; })
      .needs(Need::Rdpid);
  E("int3", {0xcc}, "").stays();  // stops with SIGTRAP after it, like a single step

  // --- exact=false
  E("vpgatherdd ymm2, [rax+ymm3*4], ymm4", {0xc4, 0xe2, 0x5d, 0x90, 0x14, 0x98}, "?");
  E("vpscatterdd [rax+zmm3*4]{k1}, zmm0", {0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x04, 0x98}, "?");
  E("xsave [rbx]", {0x0f, 0xae, 0x23}, "?");
  E("fxsave [rbx]", {0x0f, 0xae, 0x03}, "?");
  E("syscall", {0x0f, 0x05}, "?");
  E("int 0x80", {0xcd, 0x80}, "?");
  E("iretq", {0x48, 0xcf}, "?");
  E("insb", {0x6c}, "?");
  E("rep outsb", {0xf3, 0x6e}, "?");
  E("fnstenv [rbx]", {0xd9, 0x33}, "?");
  E("frstor [rbx]", {0xdd, 0x23}, "?");
  E("movdir64b rax, [rbx] (capstone 4 cannot decode it)", {0x66, 0x0f, 0x38, 0xf8, 0x03}, "?");
  E("clzero (AMD; capstone 4 cannot decode it)", {0x0f, 0x01, 0xfc}, "?");
  E("lcall [rbx]", {0xff, 0x1b}, "?");
  E("sgdt [rbx]", {0x0f, 0x01, 0x03}, "?");
  // Where capstone 4 decodes another instruction or operand than the CPU runs.
  E("f2 67 0f 2c 03: cvttsd2si eax, [ebx] (capstone 4: cvttps2pi)", {0xf2, 0x67, 0x0f, 0x2c, 0x03}, "?");
  E("48 67 8b 03: mov eax, [ebx] (the REX is ignored)", {0x48, 0x67, 0x8b, 0x03}, "?");
  E("vminsd xmm14{k2}, xmm25, [eip+0x10] (capstone 4: [rbp], no disp32)",
    {0x67, 0x62, 0x31, 0xb7, 0x02, 0x5d, 0x35, 0x10, 0x00, 0x00, 0x00}, "?");
  return t;
}

}  // namespace

TEST_CASE("mem_access: every table entry agrees with the CPU", "[mem_access]") {
  int level = vector_level();
  for (const Entry& e : table()) {
    SECTION(e.name) {
      if (std::string lacks = missing(e.need); !lacks.empty() && std::string(e.shape) != "?")
        WARN("skipped (this CPU lacks " << lacks << "): " << e.name);
      else
        check_entry(e, level);
    }
  }
}

TEST_CASE("mem_access: the table is big enough", "[mem_access]") {
  CHECK(table().size() >= 40);
}
