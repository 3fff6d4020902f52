// AccessDecoder::run_ahead: the verdict for hand-written cases, and the walk checked against the
// real CPU. A forked child runs instruction sequences under ptrace one single step at a time;
// at every step the true accesses are decode() at the real registers. For every starting point
// of every path, the walk from the registers there must:
// - go where the CPU went (each walked instruction and stop at the address the CPU reached),
// - know only correct values (every GPR it claims to know equals the real register),
// - compute, for every instruction it declares safe, exactly the true accesses,
// - and, with a predicate that covers an access of the k-th instruction, stop exactly at the
//   first instruction whose true accesses satisfy it (Why::Touches), and at the limit given.
// Paths come from hand-written sequences (-O0 frames, push/pop, TLS, rip-relative globals...),
// random sequences from a pool of register/memory instructions, and a real workload (the
// functions at the end of this file, at -O0 and -O2, plus libc) single-stepped in the child.
// A sweep over random single instructions checks the register model against the CPU for every
// form capstone decodes (what each instruction writes), which the pool cannot cover.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <capstone/capstone.h>

#include "backend/x86/access_decoder.h"
#include "cpuid_step.h"

using namespace backend;
using Why = RunAhead::Why;

namespace {

const char* why_name(Why w) {
  switch (w) {
    case Why::ControlFlow: return "ControlFlow";
    case Why::Unknown: return "Unknown";
    case Why::Touches: return "Touches";
    case Why::Limit: return "Limit";
    case Why::Undecodable: return "Undecodable";
  }
  return "?";
}

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// GPR by x86 register number (RunAheadStep::known's bit order).
unsigned long long& gpr(user_regs_struct& r, int n) {
  unsigned long long* const slots[16] = {&r.rax, &r.rcx, &r.rdx, &r.rbx, &r.rsp, &r.rbp, &r.rsi, &r.rdi,
                                         &r.r8,  &r.r9,  &r.r10, &r.r11, &r.r12, &r.r13, &r.r14, &r.r15};
  return *slots[n];
}
uint64_t gpr(const user_regs_struct& r, int n) { return gpr(const_cast<user_regs_struct&>(r), n); }
const char* const kGprName[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                  "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};

// Wraps around the top of the address space like the CPU (a push at rsp = 8 - ...).
bool overlaps(const MemAccess& a, const MemAccess& b) { return a.addr - b.addr < b.size || b.addr - a.addr < a.size; }

std::string describe(const std::vector<MemAccess>& acc) {
  std::string s;
  for (const MemAccess& m : acc) {
    if (!s.empty()) s += ' ';
    s += std::string(m.read ? "R" : "") + (m.write ? "W" : "") + std::to_string(m.size) + "@" + hex(m.addr);
  }
  return s.empty() ? "none" : s;
}

bool same_accesses(const std::vector<MemAccess>& a, const std::vector<MemAccess>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].addr != b[i].addr || a[i].size != b[i].size || a[i].read != b[i].read || a[i].write != b[i].write)
      return false;
  return true;
}

// One instruction of a hand-written sequence: its bytes and what they are.
struct Insn {
  std::vector<uint8_t> bytes;
  const char* text;
};

// Code image at `base`: the instructions back to back, then int3 to the end of the page.
struct Image {
  uint64_t base = 0;
  std::vector<uint8_t> bytes;
  std::vector<uint64_t> starts;  // address of each instruction

  Image(uint64_t at, const std::vector<Insn>& insns, size_t size = 4096) : base(at) {
    for (const Insn& i : insns) {
      starts.push_back(base + bytes.size());
      bytes.insert(bytes.end(), i.bytes.begin(), i.bytes.end());
    }
    starts.push_back(base + bytes.size());  // where the int3 fill starts
    if (bytes.size() < size) bytes.resize(size, 0xcc);
  }
  CodeBytesReader reader() const {
    return [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
      if (addr < base || addr >= base + bytes.size()) return 0;
      size_t n = std::min<size_t>(out.size(), base + bytes.size() - addr);
      std::memcpy(out.data(), bytes.data() + (addr - base), n);
      return n;
    };
  }
};

// --- verdicts without the CPU -------------------------------------------------------------------

constexpr uint64_t kAt = 0x401000;

user_regs_struct some_regs() {
  user_regs_struct r{};
  uint64_t v = 0x7f0000001000;
  for (int n = 0; n < 16; ++n) gpr(r, n) = v + 0x100000 * n;
  r.rsp = 0x7ffe0000f000;
  r.rbp = 0x7ffe0000f100;
  r.rip = kAt;
  r.fs_base = 0x7f1234560000;
  r.gs_base = 0x7f6543210000;
  return r;
}

struct Walk {
  RunAhead ra;
  std::vector<RunAheadStep> trace;
};

Walk walk(AccessDecoder& dec, const std::vector<Insn>& insns, const user_regs_struct& regs,
          std::function<bool(const MemAccess&)> touches = {}, uint32_t max = 512) {
  Image img(regs.rip, insns);
  Walk w;
  w.ra = dec.run_ahead(regs, img.reader(), touches, max, &w.trace);
  return w;
}

// The walk stops at instruction `index` of `insns` for `why`.
void expect_stop(AccessDecoder& dec, const std::vector<Insn>& insns, uint32_t index, Why why,
                 const user_regs_struct& regs = some_regs()) {
  Image img(regs.rip, insns);
  Walk w = walk(dec, insns, regs);
  std::string listing;
  for (size_t i = 0; i < insns.size(); ++i) listing += std::string(i == index ? " >" : "  ") + insns[i].text + "\n";
  INFO("sequence:\n" << listing << "walk: stop " << hex(w.ra.stop) << " after " << w.ra.insns << ", "
                     << why_name(w.ra.why));
  CHECK(w.ra.why == why);
  CHECK(w.ra.insns == index);
  CHECK(w.ra.stop == img.starts[index]);
  CHECK(w.trace.size() == w.ra.insns + (w.ra.why != Why::Limit));
}

TEST_CASE("run_ahead: control flow stops the walk at the instruction", "[run_ahead]") {
  AccessDecoder dec;
  const std::vector<Insn> flows = {
      {{0xe8, 0x00, 0x00, 0x00, 0x00}, "call .+5"},
      {{0xff, 0xd0}, "call rax"},
      {{0xff, 0x10}, "call [rax]"},
      {{0xeb, 0x00}, "jmp .+2"},
      {{0xe9, 0x00, 0x00, 0x00, 0x00}, "jmp .+5"},
      {{0xff, 0xe0}, "jmp rax"},
      {{0x3e, 0xff, 0xe0}, "notrack jmp rax"},
      {{0x74, 0x00}, "je .+2"},
      {{0x0f, 0x85, 0x00, 0x00, 0x00, 0x00}, "jne .+6"},
      {{0xc3}, "ret"},
      {{0xf3, 0xc3}, "rep ret"},
      {{0xc2, 0x08, 0x00}, "ret 8"},
      {{0xe2, 0x00}, "loop .+2"},
      {{0xe1, 0x00}, "loope .+2"},
      {{0xe3, 0x00}, "jrcxz .+2"},
      {{0x67, 0xe3, 0x00}, "jecxz .+3"},
      {{0x0f, 0x05}, "syscall"},
      {{0x0f, 0x34}, "sysenter"},
      {{0xcd, 0x80}, "int 0x80"},
      {{0xcc}, "int3"},
      {{0xf1}, "int1"},
      {{0x0f, 0x0b}, "ud2"},
      {{0x0f, 0xff, 0xc0}, "ud0"},
      {{0xf4}, "hlt"},
      {{0x48, 0xcf}, "iretq"},
      {{0xff, 0x28}, "jmp far [rax]"},
      {{0xff, 0x18}, "call far [rax]"},
      {{0xcb}, "retf"},
      {{0xc7, 0xf8, 0x00, 0x00, 0x00, 0x00}, "xbegin .+6"},
      {{0x0f, 0x01, 0xd5}, "xend"},
      {{0xc6, 0xf8, 0x01}, "xabort 1"},
  };
  for (const Insn& f : flows) {
    expect_stop(dec, {f}, 0, Why::ControlFlow);
    expect_stop(dec, {{{0x48, 0x89, 0x03}, "mov [rbx], rax"}, {{0x53}, "push rbx"}, f}, 2, Why::ControlFlow);
  }
}

TEST_CASE("run_ahead: inexact, unusual, rep and undecodable instructions stop the walk", "[run_ahead]") {
  AccessDecoder dec;
  const Insn store{{0x48, 0x89, 0x03}, "mov [rbx], rax"};
  const std::vector<Insn> unknown = {
      {{0x0f, 0xae, 0x27}, "xsave [rdi] (exact=false)"},
      {{0x0f, 0xae, 0x2f}, "xrstor [rdi] (exact=false)"},
      {{0x0f, 0xae, 0x07}, "fxsave [rdi] (exact=false)"},
      {{0x0f, 0x01, 0x07}, "sgdt [rdi] (exact=false)"},
      {{0xf3, 0xaa}, "rep stosb (runs every iteration when continued)"},
      {{0xf3, 0x48, 0xa5}, "rep movsq"},
      {{0xf2, 0xae}, "repne scasb"},
      {{0x9d}, "popfq (TF/AC/DF)"},
      {{0xf3, 0x48, 0x0f, 0xae, 0xd0}, "wrfsbase rax"},
      {{0xf3, 0x48, 0x0f, 0xae, 0xd8}, "wrgsbase rax"},
      {{0x8e, 0xe0}, "mov fs, eax"},
      {{0x8e, 0xe8}, "mov gs, eax"},
      {{0x8e, 0xd0}, "mov ss, eax"},
      {{0x0f, 0xa1}, "pop fs"},
      {{0x0f, 0xa9}, "pop gs"},
      {{0x0f, 0xb4, 0x03}, "lfs eax, [rbx]"},
      {{0x0f, 0xb5, 0x03}, "lgs eax, [rbx]"},
      {{0x0f, 0xb2, 0x03}, "lss eax, [rbx]"},
      {{0x0f, 0x01, 0xf8}, "swapgs"},
      {{0xe4, 0x60}, "in al, 0x60"},
      {{0xe6, 0x60}, "out 0x60, al"},
      {{0xfa}, "cli"},
      {{0x0f, 0x30}, "wrmsr"},
      {{0x0f, 0x22, 0xd8}, "mov cr3, rax"},
  };
  for (const Insn& u : unknown) {
    expect_stop(dec, {u}, 0, Why::Unknown);
    expect_stop(dec, {store, u}, 1, Why::Unknown);
  }
  // Undecodable: invalid opcodes, an instruction capstone 4 does not know, code that ends.
  expect_stop(dec, {store, {{0x06}, "push es (invalid in 64-bit mode)"}}, 1, Why::Undecodable);
  expect_stop(dec, {store, {{0x66, 0x0f, 0x38, 0xf8, 0x03}, "movdir64b rax, [rbx]"}}, 1, Why::Undecodable);
  {
    user_regs_struct r = some_regs();
    Image img(r.rip, {store, store});
    auto short_reader = [&img](uint64_t addr, std::span<uint8_t> out) -> size_t {
      uint64_t end = img.base + 4;  // the second store is cut after one byte
      if (addr >= end) return 0;
      size_t n = std::min<size_t>(out.size(), end - addr);
      std::memcpy(out.data(), img.bytes.data() + (addr - img.base), n);
      return n;
    };
    RunAhead ra = dec.run_ahead(r, short_reader, {});
    CHECK(ra.why == Why::Undecodable);
    CHECK(ra.insns == 1);
    CHECK(ra.stop == img.starts[1]);
    auto nothing = [](uint64_t, std::span<uint8_t>) -> size_t { return 0; };
    ra = dec.run_ahead(r, nothing, {});
    CHECK(ra.why == Why::Undecodable);
    CHECK(ra.insns == 0);
    CHECK(ra.stop == r.rip);
    ra = dec.run_ahead(r, CodeBytesReader{}, {});  // no reader at all
    CHECK(ra.why == Why::Undecodable);
    CHECK(ra.stop == r.rip);
  }
}

TEST_CASE("run_ahead: registers written by walked instructions", "[run_ahead]") {
  AccessDecoder dec;
  const Insn load_rax_rbp{{0x48, 0x8b, 0x45, 0xf8}, "mov rax, [rbp-8]"};
  const Insn use_rax{{0x8b, 0x00}, "mov eax, [rax]"};
  const Insn store_rax{{0x48, 0x89, 0x08}, "mov [rax], rcx"};
  const Insn store_rdx{{0x48, 0x89, 0x0a}, "mov [rdx], rcx"};
  const Insn store_rbx{{0x48, 0x89, 0x0b}, "mov [rbx], rcx"};
  const Insn store_rsp{{0x48, 0x89, 0x04, 0x24}, "mov [rsp], rax"};
  const Insn store_rsi{{0x48, 0x89, 0x06}, "mov [rsi], rax"};
  const Insn store_rdi{{0x48, 0x89, 0x07}, "mov [rdi], rax"};

  SECTION("a loaded register is unknown") {
    expect_stop(dec, {load_rax_rbp, use_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x48, 0x63, 0x03}, "movsxd rax, [rbx]"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x5c}, "pop rsp"}, store_rsp}, 1, Why::Unknown);
    expect_stop(dec, {{{0x58}, "pop rax"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x48, 0x0f, 0x44, 0xc3}, "cmove rax, rbx"}, store_rax}, 1, Why::Unknown);
  }
  SECTION("sub-register writes make the register unknown") {
    expect_stop(dec, {{{0xb0, 0x01}, "mov al, 1"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0xb4, 0x01}, "mov ah, 1"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x66, 0xb8, 0x01, 0x00}, "mov ax, 1"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x0f, 0x94, 0xc0}, "sete al"}, store_rax}, 1, Why::Unknown);
    expect_stop(dec, {{{0x66, 0x83, 0xc0, 0x01}, "add ax, 1"}, store_rax}, 1, Why::Unknown);
  }
  SECTION("implicit writes") {
    const std::vector<std::pair<Insn, std::vector<Insn>>> cases = {
        {{{0x48, 0xf7, 0xe1}, "mul rcx"}, {store_rax, store_rdx}},
        {{{0x48, 0xf7, 0xe9}, "imul rcx"}, {store_rax, store_rdx}},
        {{{0x48, 0xf7, 0xf1}, "div rcx"}, {store_rax, store_rdx}},
        {{{0x48, 0xf7, 0xf9}, "idiv rcx"}, {store_rax, store_rdx}},
        {{{0x0f, 0xa2}, "cpuid"}, {store_rax, store_rbx, store_rdx, {{0x48, 0x89, 0x01}, "mov [rcx], rax"}}},
        {{{0x0f, 0x31}, "rdtsc"}, {store_rax, store_rdx}},
        {{{0x0f, 0x01, 0xf9}, "rdtscp"}, {store_rax, store_rdx, {{0x48, 0x89, 0x01}, "mov [rcx], rax"}}},
        {{{0x48, 0x99}, "cqo"}, {store_rdx}},
        {{{0x99}, "cdq"}, {store_rdx}},
        {{{0x48, 0x98}, "cdqe"}, {store_rax}},
        {{{0x9f}, "lahf"}, {store_rax}},
        {{{0xd7}, "xlat"}, {store_rax}},
        {{{0x48, 0xad}, "lodsq"}, {store_rax, store_rsi}},
        {{{0xa4}, "movsb"}, {store_rsi, store_rdi}},
        {{{0x48, 0xab}, "stosq"}, {store_rdi}},
        {{{0xae}, "scasb"}, {store_rdi}},
        {{{0x48, 0x87, 0xc3}, "xchg rbx, rax"}, {store_rax, store_rbx}},
        {{{0x48, 0x0f, 0xc1, 0xc3}, "xadd rbx, rax"}, {store_rax, store_rbx}},
        {{{0x48, 0x0f, 0xb1, 0x0b}, "cmpxchg [rbx], rcx"}, {store_rax}},
        {{{0x48, 0x0f, 0xc7, 0x0b}, "cmpxchg16b [rbx]"}, {store_rax, store_rdx}},
        {{{0xc4, 0xe2, 0xf3, 0xf6, 0xc2}, "mulx rax, rcx, rdx"}, {store_rax, {{0x48, 0x89, 0x01}, "mov [rcx], rax"}}},
        {{{0x66, 0x0f, 0x3a, 0x61, 0xc1, 0x00}, "pcmpestri xmm0, xmm1, 0"}, {{{0x48, 0x89, 0x01}, "mov [rcx], rax"}}},
        {{{0xc8, 0x10, 0x00, 0x01}, "enter 0x10, 1"}, {store_rsp, {{0x48, 0x89, 0x45, 0x00}, "mov [rbp], rax"}}},
        {{{0xc9}, "leave"}, {{{0x48, 0x89, 0x45, 0x00}, "mov [rbp], rax"}}},
        {{{0x0f, 0xc7, 0xf0}, "rdrand eax"}, {store_rax}},
        {{{0x48, 0x0f, 0xc8}, "bswap rax"}, {store_rax}},
        {{{0x66, 0x48, 0x0f, 0x7e, 0xc0}, "movq rax, xmm0"}, {store_rax}},
    };
    for (const auto& [insn, uses] : cases)
      for (const Insn& use : uses) expect_stop(dec, {insn, use}, 1, Why::Unknown);
  }
  SECTION("registers only read stay known") {
    for (const Insn& i : std::vector<Insn>{
             {{0x48, 0x39, 0xd8}, "cmp rax, rbx"},
             {{0x48, 0x85, 0xc0}, "test rax, rax"},
             {{0x48, 0x0f, 0xa3, 0xd8}, "bt rax, rbx"},
             {{0x48, 0x89, 0x03}, "mov [rbx], rax"},
             {{0x48, 0x8b, 0x0b}, "mov rcx, [rbx]"},
             {{0x66, 0x48, 0x0f, 0x6e, 0xc0}, "movq xmm0, rax"},
             {{0x0f, 0x18, 0x08}, "prefetcht0 [rax]"},
             {{0xf3, 0x0f, 0x1e, 0xfa}, "endbr64"},
             {{0xc5, 0xf8, 0x77}, "vzeroupper"},
             {{0x0f, 0xae, 0xe8}, "lfence"},
         })
      expect_stop(dec, {i, store_rax, {{0xcc}, "int3"}}, 2, Why::ControlFlow);
  }
}

TEST_CASE("run_ahead: values the walk follows exactly", "[run_ahead]") {
  AccessDecoder dec;
  user_regs_struct r = some_regs();
  // The address the second-to-last instruction's access is computed at.
  auto last_access = [&](const std::vector<Insn>& insns, const user_regs_struct& regs = some_regs()) -> uint64_t {
    std::vector<Insn> with_end = insns;
    with_end.push_back({{0xcc}, "int3"});
    Walk w = walk(dec, with_end, regs);
    INFO("walk: " << w.ra.insns << " " << why_name(w.ra.why) << " at " << hex(w.ra.stop));
    REQUIRE(w.ra.why == Why::ControlFlow);
    REQUIRE(w.ra.insns == insns.size());
    REQUIRE(w.trace[insns.size() - 1].accesses.size() >= 1);
    return w.trace[insns.size() - 1].accesses.back().addr;
  };
  CHECK(last_access({{{0x53}, "push rbx"}, {{0x48, 0x89, 0x04, 0x24}, "mov [rsp], rax"}}) == r.rsp - 8);
  CHECK(last_access({{{0x48, 0x83, 0xec, 0x20}, "sub rsp, 0x20"}, {{0x48, 0x89, 0x44, 0x24, 0x08}, "mov [rsp+8], rax"}}) ==
        r.rsp - 0x20 + 8);
  CHECK(last_access({{{0xb8, 0x05, 0x00, 0x00, 0x00}, "mov eax, 5"},
                     {{0x8b, 0x1c, 0x85, 0x00, 0x10, 0x00, 0x00}, "mov ebx, [rax*4+0x1000]"}}) == 0x1014);
  CHECK(last_access({{{0x48, 0xc7, 0xc0, 0xff, 0xff, 0xff, 0xff}, "mov rax, -1"}, {{0x48, 0x89, 0x48, 0x10}, "mov [rax+0x10], rcx"}}) ==
        0xf);
  CHECK(last_access({{{0xb8, 0xff, 0xff, 0xff, 0xff}, "mov eax, -1"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) == 0xffffffff);
  CHECK(last_access({{{0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11}, "movabs rax, 0x1122334455667788"},
                     {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) == 0x1122334455667788);
  CHECK(last_access({{{0x48, 0x05, 0x00, 0xff, 0xff, 0xff}, "add rax, -0x100"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) ==
        r.rax - 0x100);
  {
    user_regs_struct big = some_regs();
    big.rax = 0x1234567800000010;  // a 32-bit add zero-extends
    CHECK(last_access({{{0x83, 0xc0, 0x10}, "add eax, 0x10"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}, big) == 0x20);
    CHECK(last_access({{{0xff, 0xc8}, "dec eax"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}, big) == 0xf);
    CHECK(last_access({{{0x89, 0xc3}, "mov ebx, eax"}, {{0x48, 0x89, 0x0b}, "mov [rbx], rcx"}}, big) == 0x10);
  }
  CHECK(last_access({{{0x48, 0xff, 0xc0}, "inc rax"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) == r.rax + 1);
  CHECK(last_access({{{0x48, 0x83, 0xe4, 0xc0}, "and rsp, -64"}, {{0x50}, "push rax"}}) == (r.rsp & ~uint64_t{63}) - 8);
  CHECK(last_access({{{0x25, 0xf0, 0xff, 0x00, 0x00}, "and eax, 0xfff0"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) ==
        (r.rax & 0xfff0));
  CHECK(last_access({{{0x31, 0xc0}, "xor eax, eax"}, {{0x48, 0x89, 0x48, 0x08}, "mov [rax+8], rcx"}}) == 8);
  CHECK(last_access({{{0x48, 0x29, 0xc0}, "sub rax, rax"}, {{0x48, 0x89, 0x48, 0x08}, "mov [rax+8], rcx"}}) == 8);
  CHECK(last_access({{{0x48, 0x89, 0xe5}, "mov rbp, rsp"}, {{0x48, 0x89, 0x45, 0xf8}, "mov [rbp-8], rax"}}) == r.rsp - 8);
  CHECK(last_access({{{0x48, 0x89, 0xec}, "mov rsp, rbp"}, {{0x50}, "push rax"}}) == r.rbp - 8);
  CHECK(last_access({{{0x48, 0x8d, 0x65, 0xc0}, "lea rsp, [rbp-0x40]"}, {{0x50}, "push rax"}}) == r.rbp - 0x48);
  CHECK(last_access({{{0x48, 0x8d, 0x64, 0x24, 0x10}, "lea rsp, [rsp+0x10]"}, {{0x50}, "push rax"}}) == r.rsp + 8);
  CHECK(last_access({{{0x64, 0x48, 0x8d, 0x43, 0x08}, "lea rax, fs:[rbx+8] (no segment base)"},
                     {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) == r.rbx + 8);
  CHECK(last_access({{{0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00}, "lea rax, [rip+0x100]"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) ==
        kAt + 7 + 0x100);
  CHECK(last_access({{{0x67, 0x48, 0x8d, 0x04, 0x0b}, "lea rax, [ebx+ecx]"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) ==
        ((r.rbx + r.rcx) & 0xffffffff));
  CHECK(last_access({{{0x8d, 0x44, 0x4b, 0x10}, "lea eax, [rbx+rcx*2+0x10]"}, {{0x48, 0x89, 0x08}, "mov [rax], rcx"}}) ==
        ((r.rbx + 2 * r.rcx + 0x10) & 0xffffffff));
  CHECK(last_access({{{0xc8, 0x20, 0x00, 0x00}, "enter 0x20, 0"}, {{0x48, 0x89, 0x45, 0xf8}, "mov [rbp-8], rax"}}) ==
        r.rsp - 16);
  CHECK(last_access({{{0xc8, 0x20, 0x00, 0x00}, "enter 0x20, 0"}, {{0x50}, "push rax"}}) == r.rsp - 8 - 0x20 - 8);
  CHECK(last_access({{{0xc9}, "leave"}, {{0x50}, "push rax"}}) == r.rbp + 8 - 8);
  CHECK(last_access({{{0x5b}, "pop rbx"}, {{0x8f, 0x04, 0x24}, "pop [rsp]"}, {{0x50}, "push rax"}}) == r.rsp + 8);
  CHECK(last_access({{{0x6a, 0x10}, "push 0x10"}, {{0x9c}, "pushfq"}, {{0x0f, 0xa0}, "push fs"},
                     {{0x48, 0x89, 0x04, 0x24}, "mov [rsp], rax"}}) == r.rsp - 24);
  CHECK(last_access({{{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, "mov rax, fs:0x28"}}) == r.fs_base + 0x28);
  CHECK(last_access({{{0x65, 0x48, 0x89, 0x03}, "mov gs:[rbx], rax"}}) == r.gs_base + r.rbx);
  // A register known again after a write that the walk follows.
  expect_stop(dec,
              {{{0x48, 0x8b, 0x03}, "mov rax, [rbx]"}, {{0x48, 0x8d, 0x43, 0x08}, "lea rax, [rbx+8]"},
               {{0x48, 0x89, 0x08}, "mov [rax], rcx"}, {{0xc3}, "ret"}},
              3, Why::ControlFlow);
  // ...but not from unknown inputs.
  expect_stop(dec,
              {{{0x48, 0x8b, 0x03}, "mov rax, [rbx]"}, {{0x48, 0x89, 0xc2}, "mov rdx, rax"},
               {{0x48, 0x83, 0xc2, 0x08}, "add rdx, 8"}, {{0x48, 0x89, 0x0a}, "mov [rdx], rcx"}},
              3, Why::Unknown);
  expect_stop(dec,  // leave reads [rbp] itself
              {{{0x48, 0x8b, 0x2b}, "mov rbp, [rbx]"}, {{0xc9}, "leave"}, {{0x50}, "push rax"}},
              1, Why::Unknown);
  // push/pop with a 0x66 prefix move rsp by 2: not followed.
  expect_stop(dec, {{{0x66, 0x50}, "push ax"}, {{0x50}, "push rax"}}, 1, Why::Unknown);
}

TEST_CASE("run_ahead: touches, the limit, and self-modifying code", "[run_ahead]") {
  AccessDecoder dec;
  user_regs_struct r = some_regs();
  const std::vector<Insn> seq = {
      {{0x53}, "push rbx"},                         // W8 at rsp-8
      {{0x48, 0x89, 0x04, 0x24}, "mov [rsp], rax"},  // W8 at rsp-8
      {{0x48, 0x8b, 0x4b, 0x10}, "mov rcx, [rbx+0x10]"},
      {{0x48, 0x89, 0x4d, 0xf0}, "mov [rbp-0x10], rcx"},
      {{0x90}, "nop"},
      {{0xc3}, "ret"},
  };
  expect_stop(dec, seq, 5, Why::ControlFlow);
  auto at = [](uint64_t a, uint32_t size, bool writes_only) {
    return [=](const MemAccess& m) { return (!writes_only || m.write) && m.addr < a + size && a < m.addr + m.size; };
  };
  Image img(r.rip, seq);
  auto stop_for = [&](std::function<bool(const MemAccess&)> t) { return dec.run_ahead(r, img.reader(), t); };
  RunAhead ra = stop_for(at(r.rsp - 4, 1, true));
  CHECK((ra.why == Why::Touches && ra.insns == 0 && ra.stop == img.starts[0]));
  ra = stop_for(at(r.rbx + 0x17, 1, false));
  CHECK((ra.why == Why::Touches && ra.insns == 2 && ra.stop == img.starts[2]));
  ra = stop_for(at(r.rbx + 0x17, 1, true));  // a read only: a write watch does not stop there
  CHECK(ra.why == Why::ControlFlow);
  ra = stop_for(at(r.rbp - 0x10, 8, true));
  CHECK((ra.why == Why::Touches && ra.insns == 3 && ra.stop == img.starts[3]));
  ra = stop_for(at(r.rbp - 0x8, 8, false));  // next to the store, not on it
  CHECK(ra.why == Why::ControlFlow);

  for (uint32_t max = 0; max <= 6; ++max) {
    ra = dec.run_ahead(r, img.reader(), {}, max);
    INFO("max " << max);
    CHECK(ra.insns == std::min<uint32_t>(max, 5));
    CHECK(ra.why == (max <= 5 ? Why::Limit : Why::ControlFlow));
    CHECK(ra.stop == img.starts[ra.insns]);
  }

  // A store into the code the walk decoded after it: the walk stops at the store.
  const Insn nop{{0x90}, "nop"};
  expect_stop(dec, {nop, {{0xc6, 0x05, 0x01, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+1], 0xcc"}, nop, nop, nop, {{0xc3}, "ret"}},
              1, Why::Unknown);
  // ...also into stop itself (where the caller puts its breakpoint), any byte of it.
  expect_stop(dec, {{{0xc6, 0x05, 0x00, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+0], 0xcc"}, {{0xc3}, "ret"}}, 0, Why::Unknown);
  expect_stop(dec, {{{0xc6, 0x05, 0x04, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+4], 0xcc"}, {{0xe8, 0, 0, 0, 0}, "call .+5"}},
              0, Why::Unknown);
  expect_stop(dec, {{{0xc6, 0x05, 0x05, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+5], 0xcc"}, {{0xe8, 0, 0, 0, 0}, "call .+5"}},
              1, Why::ControlFlow);
  // With a limit, stop is not decoded: any of the 15 bytes it may have counts.
  {
    std::vector<Insn> seq = {{{0xc6, 0x05, 0x0e, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+14], 0xcc"}, nop, nop};
    Walk w = walk(dec, seq, r, {}, 1);
    CHECK((w.ra.why == Why::Unknown && w.ra.insns == 0));
    seq[0] = {{0xc6, 0x05, 0x0f, 0x00, 0x00, 0x00, 0xcc}, "mov byte [rip+15], 0xcc"};
    w = walk(dec, seq, r, {}, 1);
    CHECK((w.ra.why == Why::Limit && w.ra.insns == 1));
  }
  // Stores into code already run, or well past stop, do not matter.
  expect_stop(dec, {nop, {{0xc6, 0x05, 0xf8, 0xff, 0xff, 0xff, 0xcc}, "mov byte [rip-8], 0xcc"}, {{0xc3}, "ret"}}, 2,
              Why::ControlFlow);
  expect_stop(dec, {nop, {{0xc6, 0x05, 0x00, 0x01, 0x00, 0x00, 0xcc}, "mov byte [rip+0x100], 0xcc"}, {{0xc3}, "ret"}}, 2,
              Why::ControlFlow);
}

TEST_CASE("run_ahead: a long straight line, and the cache", "[run_ahead]") {
  AccessDecoder dec;
  user_regs_struct r = some_regs();
  // 1000 pushes and pops: spans several code chunks, each access computed.
  std::vector<Insn> seq;
  for (int i = 0; i < 500; ++i) seq.push_back({{0x53}, "push rbx"});
  for (int i = 0; i < 500; ++i) seq.push_back({{0x41, 0x5c}, "pop r12"});
  seq.push_back({{0xc3}, "ret"});
  Image img(r.rip, seq, 8192);
  std::vector<RunAheadStep> trace;
  RunAhead ra = dec.run_ahead(r, img.reader(), {}, 2000, &trace);
  CHECK(ra.why == Why::ControlFlow);
  CHECK(ra.insns == 1000);
  REQUIRE(trace.size() == 1001);
  CHECK(trace[499].accesses[0].addr == r.rsp - 500 * 8);
  CHECK(trace[999].accesses[0].addr == r.rsp - 8);
  CHECK((trace[1000].known & (1u << 4)));  // rsp is back
  CHECK(trace[1000].regs.rsp == r.rsp);
  ra = dec.run_ahead(r, img.reader(), {});
  CHECK(ra.why == Why::Limit);
  CHECK(ra.insns == 512);
  AccessDecoderStats before = dec.stats();
  ra = dec.run_ahead(r, img.reader(), {}, 2000);
  CHECK(dec.stats().decodes == before.decodes);  // every recipe came from the cache
  // Changed code bytes are decoded again, not taken from the cache.
  img.bytes[3] = 0xc3;
  ra = dec.run_ahead(r, img.reader(), {}, 2000);
  CHECK(ra.why == Why::ControlFlow);
  CHECK(ra.insns == 3);
}

TEST_CASE("run_ahead: random code and registers never crash and give consistent answers", "[run_ahead]") {
  AccessDecoder dec;
  std::mt19937_64 rng(99);
  std::vector<RunAheadStep> trace;
  for (int n = 0; n < 3000; ++n) {
    user_regs_struct r{};
    for (int g = 0; g < 16; ++g) gpr(r, g) = rng() % 3 ? rng() : rng() % 0x1000;
    r.rip = rng() % 2 ? kAt : ~uint64_t{0} - rng() % 64;  // also at the very top of the address space
    r.fs_base = rng();
    std::vector<uint8_t> bytes(rng() % 200);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() % 3 ? rng() : 0x90);
    auto read = [&](uint64_t addr, std::span<uint8_t> out) -> size_t {
      if (addr < r.rip || addr - r.rip >= bytes.size()) return 0;
      size_t k = std::min<size_t>(out.size(), bytes.size() - (addr - r.rip));
      std::memcpy(out.data(), bytes.data() + (addr - r.rip), k);
      return k;
    };
    auto max = static_cast<uint32_t>(rng() % 64);
    uint64_t hits = 0;
    RunAhead ra = dec.run_ahead(r, read, [&](const MemAccess&) { return rng() % 8 == 0 && ++hits; }, max, &trace);
    INFO("case " << n);
    REQUIRE(ra.insns <= max);
    REQUIRE(trace.size() == ra.insns + (ra.why != Why::Limit));
    if (!trace.empty()) REQUIRE(trace[0].addr == r.rip);
    if (ra.insns == 0) REQUIRE(ra.stop == r.rip);
    for (size_t i = 0; i + 1 < trace.size(); ++i) REQUIRE(trace[i + 1].addr - trace[i].addr <= 15);
    if (ra.why == Why::Touches) REQUIRE(hits > 0);
    if (ra.why != Why::Limit) REQUIRE(ra.stop == trace.back().addr);
  }
}

// --- the CPU: a child that runs paths one single step at a time ---------------------------------

constexpr uint64_t kData = 0x20000000;  // scratch (RW); below 4 GiB so 32-bit results stay pointers
constexpr uint64_t kDataSize = 0x10000;
constexpr uint64_t kCode = 0x30000000;          // the code page (RX)
constexpr uint64_t kCodeData = kCode + 0x1000;  // a RW page right after it: rip-relative data
constexpr uint64_t kFsBase = kData + 0x1000, kGsBase = kData + 0x2000;

// Scratch contents: every quadword is a pointer into the scratch area (most of them aligned),
// so pointers loaded from memory can be followed by the next instructions.
uint64_t data_qword(uint64_t addr) {
  uint64_t h = (addr >> 3) * 0x9e3779b97f4a7c15ull;
  h ^= h >> 29;
  uint64_t p = kData + 0x2000 + h % (kDataSize - 0x4000);
  return (h >> 63) ? p : p & ~uint64_t{7};
}

std::vector<uint8_t> data_image(uint64_t base, size_t size) {
  std::vector<uint8_t> out(size);
  for (size_t i = 0; i < size; i += 8) {
    uint64_t q = data_qword(base + i);
    std::memcpy(out.data() + i, &q, 8);
  }
  return out;
}

// What the CPU did at one step: the registers before it and the accesses decode() gives for
// them (verified against the CPU by test_access_decoder_table.cc).
struct TrueStep {
  user_regs_struct regs{};
  InsnAccesses acc;
};

class Lab {
 public:
  Lab() {
    pid_ = fork();
    if (pid_ == 0) {
      ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      auto map = [](uint64_t at, size_t size, int prot) {
        return mmap(reinterpret_cast<void*>(at), size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) ==
               reinterpret_cast<void*>(at);
      };
      if (!map(kData, kDataSize, PROT_READ | PROT_WRITE) || !map(kCode, 0x1000, PROT_READ | PROT_EXEC) ||
          !map(kCodeData, 0x1000, PROT_READ | PROT_WRITE))
        _exit(90);
      raise(SIGSTOP);
      _exit(91);  // never reached: the tracer moves rip into the code page
    }
    REQUIRE(pid_ > 0);
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    REQUIRE(WIFSTOPPED(status));
    REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &base_) == 0);
    mem_ = open(("/proc/" + std::to_string(pid_) + "/mem").c_str(), O_RDWR);
    REQUIRE(mem_ >= 0);
  }
  ~Lab() {
    if (mem_ >= 0) close(mem_);
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Lab(const Lab&) = delete;
  Lab& operator=(const Lab&) = delete;

  void write(uint64_t addr, const std::vector<uint8_t>& bytes) {
    REQUIRE(pwrite(mem_, bytes.data(), bytes.size(), static_cast<off_t>(addr)) == static_cast<ssize_t>(bytes.size()));
  }
  // The code page, and fresh scratch contents (earlier paths wrote to them).
  void load(const Image& img) {
    REQUIRE(img.base == kCode);
    REQUIRE(img.bytes.size() == 0x1000);
    write(kCode, img.bytes);
    write(kData, data_image(kData, kDataSize));
    write(kCodeData, data_image(kCodeData, 0x1000));
  }

  // Registers for a path: the child's own, with the GPRs, eflags and fs/gs bases of `r`.
  user_regs_struct with(const user_regs_struct& r) const {
    user_regs_struct u = base_;
    for (int n = 0; n < 16; ++n) gpr(u, n) = gpr(r, n);
    u.rip = r.rip;
    u.eflags = r.eflags;
    u.fs_base = r.fs_base;
    u.gs_base = r.gs_base;
    return u;
  }

  // Single-steps from `regs` until rip == end (not run), a signal other than the step's trap
  // (the faulting instruction is the last step), or max_steps. Each step's code bytes come from
  // `img` (the path never leaves the code page).
  std::vector<TrueStep> run(const user_regs_struct& regs, const Image& img, uint64_t end, AccessDecoder& truth,
                            size_t max_steps = 4096) {
    std::vector<TrueStep> path;
    user_regs_struct cur = with(regs);
    REQUIRE(ptrace(PTRACE_SETREGS, pid_, nullptr, &cur) == 0);
    REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &cur) == 0);
    std::array<uint8_t, 16> code{};
    for (;;) {
      TrueStep& step = path.emplace_back();
      step.regs = cur;
      size_t got = img.reader()(cur.rip, code);
      truth.decode(std::span<const uint8_t>(code.data(), got), cur, step.acc);
      if (cur.rip == end || path.size() >= max_steps) break;
      int status = cpuid_step::single_step(pid_, std::span<const uint8_t>(code.data(), got));
      REQUIRE(status != -1);
      REQUIRE(WIFSTOPPED(status));
      if (WSTOPSIG(status) != SIGTRAP) break;  // a fault: the path ends at the faulting instruction
      REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &cur) == 0);
    }
    return path;
  }

  // One instruction: the registers after a single step from `regs`, or the signal it raised.
  int step_once(const user_regs_struct& regs, std::span<const uint8_t> code, user_regs_struct& after) {
    user_regs_struct cur = with(regs);
    REQUIRE(ptrace(PTRACE_SETREGS, pid_, nullptr, &cur) == 0);
    int status = cpuid_step::single_step(pid_, code);
    REQUIRE(status != -1);
    REQUIRE(WIFSTOPPED(status));
    REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &after) == 0);
    return WSTOPSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int mem_ = -1;
  user_regs_struct base_{};
};

// Registers for a path in the lab: every GPR points into the scratch area, rsp near its top.
user_regs_struct lab_regs(std::mt19937_64& rng) {
  user_regs_struct r{};
  for (int n = 0; n < 16; ++n) {
    uint64_t v = kData + 0x3000 + rng() % 0xa000;
    gpr(r, n) = rng() % 10 ? v & ~uint64_t{7} : v;
  }
  r.rsp = kData + 0xf000 - 8 * (rng() % 16);
  r.rbp = r.rsp + 0x40;
  r.rip = kCode;
  r.eflags = 0x202 | (rng() & 0x8d5);  // random CF PF AF ZF SF OF (for cmov/setcc), DF clear
  r.fs_base = kFsBase;
  r.gs_base = kGsBase;
  return r;
}

// Counts over many walks; a test requires zero failures and that the walks did something.
struct Tally {
  size_t walks = 0, walked = 0, failures = 0, touch_checks = 0, limit_checks = 0;
  std::map<Why, size_t> why;
  std::string first_failures;  // the first few, in full

  void fail(const std::string& what) {
    if (++failures <= 5) first_failures += what + "\n\n";
  }
  std::string summary() const {
    std::string s = std::to_string(walks) + " walks, " + std::to_string(walked) + " instructions walked, " +
                    std::to_string(touch_checks) + " touch checks, " + std::to_string(limit_checks) + " limit checks;";
    for (const auto& [w, n] : why) s += std::string(" ") + why_name(w) + " " + std::to_string(n);
    return s;
  }
};

std::string listing(const std::vector<TrueStep>& path, size_t t, const std::vector<RunAheadStep>& trace,
                    const RunAhead& ra) {
  std::string s = "walk from step " + std::to_string(t) + ": stop " + hex(ra.stop) + " after " +
                  std::to_string(ra.insns) + " (" + why_name(ra.why) + ")\n";
  for (size_t i = 0; i < trace.size(); ++i) {
    s += "  " + hex(trace[i].addr) + (i < ra.insns ? " walked " : " stop   ") +
         (trace[i].computed ? describe(trace[i].accesses) : std::string("-"));
    if (t + i < path.size())
      s += " | cpu " + hex(path[t + i].regs.rip) + " " +
           (path[t + i].acc.exact ? describe(path[t + i].acc.accesses) : std::string("inexact"));
    s += "\n";
  }
  return s;
}

// Checks the walk from path[t] against what the CPU did from there (see the file comment).
void check_walk(AccessDecoder& dec, const std::vector<TrueStep>& path, size_t t, const CodeBytesReader& read,
                std::mt19937_64& rng, Tally& tally) {
  std::vector<RunAheadStep> trace;
  RunAhead ra = dec.run_ahead(path[t].regs, read, {}, 512, &trace);
  ++tally.walks;
  tally.walked += ra.insns;
  ++tally.why[ra.why];
  auto fail = [&](const std::string& what) { tally.fail(what + "\n" + listing(path, t, trace, ra)); };
  if (trace.size() != ra.insns + (ra.why != Why::Limit)) return fail("trace size " + std::to_string(trace.size()));
  if (ra.stop != (ra.why == Why::Limit ? ra.stop : trace.back().addr)) return fail("stop is not the last traced");
  for (size_t i = 0; i < trace.size() && t + i < path.size(); ++i) {
    const user_regs_struct& real = path[t + i].regs;
    const RunAheadStep& w = trace[i];
    if (w.addr != real.rip) return fail("step " + std::to_string(i) + ": the CPU went to " + hex(real.rip));
    if (w.regs.fs_base != real.fs_base || w.regs.gs_base != real.gs_base) return fail("fs/gs base differ");
    for (int n = 0; n < 16; ++n)
      if ((w.known >> n & 1) && gpr(w.regs, n) != gpr(real, n))
        return fail("step " + std::to_string(i) + ": the walk says " + kGprName[n] + " = " + hex(gpr(w.regs, n)) +
                    ", the CPU has " + hex(gpr(real, n)));
    if (i < ra.insns) {
      if (!w.computed || !path[t + i].acc.exact) return fail("step " + std::to_string(i) + ": walked but not exact");
      if (!same_accesses(w.accesses, path[t + i].acc.accesses))
        return fail("step " + std::to_string(i) + ": accesses differ");
    }
  }
  if (t + ra.insns < path.size() && path[t + ra.insns].regs.rip != ra.stop) return fail("the CPU did not reach stop");

  // A predicate on an access of a walked instruction: the walk stops at the first instruction
  // whose true accesses satisfy it.
  std::vector<std::pair<size_t, size_t>> candidates;  // (walk index, access index)
  for (size_t i = 0; i < ra.insns && t + i < path.size(); ++i)
    for (size_t j = 0; j < path[t + i].acc.accesses.size(); ++j) candidates.emplace_back(i, j);
  if (!candidates.empty()) {
    auto [k, j] = candidates[rng() % candidates.size()];
    MemAccess region = path[t + k].acc.accesses[j];
    // Sometimes only part of it, sometimes only writes.
    if (region.size > 1 && rng() % 2) {
      uint32_t off = static_cast<uint32_t>(rng() % region.size);
      region.addr += off;
      region.size = 1;
    }
    bool writes_only = region.write && rng() % 2;
    auto hit = [&](const MemAccess& a) { return overlaps(a, region) && (!writes_only || a.write); };
    size_t first = k;
    for (size_t i = 0; i <= k; ++i)
      if (std::any_of(path[t + i].acc.accesses.begin(), path[t + i].acc.accesses.end(), hit)) {
        first = i;
        break;
      }
    RunAhead r2 = dec.run_ahead(path[t].regs, read, hit);
    ++tally.touch_checks;
    if (r2.why != Why::Touches || r2.insns != first || r2.stop != path[t + first].regs.rip)
      return fail("touching " + describe({region}) + (writes_only ? " (writes)" : "") + ": expected a stop after " +
                  std::to_string(first) + ", got " + hex(r2.stop) + " after " + std::to_string(r2.insns) + " (" +
                  why_name(r2.why) + ")");
  }
  if (ra.insns > 0) {
    auto max = static_cast<uint32_t>(rng() % (ra.insns + 1));
    RunAhead r3 = dec.run_ahead(path[t].regs, read, {}, max);
    ++tally.limit_checks;
    if (r3.why != Why::Limit || r3.insns != max || r3.stop != trace[max].addr)
      return fail("limit " + std::to_string(max) + ": got " + hex(r3.stop) + " after " + std::to_string(r3.insns) +
                  " (" + why_name(r3.why) + ")");
  }
}

// Runs `insns` in the lab from `regs` (up to the last instruction, which is not run) and checks
// the walk from every step of the path.
std::vector<TrueStep> check_on_cpu(Lab& lab, AccessDecoder& dec, const std::vector<Insn>& insns,
                                   const user_regs_struct& regs, std::mt19937_64& rng, Tally& tally) {
  Image img(kCode, insns);
  lab.load(img);
  AccessDecoder truth;
  std::vector<TrueStep> path = lab.run(regs, img, img.starts[insns.size() - 1], truth);
  for (size_t t = 0; t < path.size(); ++t) check_walk(dec, path, t, img.reader(), rng, tally);
  return path;
}

// Hand-written sequences: what compilers emit around locals, frames, globals and TLS. Each is
// run to its last instruction (which the CPU does not run); `stop`/`why`: the verdict from the
// entry registers.
struct HandSeq {
  const char* name;
  std::vector<Insn> insns;
  uint32_t stop;
  Why why;
  bool runs_through = true;  // false: the CPU may fault on the way (cpuid leaves rbx a non-pointer)
};

const std::vector<HandSeq>& hand_sequences() {
  static const std::vector<HandSeq> seqs = {
      {"-O0 prologue, then a pointer loaded from the frame",
       {{{0x55}, "push rbp"},
        {{0x48, 0x89, 0xe5}, "mov rbp,rsp"},
        {{0x48, 0x83, 0xec, 0x30}, "sub rsp,0x30"},
        {{0x48, 0x89, 0x7d, 0xe8}, "mov QWORD PTR [rbp-0x18],rdi"},
        {{0x89, 0x75, 0xe0}, "mov DWORD PTR [rbp-0x20],esi"},
        {{0x48, 0xc7, 0x45, 0xf8, 0x00, 0x00, 0x00, 0x00}, "mov QWORD PTR [rbp-0x8],0x0"},
        {{0x48, 0x8b, 0x45, 0xe8}, "mov rax,QWORD PTR [rbp-0x18]"},
        {{0x8b, 0x00}, "mov eax,DWORD PTR [rax]"},
        {{0xcc}, "int3"}},
       7, Why::Unknown},
      {"-O0 locals, lea of a local, a pointer from memory",
       {{{0x55}, "push rbp"},
        {{0x48, 0x89, 0xe5}, "mov rbp,rsp"},
        {{0xc7, 0x45, 0xfc, 0x07, 0x00, 0x00, 0x00}, "mov DWORD PTR [rbp-0x4],0x7"},
        {{0x8b, 0x45, 0xfc}, "mov eax,DWORD PTR [rbp-0x4]"},
        {{0x83, 0xc0, 0x01}, "add eax,0x1"},
        {{0x89, 0x45, 0xf8}, "mov DWORD PTR [rbp-0x8],eax"},
        {{0x48, 0x8d, 0x45, 0xf0}, "lea rax,[rbp-0x10]"},
        {{0x48, 0x89, 0x18}, "mov QWORD PTR [rax],rbx"},
        {{0x48, 0x8b, 0x55, 0xf0}, "mov rdx,QWORD PTR [rbp-0x10]"},
        {{0x48, 0x89, 0x4a, 0x08}, "mov QWORD PTR [rdx+0x8],rcx"},
        {{0xcc}, "int3"}},
       9, Why::Unknown},
      {"push/pop and stores around rsp",
       {{{0x53}, "push rbx"},
        {{0x41, 0x54}, "push r12"},
        {{0x48, 0x89, 0x04, 0x24}, "mov QWORD PTR [rsp],rax"},
        {{0x48, 0x89, 0x4c, 0x24, 0x08}, "mov QWORD PTR [rsp+0x8],rcx"},
        {{0xff, 0x74, 0x24, 0x08}, "push QWORD PTR [rsp+0x8]"},
        {{0x8f, 0x44, 0x24, 0x08}, "pop QWORD PTR [rsp+0x8]"},
        {{0x6a, 0xf0}, "push -0x10"},
        {{0x9c}, "pushfq"},
        {{0x0f, 0xa0}, "push fs"},
        {{0x48, 0x83, 0xc4, 0x18}, "add rsp,0x18"},
        {{0x41, 0x5c}, "pop r12"},
        {{0x5b}, "pop rbx"},
        {{0x48, 0x89, 0x54, 0x24, 0xf0}, "mov QWORD PTR [rsp-0x10],rdx"},
        {{0xc3}, "ret"}},
       13, Why::ControlFlow},
      {"sub rsp, then stores to the new frame",
       {{{0x48, 0x83, 0xec, 0x28}, "sub rsp,0x28"},
        {{0x48, 0x89, 0x44, 0x24, 0x08}, "mov QWORD PTR [rsp+0x8],rax"},
        {{0x48, 0xc7, 0x44, 0x24, 0x10, 0x05, 0x00, 0x00, 0x00}, "mov QWORD PTR [rsp+0x10],0x5"},
        {{0x48, 0x8d, 0x7c, 0x24, 0x10}, "lea rdi,[rsp+0x10]"},
        {{0x48, 0x89, 0x1f}, "mov QWORD PTR [rdi],rbx"},
        {{0x48, 0x81, 0xc4, 0x28, 0x00, 0x00, 0x00}, "add rsp,0x28"},
        {{0x48, 0x8b, 0x04, 0x24}, "mov rax,QWORD PTR [rsp]"},
        {{0xe8, 0x00, 0x00, 0x00, 0x00}, "call .+5"}},
       7, Why::ControlFlow},
      {"rip-relative globals",
       {{{0x48, 0x8b, 0x05, 0x00, 0x10, 0x00, 0x00}, "mov rax,QWORD PTR [rip+0x1000]"},
        {{0x48, 0x89, 0x1d, 0x08, 0x10, 0x00, 0x00}, "mov QWORD PTR [rip+0x1008],rbx"},
        {{0x48, 0x8d, 0x0d, 0x13, 0x10, 0x00, 0x00}, "lea rcx,[rip+0x1013]"},  // kCodeData + 0x28
        {{0x48, 0x89, 0x51, 0x08}, "mov QWORD PTR [rcx+0x8],rdx"},
        {{0x83, 0x05, 0x20, 0x10, 0x00, 0x00, 0x01}, "add DWORD PTR [rip+0x1020],0x1"},
        {{0x48, 0x8b, 0x11}, "mov rdx,QWORD PTR [rcx]"},
        {{0x89, 0x02}, "mov DWORD PTR [rdx],eax"},
        {{0xcc}, "int3"}},
       6, Why::Unknown},
      {"TLS through fs",
       {{{0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00}, "mov rax,QWORD PTR fs:0x28"},
        {{0x64, 0x48, 0x89, 0x1c, 0x25, 0x10, 0x00, 0x00, 0x00}, "mov QWORD PTR fs:0x10,rbx"},
        {{0xb9, 0x18, 0x00, 0x00, 0x00}, "mov ecx,0x18"},
        {{0x64, 0x48, 0x8b, 0x11}, "mov rdx,QWORD PTR fs:[rcx]"},
        {{0x65, 0x48, 0x89, 0x51, 0x08}, "mov QWORD PTR gs:[rcx+0x8],rdx"},
        {{0x64, 0x48, 0x8b, 0x0c, 0x25, 0x00, 0x00, 0x00, 0x00}, "mov rcx,QWORD PTR fs:0x0"},
        {{0x48, 0x8b, 0x51, 0x08}, "mov rdx,QWORD PTR [rcx+0x8]"},
        {{0xcc}, "int3"}},
       6, Why::Unknown},
      {"registers set from immediates",
       {{{0xb8, 0x05, 0x00, 0x00, 0x00}, "mov eax,0x5"},
        {{0x8b, 0x1c, 0x85, 0x00, 0x01, 0x00, 0x20}, "mov ebx,DWORD PTR [rax*4+0x20000100]"},
        {{0xb9, 0x40, 0x00, 0x00, 0x20}, "mov ecx,0x20000040"},
        {{0x89, 0x59, 0x08}, "mov DWORD PTR [rcx+0x8],ebx"},
        {{0x48, 0xba, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00}, "movabs rdx,0x20000200"},
        {{0x48, 0x89, 0x02}, "mov QWORD PTR [rdx],rax"},
        {{0x48, 0xc7, 0xc6, 0xf8, 0xff, 0xff, 0xff}, "mov rsi,0xfffffffffffffff8"},
        {{0x48, 0x89, 0x0c, 0x72}, "mov QWORD PTR [rdx+rsi*2],rcx"},
        {{0x45, 0x31, 0xc0}, "xor r8d,r8d"},
        {{0x4a, 0x89, 0x74, 0xc2, 0x20}, "mov QWORD PTR [rdx+r8*8+0x20],rsi"},
        {{0x4d, 0x29, 0xc9}, "sub r9,r9"},
        {{0x66, 0x41, 0xb9, 0x10, 0x00}, "mov r9w,0x10"},
        {{0x4a, 0x89, 0x04, 0x0a}, "mov QWORD PTR [rdx+r9*1],rax"},
        {{0xcc}, "int3"}},
       12, Why::Unknown},
      {"enter/leave",
       {{{0xc8, 0x20, 0x00, 0x00}, "enter 0x20,0x0"},
        {{0x48, 0x89, 0x45, 0xf8}, "mov QWORD PTR [rbp-0x8],rax"},
        {{0x48, 0x89, 0x1c, 0x24}, "mov QWORD PTR [rsp],rbx"},
        {{0xc9}, "leave"},
        {{0x48, 0x89, 0x0c, 0x24}, "mov QWORD PTR [rsp],rcx"},
        {{0xc3}, "ret"}},
       5, Why::ControlFlow},
      {"frame pointer moves",
       {{{0x55}, "push rbp"},
        {{0x48, 0x89, 0xe5}, "mov rbp,rsp"},
        {{0x48, 0x8d, 0x65, 0xc0}, "lea rsp,[rbp-0x40]"},
        {{0x48, 0x89, 0x7c, 0x24, 0x38}, "mov QWORD PTR [rsp+0x38],rdi"},
        {{0x48, 0x89, 0xec}, "mov rsp,rbp"},
        {{0x5d}, "pop rbp"},
        {{0x48, 0x89, 0x44, 0x24, 0xf8}, "mov QWORD PTR [rsp-0x8],rax"},
        {{0x0f, 0x05}, "syscall"}},
       7, Why::ControlFlow},
      {"counters and 32-bit arithmetic",
       {{{0x48, 0xff, 0xc7}, "inc rdi"},
        {{0x88, 0x07}, "mov BYTE PTR [rdi],al"},
        {{0xff, 0xce}, "dec esi"},
        {{0x88, 0x1e}, "mov BYTE PTR [rsi],bl"},
        {{0x48, 0x81, 0xc7, 0x00, 0x01, 0x00, 0x00}, "add rdi,0x100"},
        {{0x83, 0xef, 0x40}, "sub edi,0x40"},
        {{0x88, 0x4e, 0x10}, "mov BYTE PTR [rsi+0x10],cl"},
        {{0x48, 0x83, 0xc7, 0xff}, "add rdi,0xffffffffffffffff"},
        {{0x88, 0x17}, "mov BYTE PTR [rdi],dl"},
        {{0x89, 0xfa}, "mov edx,edi"},
        {{0x48, 0x89, 0xd0}, "mov rax,rdx"},
        {{0x66, 0x89, 0x48, 0x02}, "mov WORD PTR [rax+0x2],cx"},
        {{0xeb, 0x00}, "jmp .+2"}},
       12, Why::ControlFlow},
      {"a 32-bit copy, then an 8-bit write",
       {{{0x89, 0xcb}, "mov ebx,ecx"},
        {{0x89, 0x03}, "mov DWORD PTR [rbx],eax"},
        {{0xb0, 0x01}, "mov al,0x1"},
        {{0x89, 0x08}, "mov DWORD PTR [rax],ecx"},
        {{0xcc}, "int3"}},
       3, Why::Unknown},
      {"cqo writes rdx",
       {{{0x48, 0x89, 0x02}, "mov QWORD PTR [rdx],rax"}, {{0x48, 0x99}, "cqo"},
        {{0x48, 0x89, 0x04, 0x1a}, "mov QWORD PTR [rdx+rbx*1],rax"},
        {{0xcc}, "int3"}},
       2, Why::Unknown},
      {"cpuid writes rbx",
       {{{0x48, 0x89, 0x03}, "mov QWORD PTR [rbx],rax"}, {{0x0f, 0xa2}, "cpuid"}, {{0x48, 0x89, 0x03}, "mov QWORD PTR [rbx],rax"},
        {{0xcc}, "int3"}},
       2, Why::Unknown, false},
      {"movsb moves rsi and rdi",
       {{{0x48, 0x89, 0x06}, "mov QWORD PTR [rsi],rax"}, {{0xa4}, "movsb"}, {{0x48, 0x89, 0x07}, "mov QWORD PTR [rdi],rax"},
        {{0xcc}, "int3"}},
       2, Why::Unknown},
      {"xsave is not exact",
       {{{0x48, 0x89, 0x07}, "mov QWORD PTR [rdi],rax"}, {{0x0f, 0xae, 0x27}, "xsave [rdi]"}, {{0xcc}, "int3"}}, 1, Why::Unknown,
       false},  // (a CPU without XSAVE enabled faults)
      {"xchg swaps",
       {{{0x48, 0x89, 0x03}, "mov QWORD PTR [rbx],rax"}, {{0x48, 0x93}, "xchg rbx,rax"}, {{0x48, 0x89, 0x03}, "mov QWORD PTR [rbx],rax"},
        {{0xcc}, "int3"}},
       2, Why::Unknown},
      {"xlat, bt, cmpxchg, xadd on memory",
       {{{0xd7}, "xlat"},
        {{0x48, 0x0f, 0xba, 0x23, 0x05}, "bt QWORD PTR [rbx],0x5"},
        {{0x48, 0x0f, 0xb1, 0x0b}, "cmpxchg QWORD PTR [rbx],rcx"},
        {{0x48, 0x0f, 0xc1, 0x4b, 0x08}, "xadd QWORD PTR [rbx+0x8],rcx"},
        {{0x48, 0x89, 0x4e, 0x08}, "mov QWORD PTR [rsi+0x8],rcx"},
        {{0x48, 0x89, 0x01}, "mov QWORD PTR [rcx],rax"},
        {{0xcc}, "int3"}},
       5, Why::Unknown},
  };
  return seqs;
}

TEST_CASE("run_ahead: hand-written sequences, on the CPU", "[run_ahead]") {
  AccessDecoder dec;
  Lab lab;
  std::mt19937_64 rng(1);
  Tally tally;
  for (const HandSeq& seq : hand_sequences()) {
    INFO("sequence: " << seq.name);
    for (int round = 0; round < 8; ++round) {
      user_regs_struct r = lab_regs(rng);
      for (int n = 0; n < 16; ++n) gpr(r, n) &= ~uint64_t{7};  // pointers loaded through them are pointers
      r.rdi &= ~uint64_t{63};                                   // xsave wants 64-byte alignment
      expect_stop(dec, seq.insns, seq.stop, seq.why, r);
      std::vector<TrueStep> path = check_on_cpu(lab, dec, seq.insns, r, rng, tally);
      if (seq.runs_through) CHECK(path.back().regs.rip == Image(kCode, seq.insns).starts[seq.insns.size() - 1]);
    }
  }
  INFO(tally.first_failures);
  CHECK(tally.failures == 0);
  WARN(tally.summary());
}

// --- random sequences ---------------------------------------------------------------------------

// A memory operand for the encoder: base (-1: none, kRipBase: rip-relative to `target`), index
// (-1: none; never rsp), scale, displacement; seg: 0, 0x64 (fs) or 0x65 (gs).
constexpr int kRipBase = 16;
struct Mem {
  int base = -1, index = -1, scale = 1;
  int64_t disp = 0;
  uint8_t seg = 0;
};

// Encodes [legacy prefixes][REX][opcode][ModRM SIB disp][imm] for instruction forms with a reg
// field and an r/m operand that is a register (rm >= 0) or memory. `at`: the address of the
// instruction (for rip-relative targets).
std::vector<uint8_t> encode(uint64_t at, std::vector<uint8_t> prefixes, bool w, std::vector<uint8_t> opcode, int reg,
                            int rm, const Mem& m, std::vector<uint8_t> imm = {}, bool byte_regs = false) {
  std::vector<uint8_t> out;
  if (m.seg && rm < 0) out.push_back(m.seg);
  out.insert(out.end(), prefixes.begin(), prefixes.end());
  bool mem = rm < 0;
  int b = mem ? (m.base >= 0 && m.base != kRipBase ? m.base : 0) : rm;
  int x = mem && m.index >= 0 ? m.index : 0;
  uint8_t rex = static_cast<uint8_t>(0x40 | (w ? 8 : 0) | (reg & 8 ? 4 : 0) | (x & 8 ? 2 : 0) | (b & 8 ? 1 : 0));
  bool needs_rex = rex != 0x40 || (byte_regs && ((reg >= 4 && reg < 8) || (!mem && rm >= 4 && rm < 8)));
  if (needs_rex) out.push_back(rex);
  out.insert(out.end(), opcode.begin(), opcode.end());
  auto modrm = [&](int mod, int r, int rmf) { out.push_back(static_cast<uint8_t>(mod << 6 | (r & 7) << 3 | (rmf & 7))); };
  auto disp32 = [&](int64_t d) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(d) >> (8 * i)));
  };
  if (!mem) {
    modrm(3, reg, rm);
  } else if (m.base == kRipBase) {
    modrm(0, reg, 5);
    int64_t next = static_cast<int64_t>(at + out.size() + 4 + imm.size());
    disp32(m.disp - next);  // m.disp holds the absolute target
  } else {
    int sc = m.scale == 8 ? 3 : m.scale == 4 ? 2 : m.scale == 2 ? 1 : 0;
    uint8_t sib_index = static_cast<uint8_t>(m.index >= 0 ? (m.index & 7) : 4);
    if (m.base < 0) {
      modrm(0, reg, 4);
      out.push_back(static_cast<uint8_t>(sc << 6 | sib_index << 3 | 5));
      disp32(m.disp);
    } else {
      bool sib = m.index >= 0 || (m.base & 7) == 4;
      int mod = (m.disp == 0 && (m.base & 7) != 5) ? 0 : (m.disp >= -128 && m.disp <= 127) ? 1 : 2;
      modrm(mod, reg, sib ? 4 : m.base);
      if (sib) out.push_back(static_cast<uint8_t>(sc << 6 | sib_index << 3 | (m.base & 7)));
      if (mod == 1) out.push_back(static_cast<uint8_t>(m.disp));
      if (mod == 2) disp32(m.disp);
    }
  }
  out.insert(out.end(), imm.begin(), imm.end());
  return out;
}

std::vector<uint8_t> le(uint64_t v, int bytes) {
  std::vector<uint8_t> out;
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return out;
}

// Random straight-line code from a pool of register and memory instructions (what compilers
// emit, plus the corners of the register model), ending in a control-flow instruction.
class SeqGen {
 public:
  explicit SeqGen(uint64_t seed) : rng_(seed) {}

  std::vector<Insn> sequence(size_t n) {
    std::vector<Insn> out;
    uint64_t at = kCode;
    while (out.size() < n && at < kCode + 0xe00) {
      for (std::vector<uint8_t>& b : pick(at)) {
        at += b.size();
        out.push_back({std::move(b), "random"});
      }
    }
    static const std::vector<std::vector<uint8_t>> ends = {
        {0xeb, 0x00}, {0x74, 0x00}, {0xe8, 0, 0, 0, 0}, {0xc3}, {0x0f, 0x05}, {0xcc}, {0x0f, 0x0b}, {0xff, 0xe0},
        {0xe2, 0x00}, {0xe3, 0x00}, {0xff, 0x13}};
    out.push_back({ends[rng_() % ends.size()], "end"});
    return out;
  }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;

  int below(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
  // A destination: any GPR but rsp (rbp now and then).
  int dst() {
    static const int regs[] = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 5};
    return regs[below(chance(3) ? 15 : 14)];
  }
  int any_reg() { return below(16); }
  int index_reg() {
    int r;
    do r = below(16);
    while (r == 4);
    return r;
  }
  int64_t small_disp() {
    switch (below(4)) {
      case 0: return 0;
      case 1: return 8 * (below(17) - 8);
      case 2: return chance(20) ? below(256) - 128 : 8 * (below(32) - 16);
      default: return below(0x1000) - 0x800;
    }
  }
  // A memory operand; an indexed one is preceded (in pre_) by a small value moved into the index.
  Mem mem() {
    Mem m;
    int kind = below(20);
    if (kind == 0) {  // rip-relative: the data page after the code
      m.base = kRipBase;
      m.disp = static_cast<int64_t>(kCodeData + 8 * below(0x1f0));
    } else if (kind == 1) {  // fs:/gs: absolute
      m.seg = chance(70) ? 0x64 : 0x65;
      m.disp = 8 * below(0x100);
    } else if (kind == 2) {  // absolute
      m.disp = static_cast<int64_t>(kData + 0x100 + 8 * below(0x1000));
    } else {
      static const int bases[] = {3, 6, 7, 5, 4, 4, 5, 12, 13, 0, 1, 2, 8, 9, 14, 15};
      m.base = bases[below(16)];
      m.disp = small_disp();
      if (chance(25)) {
        m.index = index_reg();
        m.scale = 1 << below(4);
        if (chance(50)) m.base = -1, m.disp = static_cast<int64_t>(kData + 0x4000 + below(0x1000));
        if (m.index != m.base && chance(90)) {  // mov r32, small
          if (m.index & 8) pre_.push_back(0x41);
          pre_.push_back(static_cast<uint8_t>(0xb8 + (m.index & 7)));
          auto v = le(static_cast<uint64_t>(below(64)), 4);
          pre_.insert(pre_.end(), v.begin(), v.end());
        }
      }
      if (chance(5)) m.seg = 0x64;
    }
    return m;
  }
  uint64_t imm_value() {
    switch (below(8)) {
      case 0: return static_cast<uint64_t>(below(256));
      case 1: return static_cast<uint64_t>(-static_cast<int64_t>(below(256)));
      case 2: return rng_();
      case 3: return 0xffffffffu;
      default: return kData + 0x3000 + 8 * static_cast<uint64_t>(below(0x1000));
    }
  }
  // An immediate for an add/sub: small steps for rsp.
  uint64_t step_value(int reg) { return reg == 4 ? static_cast<uint64_t>(8 * (below(9) - 4)) : imm_value(); }

  std::vector<uint8_t> pre_;  // instructions that prepare the next one (index registers)

  std::vector<std::vector<uint8_t>> pick(uint64_t at) {
    pre_.clear();
    Mem m = mem();  // the memory operand, for the forms that take one
    std::vector<std::vector<uint8_t>> out;
    if (!pre_.empty()) {
      out.push_back(pre_);
      at += pre_.size();
    }
    for (std::vector<uint8_t>& b : one(at, m)) out.push_back(std::move(b));
    return out;
  }

  std::vector<std::vector<uint8_t>> one(uint64_t at, const Mem& m) {
    const Mem none;
    int r = dst(), r2 = any_reg();
    auto mem = [&m] { return m; };
    switch (below(46)) {
      case 0: return {encode(at, {}, true, {0x8b}, r, -1, mem())};         // mov r64, m
      case 1: return {encode(at, {}, true, {0x89}, r2, -1, mem())};        // mov m, r64
      case 2: return {encode(at, {}, false, {0x8b}, r, -1, mem())};        // mov r32, m
      case 3: return {encode(at, {}, false, {0x89}, r2, -1, mem())};       // mov m, r32
      case 4: {                                                            // ALU r, m / m, r
        static const uint8_t ops[] = {0x03, 0x01, 0x29, 0x2b, 0x23, 0x09, 0x33, 0x39, 0x3b, 0x85, 0x11, 0x19};
        return {encode(at, {}, chance(80), {ops[below(12)]}, chance(50) ? r : r2, -1, mem())};
      }
      case 5: return {encode(at, {}, true, {0x89}, r2, r, none)};          // mov r64, r64
      case 6: return {encode(at, {}, false, {0x89}, r2, r, none)};         // mov r32, r32
      case 7: {                                                            // add/sub/and/or/xor/cmp r, imm8
        static const int ext[] = {0, 5, 4, 1, 6, 7};
        int d = chance(10) ? 4 : r;
        return {encode(at, {}, chance(70) || d == 4, {0x83}, d == 4 ? 5 * below(2) : ext[below(6)], d, none,
                       le(step_value(d), 1))};
      }
      case 8: {                                                            // add/sub r, imm32
        int d = chance(10) ? 4 : r;
        return {encode(at, {}, chance(70) || d == 4, {0x81}, chance(50) ? 0 : 5, d, none, le(step_value(d), 4))};
      }
      case 9: {                                                            // mov r32, imm32 / r64, simm32 / movabs
        uint64_t v = imm_value();
        std::vector<uint8_t> b;
        if (chance(33)) {
          if (r & 8) b.push_back(0x41);
          b.push_back(static_cast<uint8_t>(0xb8 + (r & 7)));
          auto i = le(v, 4);
          b.insert(b.end(), i.begin(), i.end());
          return {b};
        }
        if (chance(50)) return {encode(at, {}, true, {0xc7}, 0, r, none, le(v, 4))};
        b.push_back(static_cast<uint8_t>(0x48 | (r & 8 ? 1 : 0)));
        b.push_back(static_cast<uint8_t>(0xb8 + (r & 7)));
        auto i = le(v, 8);
        b.insert(b.end(), i.begin(), i.end());
        return {b};
      }
      case 10: return {encode(at, {}, chance(75), {0x8d}, r, -1, mem())};  // lea
      case 11: {                                                           // push/pop r64
        std::vector<uint8_t> b;
        int reg = chance(50) ? r2 : r;
        if (reg & 8) b.push_back(0x41);
        b.push_back(static_cast<uint8_t>((chance(55) ? 0x50 : 0x58) + (reg & 7)));
        return {b};
      }
      case 12: return {chance(50) ? std::vector<uint8_t>{0x6a, static_cast<uint8_t>(below(256))}
                                  : [&] { auto b = le(imm_value(), 4); b.insert(b.begin(), 0x68); return b; }()};
      case 13: return {encode(at, {}, false, {0xff}, 6, -1, mem())};       // push m64
      case 14: return {encode(at, {}, false, {0x8f}, 0, -1, mem())};       // pop m64
      case 15: return {encode(at, {}, chance(70), {0xff}, below(2), chance(5) ? 4 : r, none)};  // inc/dec
      case 16: return {encode(at, {}, chance(50), {chance(50) ? uint8_t{0x31} : uint8_t{0x29}}, r, r, none)};  // zeroing
      case 17: return {encode(at, {}, false, {0x0f, 0xb6}, r, -1, mem())};  // movzx r32, m8
      case 18: return {encode(at, {}, true, {0x63}, r, -1, mem())};         // movsxd r64, m32
      case 19: return {encode(at, {}, true, {0x0f, 0xaf}, r, r2, none)};    // imul r64, r64
      case 20: {                                                            // shifts
        static const int ext[] = {4, 5, 7, 0, 1};
        return {encode(at, {}, chance(70), {0xc1}, ext[below(5)], r, none, {static_cast<uint8_t>(below(64))})};
      }
      case 21: return {encode(at, {}, true, {0x87}, r2, r, none)};          // xchg r64, r64
      case 22: return {encode(at, chance(30) ? std::vector<uint8_t>{0xf0} : std::vector<uint8_t>{}, true,
                              {0x0f, chance(50) ? uint8_t{0xc1} : uint8_t{0xb1}}, r2, -1, mem())};  // xadd / cmpxchg m
      case 23: {
        static const std::vector<std::vector<uint8_t>> one = {{0x99}, {0x48, 0x99}, {0x48, 0x98}, {0x98}, {0x9f},
                                                              {0x9e}, {0xd7}, {0x90}, {0xf3, 0x0f, 0x1e, 0xfa},
                                                              {0x0f, 0x1f, 0x44, 0x00, 0x00}, {0xfc}, {0xf8}, {0xf5}};
        return {one[below(static_cast<int>(one.size()))]};
      }
      case 24: return {encode(at, {}, false, {0x0f, static_cast<uint8_t>(0x90 + below(16))}, 0, r, none, {}, true)};  // setcc
      case 25: return {encode(at, {}, chance(70), {0x0f, static_cast<uint8_t>(0x40 + below(16))}, r, chance(50) ? -1 : r2,
                              mem())};  // cmovcc
      case 26: {                                                            // string ops, one element
        static const std::vector<std::vector<uint8_t>> str = {{0xa4}, {0x48, 0xa5}, {0xa5}, {0x48, 0xab}, {0xaa},
                                                              {0x48, 0xad}, {0xac}, {0xa6}, {0xae}, {0x48, 0xaf}};
        return {str[below(static_cast<int>(str.size()))]};
      }
      case 27: {                                                            // mov ecx, small; rep stos/movs
        std::vector<uint8_t> count = {0xb9};
        auto c = le(static_cast<uint64_t>(below(4)), 4);
        count.insert(count.end(), c.begin(), c.end());
        static const std::vector<std::vector<uint8_t>> rep = {{0xf3, 0xaa}, {0xf3, 0x48, 0xab}, {0xf3, 0xa4}, {0xf3, 0xa6}};
        return {count, rep[below(4)]};
      }
      case 28: {                                                            // enter n, 0 / leave
        if (chance(50)) return {{0xc9}};
        return {{0xc8, static_cast<uint8_t>(8 * below(16)), 0x00, 0x00}};
      }
      case 29: return {encode(at, {}, true, {0x0f, 0xba}, 4 + below(4), -1, mem(), {static_cast<uint8_t>(below(64))})};  // bt* m, imm
      case 30: {                                                            // SSE loads/stores/moves
        switch (below(5)) {
          case 0: return {encode(at, {0xf3}, false, {0x0f, 0x6f}, below(8), -1, mem())};
          case 1: return {encode(at, {0xf3}, false, {0x0f, 0x7f}, below(8), -1, mem())};
          case 2: return {encode(at, {0x66}, true, {0x0f, 0x6e}, below(8), r2, none)};        // movq xmm, r64
          case 3: return {encode(at, {0x66}, false, {0x0f, 0x7e}, below(8), r, none)};        // movd r32, xmm
          default: return {encode(at, {0x66}, false, {0x0f, 0xc5}, r, below(8), none, {static_cast<uint8_t>(below(8))})};
        }
      }
      case 31: return {chance(50) ? std::vector<uint8_t>{0x0f, 0x31} : std::vector<uint8_t>{0x0f, 0xa2}};  // rdtsc, cpuid
      case 32: return {encode(at, {}, true, {0xf7}, 2 + below(3), chance(50) ? r2 : -1, mem())};  // not/neg/mul
      case 33: {                                                            // stack frames
        switch (below(6)) {
          case 0: return {chance(80) ? std::vector<uint8_t>{0x48, 0x83, 0xec, static_cast<uint8_t>(8 * below(16))}  // sub rsp, imm8
                                     : std::vector<uint8_t>{0x48, 0x83, 0xe4, 0xf0}};                          // and rsp, -16
          case 1: return {{0x48, 0x83, 0xc4, static_cast<uint8_t>(8 * below(8))}};   // add rsp, imm8
          case 2: return {{0x48, 0x89, 0xe5}};                                       // mov rbp, rsp
          case 3: return {{0x48, 0x89, 0xec}};                                       // mov rsp, rbp
          case 4: return {{0x48, 0x8d, 0x64, 0x24, static_cast<uint8_t>(8 * (below(16) - 8))}};  // lea rsp, [rsp+d]
          default: return {{0x48, 0x8d, 0x65, static_cast<uint8_t>(8 * (below(16) - 12))}};     // lea rsp, [rbp+d]
        }
      }
      case 34: return {encode(at, {}, true, {0x0f, static_cast<uint8_t>(0xc8 + (r & 7))}, 0, -1, none).size() ? 
                       std::vector<uint8_t>{static_cast<uint8_t>(0x48 | (r & 8 ? 1 : 0)), 0x0f, static_cast<uint8_t>(0xc8 + (r & 7))}
                       : std::vector<uint8_t>{}};  // bswap r64
      case 35: return {{0x9c}, chance(80) ? std::vector<uint8_t>{0x48, 0x83, 0xc4, 0x08} : std::vector<uint8_t>{0x9d}};  // pushfq; add rsp,8 | popfq
      case 36: {                                                            // 8/16-bit register writes
        switch (below(4)) {
          case 0: return {{static_cast<uint8_t>(0xb0 + below(8)), static_cast<uint8_t>(below(256))}};  // mov r8, imm8 (al..bh)
          case 1: return {encode(at, {0x66}, false, {0xb8}, 0, -1, none).size() ?
                          std::vector<uint8_t>{0x66, static_cast<uint8_t>(0xb8 + below(8)), static_cast<uint8_t>(below(256)), 0x00}
                          : std::vector<uint8_t>{}};
          case 2: return {encode(at, {}, false, {0x8a}, below(8), -1, mem(), {}, false)};  // mov r8, m8
          default: return {encode(at, {0x66}, false, {0x83}, 0, r, none, {static_cast<uint8_t>(below(256))})};  // add r16, imm8
        }
      }
      case 37: return {encode(at, {}, false, {0x0f, 0x18}, 1, -1, mem())};  // prefetcht0
      case 38: return {{0x0f, 0xa0}, {0x0f, 0xa8}, chance(50) ? std::vector<uint8_t>{0x48, 0x83, 0xc4, 0x10}
                                                                : std::vector<uint8_t>{0x41, 0x58}};  // push fs; push gs
      case 39: {                                                            // lea of the stack into a register, then use it
        int d = dst();
        return {encode(at, {}, true, {0x8d}, d, -1, Mem{4, -1, 1, 8 * (below(16) - 8), 0}),
                encode(at, {}, true, {0x89}, r2, -1, Mem{d, -1, 1, 8 * below(4), 0})};
      }
      case 40: {                                                            // load a pointer, dereference it
        int d = dst();
        return {encode(at, {}, true, {0x8b}, d, -1, mem()), encode(at, {}, true, {0x8b}, r, -1, Mem{d, -1, 1, 0, 0})};
      }
      case 41: return {encode(at, {}, true, {0x8b}, r, -1, Mem{kRipBase, -1, 1, static_cast<int64_t>(kCodeData + 8 * below(0x1f0)), 0})};
      case 42: return {encode(at, {0xc4, 0xe2, static_cast<uint8_t>(0xf3 & ~(below(16) << 3))}, false, {0xf6}, r, r2, none).size() ?
                       std::vector<uint8_t>{0xc4, 0xe2, 0xf3, 0xf6, 0xc2} : std::vector<uint8_t>{}};  // mulx rax, rcx, rdx
      case 43: return {encode(at, {0x66}, false, {0x0f, 0x3a, 0x61}, 0, 1, none, {0x00})};  // pcmpestri xmm0, xmm1, 0
      default: {                                                           // a fresh pointer: mov r64, imm32 / lea r, [rsp+d]
        if (chance(50)) return {encode(at, {}, true, {0xc7}, 0, r, none, le(kData + 0x3000 + 8 * below(0x1000), 4))};
        return {encode(at, {}, true, {0x8d}, r, -1, Mem{4, -1, 1, 8 * (below(32) - 16), 0})};
      }
    }
  }
};

TEST_CASE("run_ahead: random sequences, on the CPU", "[run_ahead]") {
  AccessDecoder dec;
  Lab lab;
  SeqGen gen(42);
  Tally tally;
  size_t steps = 0, through = 0, insns = 0;
  const int kSequences = 1500;
  for (int n = 0; n < kSequences; ++n) {
    std::vector<Insn> seq = gen.sequence(10 + gen.rng()() % 50);
    user_regs_struct r = lab_regs(gen.rng());
    std::vector<TrueStep> path = check_on_cpu(lab, dec, seq, r, gen.rng(), tally);
    steps += path.size();
    insns += seq.size();
    through += path.back().regs.rip == Image(kCode, seq).starts[seq.size() - 1];
  }
  INFO(tally.first_failures);
  CHECK(tally.failures == 0);
  // The walks must have done something: long safe runs, and every kind of stop.
  CHECK(tally.walked > steps);
  CHECK(tally.why[Why::ControlFlow] > 0);
  CHECK(tally.why[Why::Unknown] > 0);
  WARN(std::to_string(steps) + " steps of " + std::to_string(insns) + " instructions, " + std::to_string(through) +
       " of " + std::to_string(kSequences) + " sequences ran to their end; " + tally.summary());
}

// --- a real workload ----------------------------------------------------------------------------
// Compiled code as it comes: the same functions at -O0 and at the file's optimisation level,
// TLS and global counters, a jump table, floating point, and libc (memset, memcpy, strlen,
// snprintf, qsort, malloc through std::string).

#if defined(__clang__)
#define BS_O0 [[clang::optnone]] __attribute__((noinline))
#else
#define BS_O0 __attribute__((noinline, optimize("O0")))
#endif

namespace workload {

struct Node {
  Node* next;
  long value;
  char tag[24];
};
struct Matrix {
  double m[4][4];
};
thread_local long tls_hits;
long g_total;
int g_table[64];

BS_O0 long walk_list_o0(Node* head, long bias) {
  long local[6] = {1, 2, 3, 4, 5, 6};
  long s = 0;
  for (Node* p = head; p != nullptr; p = p->next) {
    long i = (p->value + bias) % 6;
    if (i < 0) i = -i;
    s += p->value * local[i];
    p->tag[s & 15] = static_cast<char>(s);
    tls_hits++;
    g_total += s;
    g_table[s & 63] += 1;
  }
  return s;
}

__attribute__((noinline)) long walk_list(Node* head, long bias) {
  long local[6] = {1, 2, 3, 4, 5, 6};
  long s = 0;
  for (Node* p = head; p != nullptr; p = p->next) {
    long i = (p->value + bias) % 6;
    if (i < 0) i = -i;
    s += p->value * local[i];
    p->tag[s & 15] = static_cast<char>(s);
    tls_hits++;
    g_total += s;
    g_table[s & 63] += 1;
  }
  return s;
}

BS_O0 int classify_o0(int x) {
  switch (x % 7) {
    case 0: return 3;
    case 1: return x * 2;
    case 2: return x - 5;
    case 3: return g_table[x & 63];
    case 4: return 11;
    case 5: return -x;
    default: return 0;
  }
}

BS_O0 void mat_mul_o0(const Matrix* a, const Matrix* b, Matrix* out) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += a->m[i][k] * b->m[k][j];
      out->m[i][j] = sum;
    }
}

__attribute__((noinline)) void mat_mul(const Matrix* a, const Matrix* b, Matrix* out) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += a->m[i][k] * b->m[k][j];
      out->m[i][j] = sum;
    }
}

int compare_longs(const void* a, const void* b) {
  long x = *static_cast<const long*>(a), y = *static_cast<const long*>(b);
  return (x > y) - (x < y);
}

__attribute__((noinline)) long run() {
  Node nodes[24];
  for (int i = 0; i < 24; ++i) {
    nodes[i].next = i + 1 < 24 ? &nodes[i + 1] : nullptr;
    nodes[i].value = i * 7 - 30;
    std::memset(nodes[i].tag, 0, sizeof nodes[i].tag);
  }
  long sink = walk_list_o0(nodes, 3) + walk_list(nodes, 5);
  for (int i = 0; i < 21; ++i) sink += classify_o0(i);
  Matrix a, b, c;
  for (int i = 0; i < 16; ++i) {
    a.m[i / 4][i % 4] = i * 0.5;
    b.m[i / 4][i % 4] = 16 - i;
  }
  mat_mul_o0(&a, &b, &c);
  mat_mul(&c, &a, &b);
  sink += static_cast<long>(b.m[3][3]);
  // Through volatile pointers, so the compiler calls libc instead of inlining.
  void* (*volatile copy)(void*, const void*, size_t) = &std::memcpy;
  void* (*volatile fill)(void*, int, size_t) = &std::memset;
  size_t (*volatile length)(const char*) = &std::strlen;
  char buf[300], out[300];
  fill(buf, 'x', sizeof buf);
  buf[299] = 0;
  copy(out, buf, sizeof buf);
  sink += static_cast<long>(length(out));
  std::snprintf(out, sizeof out, "%ld %s %.3f", sink, "abc", b.m[1][2]);
  long arr[40];
  for (int i = 0; i < 40; ++i) arr[i] = (i * 7919) % 101 - 50;
  std::qsort(arr, 40, sizeof(long), compare_longs);
  std::string text = "a string long enough to live on the heap: ";
  text += out;
  return sink + arr[0] + static_cast<long>(text.size());
}

}  // namespace workload

TEST_CASE("run_ahead: a real workload, single-stepped on the CPU", "[run_ahead]") {
  pid_t pid = fork();
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    raise(SIGSTOP);
    volatile long result = workload::run();
    (void)result;
    raise(SIGUSR2);  // the end: the tracer stops stepping here
    _exit(0);
  }
  REQUIRE(pid > 0);
  struct Reaper {
    pid_t pid;
    int mem = -1;
    ~Reaper() {
      if (mem >= 0) close(mem);
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reaper{pid};
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFSTOPPED(status));
  reaper.mem = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY);
  REQUIRE(reaper.mem >= 0);
  const int mem = reaper.mem;
  CodeBytesReader read = [mem](uint64_t addr, std::span<uint8_t> out) -> size_t {
    ssize_t n = pread(mem, out.data(), out.size(), static_cast<off_t>(addr));
    return n > 0 ? static_cast<size_t>(n) : 0;
  };

  AccessDecoder truth;
  std::vector<TrueStep> path;
  std::array<uint8_t, 16> code{};
  bool ended = false;
  while (path.size() < 300000) {
    TrueStep& step = path.emplace_back();
    REQUIRE(ptrace(PTRACE_GETREGS, pid, nullptr, &step.regs) == 0);
    size_t got = read(step.regs.rip, code);
    truth.decode(std::span<const uint8_t>(code.data(), got), step.regs, step.acc);
    status = cpuid_step::single_step(pid, std::span<const uint8_t>(code.data(), got));
    REQUIRE(status != -1);
    REQUIRE(WIFSTOPPED(status));
    if (WSTOPSIG(status) != SIGTRAP) {
      ended = WSTOPSIG(status) == SIGUSR2;
      break;
    }
  }
  REQUIRE(ended);

  AccessDecoder dec;
  std::mt19937_64 rng(7);
  Tally tally;
  for (size_t t = 0; t < path.size(); ++t) check_walk(dec, path, t, read, rng, tally);
  INFO(tally.first_failures);
  CHECK(tally.failures == 0);
  // What the walk buys on real code: most instructions run unchecked.
  CHECK(tally.walked > path.size());
  // The ptrace stops a run-ahead loop would take over this path (a walk of n > 0 instructions:
  // continue to a breakpoint at stop, then single-step stop; n = 0: single-step), nothing
  // watched, against one stop per single step.
  size_t stops = 0;
  for (size_t t = 0; t < path.size();) {
    RunAhead ra = dec.run_ahead(path[t].regs, read, {});
    stops += ra.insns > 0 ? 2 : 1;
    t += ra.insns + 1;
  }
  CHECK(stops < path.size());
  WARN(std::to_string(path.size()) + " steps; a run-ahead loop would stop " + std::to_string(stops) + " times; " +
       tally.summary());
}

// --- random single instructions: the register model for every form capstone decodes -------------

// Random instruction bytes over the whole opcode space: legacy prefixes, REX, the one-, two- and
// three-byte maps, VEX and EVEX, then ModRM/SIB/displacement/immediate bytes biased to small
// values (so that memory operands often land in the scratch area).
std::vector<uint8_t> random_bytes(std::mt19937_64& rng) {
  std::vector<uint8_t> b;
  auto byte = [&] { return static_cast<uint8_t>(rng()); };
  static const uint8_t legacy[] = {0x66, 0xf2, 0xf3, 0xf0, 0x2e, 0x3e, 0x26, 0x64, 0x65, 0x67};
  if (rng() % 4 == 0)
    for (uint64_t n = 1 + rng() % 3; n > 0; --n)
      b.push_back(rng() % 5 ? legacy[rng() % std::size(legacy)] : static_cast<uint8_t>(0x40 | (rng() % 16)));
  auto rex = [&] {
    if (rng() % 2) b.push_back(static_cast<uint8_t>(0x40 | (rng() % 16)));
  };
  switch (rng() % 10) {
    case 0: case 1: case 2: rex(); b.push_back(byte()); break;
    case 3: case 4: case 5: rex(); b.push_back(0x0f); b.push_back(byte()); break;
    case 6: rex(); b.insert(b.end(), {0x0f, 0x38, byte()}); break;
    case 7: rex(); b.insert(b.end(), {0x0f, 0x3a, byte()}); break;
    case 8:
      if (rng() % 2) b.insert(b.end(), {0xc5, byte(), byte()});
      else b.insert(b.end(), {0xc4, static_cast<uint8_t>((byte() & 0xe0) | (1 + rng() % 3)), byte(), byte()});
      break;
    default:
      b.insert(b.end(), {0x62, static_cast<uint8_t>((byte() & 0xf0) | (1 + rng() % 3)), static_cast<uint8_t>(byte() | 4),
                         byte(), byte()});
      break;
  }
  b.push_back(rng() % 2 ? static_cast<uint8_t>(0xc0 | byte()) : byte());  // ModRM: half register forms
  while (b.size() < 16) b.push_back(rng() % 4 ? static_cast<uint8_t>(rng() % 16) : byte());
  return b;
}

struct SweepResult {
  size_t tried = 0, decodable = 0, walked = 0, ran = 0, faulted = 0, failures = 0;
  std::string first_failures;
  std::set<std::string> mnemonics;  // of the instructions that ran
};

// For each random instruction the walk declares safe: one step on the CPU from the same
// registers must end at the next instruction (nothing walked branches or has another length),
// leave fs/gs bases alone, and every GPR the walk still knows after it must hold that value.
SweepResult sweep(size_t count, uint64_t seed) {
  SweepResult res;
  Lab lab;
  lab.load(Image(kCode, {}));
  AccessDecoder dec;
  std::mt19937_64 rng(seed);
  csh cs = 0;
  REQUIRE(cs_open(CS_ARCH_X86, CS_MODE_64, &cs) == CS_ERR_OK);
  std::vector<RunAheadStep> trace;
  for (res.tried = 0; res.tried < count; ++res.tried) {
    std::vector<uint8_t> bytes = random_bytes(rng);
    user_regs_struct r = lab_regs(rng);
    uint8_t len = dec.decode(bytes, r).len;
    if (len == 0) continue;
    ++res.decodable;
    bytes.resize(len);
    Image img(kCode, {{bytes, "random"}});
    RunAhead ra = dec.run_ahead(r, img.reader(), {}, 512, &trace);
    if (ra.insns == 0) continue;
    ++res.walked;
    auto fail = [&](const std::string& what) {
      char hexbytes[64] = {};
      for (size_t i = 0; i < bytes.size(); ++i) std::snprintf(hexbytes + 3 * i, 4, "%02x ", bytes[i]);
      cs_insn* insn = nullptr;
      std::string text = "?";
      if (cs_disasm(cs, bytes.data(), bytes.size(), kCode, 1, &insn) == 1) {
        text = std::string(insn->mnemonic) + " " + insn->op_str;
        cs_free(insn, 1);
      }
      if (++res.failures <= 10) res.first_failures += std::string(hexbytes) + "(" + text + "): " + what + "\n";
    };
    if (ra.insns != 1 || trace.size() != 2 || ra.why != Why::ControlFlow) {
      fail("the walk went past the int3 after it");
      continue;
    }
    lab.write(kCode, img.bytes);
    user_regs_struct after{};
    int sig = lab.step_once(r, bytes, after);
    if (sig != SIGTRAP) {
      ++res.faulted;
      continue;
    }
    ++res.ran;
    cs_insn* insn = nullptr;
    if (cs_disasm(cs, bytes.data(), bytes.size(), kCode, 1, &insn) == 1) {
      res.mnemonics.insert(insn->mnemonic);
      cs_free(insn, 1);
    }
    if (after.rip != kCode + len) {
      fail("the CPU went to " + hex(after.rip));
      continue;
    }
    if (after.fs_base != r.fs_base || after.gs_base != r.gs_base) fail("fs/gs base changed");
    for (int n = 0; n < 16; ++n)
      if ((trace[1].known >> n & 1) && gpr(trace[1].regs, n) != gpr(after, n))
        fail(std::string("the walk says ") + kGprName[n] + " = " + hex(gpr(trace[1].regs, n)) + ", the CPU has " +
             hex(gpr(after, n)) + " (before: " + hex(gpr(r, n)) + ")");
  }
  cs_close(&cs);
  return res;
}

std::string summary(const SweepResult& s) {
  return std::to_string(s.tried) + " tried, " + std::to_string(s.decodable) + " decodable, " + std::to_string(s.walked) +
         " walked, " + std::to_string(s.ran) + " ran (" + std::to_string(s.mnemonics.size()) + " mnemonics), " +
         std::to_string(s.faulted) + " faulted";
}

TEST_CASE("run_ahead: random single instructions, on the CPU", "[run_ahead]") {
  SweepResult s = sweep(40000, 3);
  INFO(s.first_failures);
  CHECK(s.failures == 0);
  CHECK(s.ran > 2000);
  WARN(summary(s));
}

// Not run by default (about a minute): `unit_backend "[run_ahead_sweep]"`.
TEST_CASE("run_ahead: sweep of random single instructions, on the CPU", "[.][run_ahead_sweep]") {
  SweepResult s = sweep(2000000, 11);
  INFO(s.first_failures);
  CHECK(s.failures == 0);
  WARN(summary(s));
}

}  // namespace
