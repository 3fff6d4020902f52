// Fast-tracepoint jump pads (backend/trace/fast_pad.h) executed for real in this process: a tiny
// function in an RWX mapping gets its first instruction replaced by the pad's jump, the pad
// writes frames into a data area here, and the tests read them back. Registers and flags across
// a hit, 'M' blocks (process_vm_readv on ourselves), agent-expression conditions and
// collections, threads reserving at once, a full area's int3 and retry, and what pads refuse.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/trace/fast_pad.h"

using namespace backend;
using namespace backend::trace;

// Calls fn with every general register but rsp loaded from regs[0..14] (rax rbx rcx rdx rsi rdi
// rbp r8..r15), ZF and CF set, then stores every register and the flags back (regs[15] = flags)
// and regs[16] = the rsp fn starts with.
extern "C" void bs_fast_pad_harness(uint64_t* regs, const void* fn);
asm(R"(
  .pushsection .text
  .p2align 4
  .globl bs_fast_pad_harness
  .hidden bs_fast_pad_harness
  .type bs_fast_pad_harness, @function
bs_fast_pad_harness:
  pushq %rbx
  pushq %rbp
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  pushq %rdi
  pushq %rsi
  subq $8, %rsp
  movq %rdi, %rax
  leaq -8(%rsp), %rcx
  movq %rcx, 128(%rax)
  movq 8(%rax), %rbx
  movq 16(%rax), %rcx
  movq 24(%rax), %rdx
  movq 32(%rax), %rsi
  movq 40(%rax), %rdi
  movq 48(%rax), %rbp
  movq 56(%rax), %r8
  movq 64(%rax), %r9
  movq 72(%rax), %r10
  movq 80(%rax), %r11
  movq 88(%rax), %r12
  movq 96(%rax), %r13
  movq 104(%rax), %r14
  movq 112(%rax), %r15
  movq 0(%rax), %rax
  cmpq %rbx, %rbx
  stc
  callq *8(%rsp)
  pushfq
  pushq %rax
  movq 32(%rsp), %rax
  movq %rbx, 8(%rax)
  movq %rcx, 16(%rax)
  movq %rdx, 24(%rax)
  movq %rsi, 32(%rax)
  movq %rdi, 40(%rax)
  movq %rbp, 48(%rax)
  movq %r8, 56(%rax)
  movq %r9, 64(%rax)
  movq %r10, 72(%rax)
  movq %r11, 80(%rax)
  movq %r12, 88(%rax)
  movq %r13, 96(%rax)
  movq %r14, 104(%rax)
  movq %r15, 112(%rax)
  popq %rbx
  movq %rbx, 0(%rax)
  popq %rbx
  movq %rbx, 120(%rax)
  addq $16, %rsp
  popq %rdi
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbp
  popq %rbx
  ret
  .size bs_fast_pad_harness, .-bs_fast_pad_harness
  .popsection
)");

namespace {

// What the pads read (process_vm_readv on this process).
uint64_t g_value = 0x1122334455667788ull;
uint8_t g_bytes[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
uint8_t g_big[8192];
const uint8_t* g_pointer = g_bytes;

uint64_t addr_of(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The site function: mov rax, 42 (7 bytes, the site); ret; nops. Its argument (rdi) survives.
const std::vector<uint8_t> kMovRax42 = {0x48, 0xc7, 0xc0, 0x2a, 0x00, 0x00, 0x00, 0xc3,
                                        0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};

// Agent-expression bytecode, as GDB would send it.
struct Ax {
  std::vector<uint8_t> b;
  Ax& op(uint8_t o) { b.push_back(o); return *this; }
  Ax& be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Ax& c8(uint8_t v) { return op(0x22).be(v, 1); }
  Ax& c16(uint16_t v) { return op(0x23).be(v, 2); }
  Ax& c32(uint32_t v) { return op(0x24).be(v, 4); }
  Ax& c64(uint64_t v) { return op(0x25).be(v, 8); }
  Ax& reg(uint16_t r) { return op(0x26).be(r, 2); }
  Ax& ext(uint8_t bits) { return op(0x16).be(bits, 1); }
  Ax& zext(uint8_t bits) { return op(0x2a).be(bits, 1); }
  Ax& trace_quick(uint8_t n) { return op(0x0d).be(n, 1); }
  Ax& trace16(uint16_t n) { return op(0x30).be(n, 2); }
  Ax& if_goto(uint16_t t) { return op(0x20).be(t, 2); }
  Ax& go(uint16_t t) { return op(0x21).be(t, 2); }
  Ax& pick(uint8_t n) { return op(0x32).be(n, 1); }
  Ax& add() { return op(0x02); }
  Ax& sub() { return op(0x03); }
  Ax& mul() { return op(0x04); }
  Ax& div_s() { return op(0x05); }
  Ax& div_u() { return op(0x06); }
  Ax& rem_s() { return op(0x07); }
  Ax& rem_u() { return op(0x08); }
  Ax& lsh() { return op(0x09); }
  Ax& rsh_s() { return op(0x0a); }
  Ax& rsh_u() { return op(0x0b); }
  Ax& trace() { return op(0x0c); }
  Ax& log_not() { return op(0x0e); }
  Ax& bit_and() { return op(0x0f); }
  Ax& bit_or() { return op(0x10); }
  Ax& bit_xor() { return op(0x11); }
  Ax& bit_not() { return op(0x12); }
  Ax& equal() { return op(0x13); }
  Ax& less_s() { return op(0x14); }
  Ax& less_u() { return op(0x15); }
  Ax& ref8() { return op(0x17); }
  Ax& ref16() { return op(0x18); }
  Ax& ref32() { return op(0x19); }
  Ax& ref64() { return op(0x1a); }
  Ax& end() { return op(0x27); }
  Ax& dup() { return op(0x28); }
  Ax& pop() { return op(0x29); }
  Ax& swap() { return op(0x2b); }
  Ax& rot() { return op(0x33); }
  operator std::vector<uint8_t>() const { return b; }
};

struct Block {
  uint64_t addr = 0;
  std::vector<uint8_t> bytes;
};
struct Frame {
  FastFrameHeader h;
  uint64_t regs[kFastRegisters] = {};
  std::vector<Block> blocks;
};

// One RWX mapping (the function at its start, the pad a page in) and a data area.
class Rig {
 public:
  explicit Rig(size_t data_size = 1 << 20) : data_size_(data_size) {
    code_ = static_cast<uint8_t*>(::mmap(nullptr, kCodeSize, PROT_READ | PROT_WRITE | PROT_EXEC,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    data_ = static_cast<uint8_t*>(::mmap(nullptr, data_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    REQUIRE(code_ != MAP_FAILED);
    REQUIRE(data_ != MAP_FAILED);
    std::memset(code_, 0xcc, kCodeSize);
    header()->head = sizeof(DataHeader);
    header()->limit = data_size_;
  }
  ~Rig() {
    ::munmap(code_, kCodeSize);
    ::munmap(data_, data_size_);
  }
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  uint64_t site() const { return addr_of(code_); }
  uint64_t pad_addr() const { return addr_of(code_ + kPadAt); }
  uint8_t* code() { return code_; }
  DataHeader* header() { return reinterpret_cast<DataHeader*>(data_); }
  const FastPad& pad() const { return pad_; }

  Result<FastPad> build(const Tracepoint& tp, const std::vector<uint8_t>& fn = kMovRax42) {
    std::memcpy(code_, fn.data(), fn.size());
    FastPadSpec spec;
    spec.site = site();
    spec.code = fn;
    spec.pad_addr = pad_addr();
    spec.data_addr = addr_of(data_);
    spec.pid = static_cast<int32_t>(::getpid());
    spec.tracepoint = &tp;
    return build_fast_pad(spec);
  }
  // Builds the pad and patches the site.
  void install(const Tracepoint& tp, const std::vector<uint8_t>& fn = kMovRax42) {
    auto pad = build(tp, fn);
    INFO((pad ? std::string() : pad.error().message));
    REQUIRE(pad);
    pad_ = *pad;
    REQUIRE(pad_.code.size() < kCodeSize - kPadAt);
    std::memcpy(code_ + kPadAt, pad_.code.data(), pad_.code.size());
    std::memcpy(code_, pad_.jump.data(), pad_.jump.size());
  }
  long call(long arg) const { return reinterpret_cast<long (*)(long)>(code_)(arg); }

  // The committed frames from the area's start to head.
  std::vector<Frame> frames() {
    std::vector<Frame> out;
    uint64_t at = sizeof(DataHeader);
    while (at < header()->head) {
      Frame f;
      std::memcpy(&f.h, data_ + at, sizeof f.h);
      REQUIRE(f.h.reserved_size >= sizeof f.h);
      REQUIRE(f.h.used_size <= f.h.reserved_size);
      REQUIRE(f.h.used_size >= sizeof f.h + sizeof f.regs);
      std::memcpy(f.regs, data_ + at + sizeof f.h, sizeof f.regs);
      size_t p = at + sizeof f.h + sizeof f.regs, end = at + f.h.used_size;
      while (p < end) {
        REQUIRE(data_[p] == 'M');
        Block b;
        uint16_t len = 0;
        std::memcpy(&b.addr, data_ + p + 1, 8);
        std::memcpy(&len, data_ + p + 9, 2);
        REQUIRE(p + 11 + len <= end);
        b.bytes.assign(data_ + p + 11, data_ + p + 11 + len);
        f.blocks.push_back(std::move(b));
        p += 11 + len;
      }
      out.push_back(std::move(f));
      at += out.back().h.reserved_size;
    }
    REQUIRE(at == header()->head);
    return out;
  }

  static constexpr size_t kCodeSize = 1 << 20;
  static constexpr size_t kPadAt = 4096;

 private:
  size_t data_size_;
  uint8_t* code_ = nullptr;
  uint8_t* data_ = nullptr;
  FastPad pad_;
};

Tracepoint make_tp(uint32_t number, std::vector<TraceAction> actions = {CollectRegisters{}},
                   std::vector<uint8_t> condition = {}) {
  Tracepoint tp;
  tp.number = number;
  tp.fast = true;
  tp.actions = std::move(actions);
  tp.condition = std::move(condition);
  return tp;
}

std::vector<uint8_t> bytes_at(const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

}  // namespace

TEST_CASE("fast pad: a hit keeps every register and the flags and commits one frame", "[trace][fastpad]") {
  Rig rig;
  Tracepoint tp = make_tp(7);
  rig.install(tp);
  CHECK(rig.pad().jump.size() == 5);
  CHECK(rig.pad().jump[0] == 0xe9);
  CHECK(rig.pad().original == std::vector<uint8_t>(kMovRax42.begin(), kMovRax42.begin() + 5));
  CHECK(rig.pad().resume_addr == rig.site() + 7);
  CHECK(rig.pad().frame_bytes == sizeof(FastFrameHeader) + 8 * kFastRegisters);

  uint64_t regs[17] = {};
  for (int i = 0; i < 15; ++i) regs[i] = 0x0101010101010101ull * static_cast<uint64_t>(i + 1) + 0x1000;
  uint64_t in[17];
  std::memcpy(in, regs, sizeof in);
  bs_fast_pad_harness(regs, rig.code());

  // The function ran (rax = 42), every other register and the flags are as they were.
  CHECK(regs[0] == 42);
  for (int i = 1; i < 15; ++i) {
    INFO("register slot " << i);
    CHECK(regs[i] == in[i]);
  }
  CHECK((regs[15] & 0x41) == 0x41);  // CF and ZF survived the pad

  auto frames = rig.frames();
  REQUIRE(frames.size() == 1);
  const Frame& f = frames[0];
  CHECK(f.h.tracepoint == 7);
  CHECK(f.h.flags == kFrameRegisters);
  CHECK(f.h.reserved_size == rig.pad().frame_bytes);
  CHECK(f.h.used_size == sizeof(FastFrameHeader) + 8 * kFastRegisters);
  CHECK(f.blocks.empty());
  // tdesc order: rax rbx rcx rdx rsi rdi rbp rsp r8..r15 rip eflags, as at the site.
  CHECK(f.regs[0] == in[0]);  // before mov rax, 42
  for (int i = 1; i <= 6; ++i) {
    INFO("tdesc register " << i);
    CHECK(f.regs[i] == in[i]);
  }
  CHECK(f.regs[7] == regs[16]);
  for (int i = 8; i <= 15; ++i) {
    INFO("tdesc register " << i);
    CHECK(f.regs[i] == in[i - 1]);
  }
  CHECK(f.regs[16] == rig.site());
  CHECK((f.regs[17] & 0x41) == 0x41);

  // Called as a plain function a few more times: each hit one more frame.
  for (long i = 0; i < 3; ++i) CHECK(rig.call(i) == 42);
  frames = rig.frames();
  REQUIRE(frames.size() == 4);
  for (long i = 0; i < 3; ++i) {
    CHECK(frames[static_cast<size_t>(i) + 1].h.tracepoint == 7);
    CHECK(frames[static_cast<size_t>(i) + 1].regs[5] == static_cast<uint64_t>(i));  // rdi
  }
  CHECK(rig.header()->head == sizeof(DataHeader) + 4 * rig.pad().frame_bytes);
  CHECK(rig.header()->lost == 0);
}

TEST_CASE("fast pad: a rip-relative instruction at the site is moved into the pad", "[trace][fastpad]") {
  Rig rig;
  // mov rax, [rip + 0x100 - 7] (the quad at the function's start + 0x100); ret
  std::vector<uint8_t> fn = {0x48, 0x8b, 0x05, 0xf9, 0x00, 0x00, 0x00, 0xc3,
                             0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
  uint64_t value = 0x0badc0ffee123456ull;
  std::memcpy(rig.code() + 0x100, &value, sizeof value);
  Tracepoint tp = make_tp(3);
  rig.install(tp, fn);
  CHECK(rig.call(5) == static_cast<long>(value));
  auto frames = rig.frames();
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].regs[5] == 5);
  CHECK(frames[0].regs[16] == rig.site());
}

TEST_CASE("fast pad: collected memory becomes 'M' blocks, an unreadable address none", "[trace][fastpad]") {
  Rig rig;
  Tracepoint tp = make_tp(2, {CollectMemory{-1, addr_of(&g_value), 8},
                              CollectMemory{-1, 8, 8},                  // unreadable: left out
                              CollectMemory{5, 4, 6},                   // rdi + 4
                              CollectMemory{-1, addr_of(g_big), 3000}});
  for (size_t i = 0; i < sizeof g_big; ++i) g_big[i] = static_cast<uint8_t>(i * 7);
  rig.install(tp);
  CHECK(rig.pad().frame_bytes == ((16 + 144 + 19 + 19 + 17 + 3011 + 7) & ~7u));
  CHECK(rig.call(static_cast<long>(addr_of(g_bytes))) == 42);

  auto frames = rig.frames();
  REQUIRE(frames.size() == 1);
  const Frame& f = frames[0];
  CHECK(f.h.tracepoint == 2);
  CHECK(f.h.flags == 0);  // no `collect $regs`
  CHECK(f.h.reserved_size == rig.pad().frame_bytes);
  CHECK(f.h.used_size == 16 + 144 + 19 + 17 + 3011);
  REQUIRE(f.blocks.size() == 3);
  CHECK(f.blocks[0].addr == addr_of(&g_value));
  CHECK(f.blocks[0].bytes == bytes_at(&g_value, 8));
  CHECK(f.blocks[1].addr == addr_of(g_bytes) + 4);
  CHECK(f.blocks[1].bytes == bytes_at(g_bytes + 4, 6));
  CHECK(f.blocks[2].addr == addr_of(g_big));
  CHECK(f.blocks[2].bytes == bytes_at(g_big, 3000));
}

TEST_CASE("fast pad: expressions collect with their trace ops", "[trace][fastpad]") {
  SECTION("trace_quick, trace, trace16 and a dereferenced register") {
    Rig rig;
    Tracepoint tp = make_tp(
        9, {CollectExpression{Ax().c64(addr_of(&g_value)).trace_quick(8).end()},
            CollectExpression{Ax().c64(addr_of(g_bytes) + 2).c8(5).trace().end()},
            CollectExpression{Ax().c64(addr_of(g_bytes) + 16).trace16(10).end()},
            // rdi points at g_pointer: *(*rdi) for 4 bytes, plus the pointer itself
            CollectExpression{Ax().reg(5).trace_quick(8).ref64().trace_quick(4).end()},
            CollectRegisters{}});
    rig.install(tp);
    CHECK(rig.pad().frame_bytes == ((16 + 144 + 19 + 16 + 21 + 19 + 15 + 7) & ~7u));
    CHECK(rig.call(static_cast<long>(addr_of(&g_pointer))) == 42);
    auto frames = rig.frames();
    REQUIRE(frames.size() == 1);
    const Frame& f = frames[0];
    CHECK(f.h.tracepoint == 9);
    CHECK(f.h.flags == kFrameRegisters);
    REQUIRE(f.blocks.size() == 5);
    CHECK(f.blocks[0].addr == addr_of(&g_value));
    CHECK(f.blocks[0].bytes == bytes_at(&g_value, 8));
    CHECK(f.blocks[1].addr == addr_of(g_bytes) + 2);
    CHECK(f.blocks[1].bytes == bytes_at(g_bytes + 2, 5));
    CHECK(f.blocks[2].addr == addr_of(g_bytes) + 16);
    CHECK(f.blocks[2].bytes == bytes_at(g_bytes + 16, 10));
    CHECK(f.blocks[3].addr == addr_of(&g_pointer));
    CHECK(f.blocks[3].bytes == bytes_at(&g_pointer, 8));
    CHECK(f.blocks[4].addr == addr_of(g_bytes));
    CHECK(f.blocks[4].bytes == bytes_at(g_bytes, 4));
  }
  SECTION("an unreadable address ends its expression, the frame is still committed") {
    Rig rig;
    Tracepoint tp = make_tp(4, {CollectExpression{Ax().c8(8).ref64().trace_quick(8).end()},
                                CollectExpression{Ax().c8(16).trace_quick(8).end()},
                                CollectExpression{Ax().c64(addr_of(&g_value)).trace_quick(8).end()}});
    rig.install(tp);
    for (int i = 0; i < 3; ++i) CHECK(rig.call(i) == 42);
    auto frames = rig.frames();
    REQUIRE(frames.size() == 3);
    for (const auto& f : frames) {
      CHECK(f.h.tracepoint == 4);
      REQUIRE(f.blocks.size() == 1);
      CHECK(f.blocks[0].addr == addr_of(&g_value));
      CHECK(f.blocks[0].bytes == bytes_at(&g_value, 8));
    }
  }
  SECTION("a run-time size is clamped to what the frame reserved") {
    Rig rig;
    // addr = g_big, size = rdi (not a constant: the pad reserves 4096 and keeps at most that)
    Tracepoint tp = make_tp(5, {CollectExpression{Ax().c64(addr_of(g_big)).reg(5).trace().end()}});
    for (size_t i = 0; i < sizeof g_big; ++i) g_big[i] = static_cast<uint8_t>(i * 13 + 1);
    rig.install(tp);
    CHECK(rig.pad().frame_bytes == ((16 + 144 + 11 + 4096 + 7) & ~7u));
    CHECK(rig.call(100) == 42);
    CHECK(rig.call(8000) == 42);
    auto frames = rig.frames();
    REQUIRE(frames.size() == 2);
    REQUIRE(frames[0].blocks.size() == 1);
    CHECK(frames[0].blocks[0].bytes == bytes_at(g_big, 100));
    REQUIRE(frames[1].blocks.size() == 1);
    CHECK(frames[1].blocks[0].bytes == bytes_at(g_big, 4096));
    CHECK(frames[1].h.used_size <= frames[1].h.reserved_size);
  }
  SECTION("a conditional jump in a collection") {
    Rig rig;
    // if (rdi != 0) trace g_value: reg 5 (0); if_goto 7 (3); end (6); const64 (7); trace_quick (16); end (18)
    std::vector<uint8_t> x = Ax().reg(5).if_goto(7).end().c64(addr_of(&g_value)).trace_quick(8).end();
    Tracepoint tp = make_tp(6, {CollectExpression{x}});
    rig.install(tp);
    CHECK(rig.call(0) == 42);
    CHECK(rig.call(1) == 42);
    auto frames = rig.frames();
    REQUIRE(frames.size() == 2);
    CHECK(frames[0].blocks.empty());
    REQUIRE(frames[1].blocks.size() == 1);
    CHECK(frames[1].blocks[0].addr == addr_of(&g_value));
  }
}

TEST_CASE("fast pad: conditions decide which hits leave a frame", "[trace][fastpad]") {
  const uint64_t kMin = 0x8000000000000000ull;
  struct Case {
    const char* what;
    std::vector<uint8_t> condition;
    bool taken;
  };
  // Each runs with rdi = 5 at the site.
  const std::vector<Case> cases = {
      {"true", Ax().c8(1).end(), true},
      {"false", Ax().c8(0).end(), false},
      {"division by zero", Ax().c8(1).c8(0).div_s().end(), false},
      {"unsigned division by zero", Ax().c8(1).c8(0).div_u().end(), false},
      {"remainder by zero", Ax().c8(1).c8(0).rem_s().log_not().end(), false},
      {"INT64_MIN / -1 wraps", Ax().c64(kMin).c8(0xff).ext(8).div_s().c64(kMin).equal().end(), true},
      {"INT64_MIN % -1 is 0", Ax().c64(kMin).c8(0xff).ext(8).rem_s().log_not().end(), true},
      {"signed division", Ax().c8(0xf9).ext(8).c8(2).div_s().c8(0xfd).ext(8).equal().end(), true},  // -7/2 = -3
      {"signed remainder", Ax().c8(0xf9).ext(8).c8(2).rem_s().c8(0xff).ext(8).equal().end(), true},  // -7%2 = -1
      {"unsigned division", Ax().c8(0xff).ext(8).c8(2).div_u().c64(0x7fffffffffffffffull).equal().end(), true},
      {"unsigned remainder", Ax().c8(17).c8(5).rem_u().c8(2).equal().end(), true},
      {"register rdi == 5", Ax().reg(5).c8(5).equal().end(), true},
      {"register rdi == 3", Ax().reg(5).c8(3).equal().end(), false},
      {"rsp is 8 mod 16 at a function's entry", Ax().reg(7).c8(15).bit_and().c8(8).equal().end(), true},
      {"unreadable memory is false", Ax().c8(8).ref64().end(), false},
      {"unreadable memory is false, even negated", Ax().c8(8).ref8().log_not().end(), false},
      {"ref64 of a global", Ax().c64(addr_of(&g_value)).ref64().c64(g_value).equal().end(), true},
      {"ref8/16/32 zero-extend", Ax().c64(addr_of(&g_value)).ref32().c32(0x55667788).equal()
                                     .c64(addr_of(&g_value)).ref16().c16(0x7788).equal().bit_and()
                                     .c64(addr_of(&g_value)).ref8().c8(0x88).equal().bit_and().end(), true},
      {"add sub mul", Ax().c8(6).c8(7).mul().c8(2).sub().c8(2).add().c8(42).equal().end(), true},
      {"shifts", Ax().c8(0xf0).ext(8).c8(2).rsh_s().c8(0xfc).ext(8).equal()
                     .c8(1).c8(63).lsh().c8(63).rsh_u().bit_and().end(), true},
      {"bitwise", Ax().c8(0x0c).c8(0x0a).bit_xor().c8(0x06).equal().c8(0x0c).c8(0x0a).bit_or().c8(0x0e).equal()
                      .bit_and().c8(0).bit_not().c8(0xff).ext(8).equal().bit_and().end(), true},
      {"less signed and unsigned", Ax().c8(0xff).ext(8).c8(0).less_s().c8(0xff).ext(8).c8(0).less_u().log_not()
                                       .bit_and().end(), true},
      {"zero_ext", Ax().c8(0xff).ext(8).zext(16).c16(0xffff).equal().end(), true},
      {"dup pop swap", Ax().c8(1).c8(2).swap().sub().dup().pop().c8(1).equal().end(), true},  // 2 - 1
      {"rot", Ax().c8(1).c8(2).c8(3).rot().c8(2).equal().end(), true},  // 1 2 3 -> 3 1 2
      {"pick", Ax().c8(7).c8(9).pick(1).c8(7).equal().end(), true},
      {"if_goto taken", Ax().c8(1).if_goto(8).c8(0).end().c8(1).end(), true},
      // c8 0 (0); if_goto 10 (2); c8 1 (5); goto 12 (7); c8 0 (10); end (12)
      {"goto", Ax().c8(0).if_goto(10).c8(1).go(12).c8(0).end(), true},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Rig rig;
    Tracepoint tp = make_tp(11, {CollectRegisters{}}, c.condition);
    REQUIRE(!fast_unsupported(tp));
    rig.install(tp);
    CHECK(rig.call(5) == 42);
    auto frames = rig.frames();
    CHECK(frames.size() == (c.taken ? 1u : 0u));
    if (!frames.empty()) CHECK(frames[0].regs[5] == 5);
  }
}

TEST_CASE("fast pad: a condition on a register picks the hits", "[trace][fastpad]") {
  Rig rig;
  // rdi % 7 == 2
  Tracepoint tp = make_tp(12, {CollectRegisters{}}, Ax().reg(5).c8(7).rem_s().c8(2).equal().end());
  rig.install(tp);
  for (long i = 0; i < 21; ++i) CHECK(rig.call(i) == 42);
  auto frames = rig.frames();
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].regs[5] == 2);
  CHECK(frames[1].regs[5] == 9);
  CHECK(frames[2].regs[5] == 16);

  // rip and eflags as registers of a condition: rip is the site.
  Rig rig2;
  Tracepoint tp2 = make_tp(15, {CollectRegisters{}}, Ax().reg(16).c64(rig2.site()).equal().end());
  rig2.install(tp2);
  CHECK(rig2.call(1) == 42);
  CHECK(rig2.frames().size() == 1);
}

TEST_CASE("fast pad: threads hitting at once each reserve a frame of their own", "[trace][fastpad]") {
  constexpr int kThreads = 4, kCalls = 10000;
  Tracepoint tp = make_tp(13, {CollectRegisters{}, CollectMemory{-1, addr_of(&g_value), 8}});
  Rig probe;  // for the frame size
  auto built = probe.build(tp);
  REQUIRE(built);
  Rig rig(sizeof(DataHeader) + static_cast<size_t>(kThreads) * kCalls * built->frame_bytes + 4096);
  rig.install(tp);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&rig, &wrong, t] {
      for (int i = 0; i < kCalls; ++i)
        if (rig.call(t * 1000000L + i) != 42) ++wrong;
    });
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  auto frames = rig.frames();
  REQUIRE(frames.size() == static_cast<size_t>(kThreads) * kCalls);
  std::set<uint64_t> seen;
  size_t bad = 0;
  for (const auto& f : frames) {
    if (f.h.tracepoint != 13 || f.h.reserved_size != rig.pad().frame_bytes || f.h.used_size != 16 + 144 + 19 ||
        f.blocks.size() != 1 || f.blocks[0].bytes != bytes_at(&g_value, 8))
      ++bad;
    seen.insert(f.regs[5]);
  }
  CHECK(bad == 0);
  CHECK(seen.size() == frames.size());  // every call's rdi exactly once
  CHECK(rig.header()->head == sizeof(DataHeader) + static_cast<uint64_t>(kThreads) * kCalls * rig.pad().frame_bytes);
}

namespace {
// The full-area trap: checks where it stopped, drains (empties) the area and sends the thread to
// the pad's retry, as the server does.
std::atomic<uint64_t> g_trap_expected_pc{0};
std::atomic<uint64_t> g_trap_retry{0};
std::atomic<int> g_traps{0};
std::atomic<int> g_trap_wrong_pc{0};
DataHeader* g_trap_header = nullptr;

void on_full_area(int, siginfo_t*, void* ctx) {
  auto* uc = static_cast<ucontext_t*>(ctx);
  ++g_traps;
  if (static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]) != g_trap_expected_pc) ++g_trap_wrong_pc;
  g_trap_header->head = sizeof(DataHeader);
  uc->uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(g_trap_retry.load());
}
}  // namespace

TEST_CASE("fast pad: a full area traps, and the hit goes on once it is drained", "[trace][fastpad]") {
  Tracepoint tp = make_tp(14);
  Rig probe;
  auto built = probe.build(tp);
  REQUIRE(built);
  // Room for three frames.
  Rig rig(4096);
  rig.header()->limit = sizeof(DataHeader) + 3 * built->frame_bytes;
  rig.install(tp);
  g_trap_expected_pc = rig.pad_addr() + rig.pad().full_trap + 1;
  g_trap_retry = rig.pad_addr() + rig.pad().retry;
  g_trap_header = rig.header();
  g_traps = 0;
  g_trap_wrong_pc = 0;
  CHECK(rig.code()[Rig::kPadAt + rig.pad().full_trap] == 0xcc);

  struct sigaction sa {}, old {};
  sa.sa_sigaction = on_full_area;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  REQUIRE(::sigaction(SIGTRAP, &sa, &old) == 0);
  long results[5] = {};
  for (long i = 0; i < 5; ++i) results[i] = rig.call(100 + i);
  ::sigaction(SIGTRAP, &old, nullptr);

  for (long r : results) CHECK(r == 42);
  CHECK(g_traps == 1);  // the 4th hit
  CHECK(g_trap_wrong_pc == 0);
  // After the drain: the 4th and 5th hits, from the area's start.
  auto frames = rig.frames();
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].h.tracepoint == 14);
  CHECK(frames[0].regs[5] == 103);
  CHECK(frames[1].regs[5] == 104);
}

TEST_CASE("fast pad: what pads refuse", "[trace][fastpad]") {
  auto reason = [](Tracepoint tp) { return fast_unsupported(tp); };
  auto with_condition = [](std::vector<uint8_t> c) { return make_tp(1, {CollectRegisters{}}, std::move(c)); };
  auto with_expression = [](std::vector<uint8_t> x) { return make_tp(1, {CollectExpression{std::move(x)}}); };

  SECTION("supported") {
    CHECK(!reason(make_tp(1)));
    CHECK(!reason(make_tp(1, {}, {})));
    CHECK(!reason(with_condition(Ax().reg(5).c8(3).equal().end())));
    CHECK(!reason(with_condition(Ax().reg(17).c8(1).bit_and().end())));
    CHECK(!reason(with_expression(Ax().c64(addr_of(&g_value)).trace_quick(8).end())));
    CHECK(!reason(make_tp(1, {CollectMemory{7, 16, 8}, CollectMemory{-1, 0x1000, 0xffff}})));
  }
  SECTION("while-stepping") {
    Tracepoint tp = make_tp(1);
    tp.step_count = 3;
    auto r = reason(tp);
    REQUIRE(r);
    CHECK(r->find("while-stepping") != std::string::npos);
    Tracepoint tp2 = make_tp(1);
    tp2.step_actions.push_back(CollectRegisters{});
    CHECK(reason(tp2));
  }
  SECTION("ops pads do not compile: getv setv tracev printf") {
    CHECK(reason(with_condition(Ax().op(0x2c).be(1, 2).end())));                       // getv 1
    CHECK(reason(with_expression(Ax().c8(1).op(0x2d).be(1, 2).pop().end())));          // setv 1
    CHECK(reason(with_expression(Ax().op(0x2e).be(1, 2).end())));                      // tracev 1
    CHECK(reason(with_expression(Ax().c8(0).c8(0).op(0x34).be(0, 1).be(3, 2).op('h').op('i').op(0).end())));
    auto r = reason(with_condition(Ax().op(0x2c).be(1, 2).end()));
    REQUIRE(r);
    CHECK(r->find("44") != std::string::npos);
  }
  SECTION("backward and outside jumps") {
    CHECK(reason(with_condition(Ax().c8(1).if_goto(0).c8(1).end())));
    CHECK(reason(with_condition(Ax().go(0).end())));
    CHECK(reason(with_condition(Ax().c8(1).if_goto(200).c8(1).end())));
  }
  SECTION("a malformed stack") {
    CHECK(reason(with_condition(Ax().add().end())));          // underflow
    CHECK(reason(with_condition(Ax().end())));                // no value
    CHECK(reason(with_expression(Ax().trace().end())));        // underflow in a collection
    // c8 1 (0); c8 1 (2); if_goto 9 (4); c8 2 (7); c8 1 (9): depth 1 by the jump, 2 falling through
    CHECK(reason(with_condition(Ax().c8(1).c8(1).if_goto(9).c8(2).c8(1).end())));
  }
  SECTION("malformed code") {
    CHECK(reason(with_condition(Ax().c8(1))));                 // runs off its end
    CHECK(reason(with_condition(Ax().op(0x25).be(1, 2))));     // truncated const64
    CHECK(reason(with_condition(Ax().c8(1).end().c8(2).end())));  // unreachable
  }
  SECTION("registers a pad does not keep") {
    auto r = reason(with_condition(Ax().reg(18).end()));
    REQUIRE(r);
    CHECK(r->find("18") != std::string::npos);
    CHECK(reason(with_expression(Ax().reg(40).trace_quick(8).end())));
    CHECK(reason(make_tp(1, {CollectMemory{18, 0, 8}})));
  }
  SECTION("collection in a condition, sizes out of bounds") {
    CHECK(reason(with_condition(Ax().c64(addr_of(&g_value)).trace_quick(8).end())));
    CHECK(reason(make_tp(1, {CollectMemory{-1, 0x1000, 0x10000}})));
    std::vector<TraceAction> many(17, CollectMemory{-1, 0x1000, 0xffff});
    auto r = reason(make_tp(1, many));
    REQUIRE(r);
    CHECK(r->find("too large") != std::string::npos);
  }
  SECTION("a jump into the middle of an op") {
    // const8 1 (0); if_goto 6 (2); const16 <27 27> (5): byte 6 is const16's operand
    Tracepoint tp = with_condition(Ax().c8(1).if_goto(6).c16(0x2727).end());
    std::optional<std::string> r;
    REQUIRE_NOTHROW(r = reason(tp));
    CHECK(r);
    Rig rig;
    REQUIRE_NOTHROW((void)rig.build(tp));
  }
  SECTION("build_fast_pad refuses what fast_unsupported refuses") {
    Rig rig;
    Tracepoint tp = with_condition(Ax().add().end());
    auto pad = rig.build(tp);
    REQUIRE(!pad);
    CHECK(pad.error().code == EOPNOTSUPP);
  }
}

TEST_CASE("fast pad: sites a jump cannot replace", "[trace][fastpad]") {
  Tracepoint tp = make_tp(1);
  SECTION("a call") {
    Rig rig;
    auto pad = rig.build(tp, {0xe8, 0x10, 0x00, 0x00, 0x00, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90});
    REQUIRE(!pad);
    CHECK(pad.error().code == EOPNOTSUPP);
  }
  SECTION("a jmp rel8") {
    Rig rig;
    auto pad = rig.build(tp, {0xeb, 0x03, 0x90, 0x90, 0x90, 0xc3, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90});
    REQUIRE(!pad);
  }
  SECTION("an instruction shorter than the jump") {
    Rig rig;
    // push rbp; mov rbp, rsp; ...
    auto pad = rig.build(tp, {0x55, 0x48, 0x89, 0xe5, 0x48, 0xc7, 0xc0, 0x2a, 0x00, 0x00, 0x00, 0x5d, 0xc3, 0x90, 0x90, 0x90});
    REQUIRE(!pad);
    CHECK(pad.error().code == EOPNOTSUPP);
  }
  SECTION("a site followed by an instruction the 16 bytes cut short is fine") {
    Rig rig;
    // mov rax, 42; movabs rax, imm64 (10 bytes, 9 of them read)
    auto pad = rig.build(tp, {0x48, 0xc7, 0xc0, 0x2a, 0x00, 0x00, 0x00, 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7});
    REQUIRE(pad);
    CHECK(pad->resume_addr == rig.site() + 7);
  }
  SECTION("a pad out of rel32 reach") {
    Rig rig;
    FastPadSpec spec;
    spec.site = rig.site();
    spec.code = kMovRax42;
    spec.pad_addr = rig.site() + (8ull << 30);
    spec.data_addr = addr_of(rig.header());
    spec.pid = static_cast<int32_t>(::getpid());
    spec.tracepoint = &tp;
    auto pad = build_fast_pad(spec);
    REQUIRE(!pad);
    CHECK(pad.error().code == ERANGE);
  }
}
