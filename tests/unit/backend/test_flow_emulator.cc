// emulate_flow against the CPU: each instruction is both emulated and single-stepped in a
// ptrace'd child, and rip/rsp/rcx and the pushed return address must agree.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/x86/block_cache.h"
#include "backend/x86/flow_emulator.h"

using namespace backend;

namespace {

// Core registers in GDB order plus fs_base/gs_base; enough for the emulator.
RegisterLayout test_layout() {
  static const char* names[] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8",
                                "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip", "eflags",
                                "fs_base", "gs_base"};
  RegisterLayout l;
  int n = 0;
  for (const char* name : names) {
    RegisterInfo r;
    r.name = name;
    r.bitsize = 64;
    r.regnum = n;
    r.offset = size_t(n) * 8;
    l.regs.push_back(r);
    ++n;
  }
  l.total_bytes = size_t(n) * 8;
  return l;
}

RegisterFile to_file(const RegisterLayout& l, const user_regs_struct& u) {
  RegisterFile f;
  f.bytes.assign(l.total_bytes, 0);
  f.valid.assign(l.regs.size(), true);
  uint64_t v[] = {u.rax, u.rbx, u.rcx, u.rdx, u.rsi, u.rdi, u.rbp, u.rsp, u.r8, u.r9, u.r10,
                  u.r11, u.r12, u.r13, u.r14, u.r15, u.rip, u.eflags, u.fs_base, u.gs_base};
  for (size_t i = 0; i < std::size(v); ++i) f.set_u64(l, int(i), v[i]);
  return f;
}

// A stopped child sharing two memory areas with us (code and data), so both sides see the same
// bytes at the same addresses.
class SteppedChild {
 public:
  SteppedChild() {
    code_ = static_cast<uint8_t*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE | PROT_EXEC,
                                       MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    data_ = static_cast<uint8_t*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    low_ = static_cast<uint8_t*>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                                      MAP_SHARED | MAP_ANONYMOUS | MAP_32BIT, -1, 0));
    REQUIRE(code_ != MAP_FAILED);
    REQUIRE(data_ != MAP_FAILED);
    REQUIRE(low_ != MAP_FAILED);
    std::memset(code_, 0xcc, 8192);
    pid_ = fork();
    if (pid_ == 0) {
      ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      raise(SIGSTOP);
      for (;;) pause();
    }
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    REQUIRE(WIFSTOPPED(status));
    REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &base_) == 0);
  }
  ~SteppedChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    munmap(code_, 8192);
    munmap(data_, 8192);
    munmap(low_, 4096);
  }
  uint64_t code(size_t off) const { return reinterpret_cast<uint64_t>(code_) + off; }
  uint64_t data(size_t off) const { return reinterpret_cast<uint64_t>(data_) + off; }
  uint64_t low(size_t off) const { return reinterpret_cast<uint64_t>(low_) + off; }
  void put64(uint64_t addr, uint64_t v) { std::memcpy(reinterpret_cast<void*>(addr), &v, 8); }
  uint64_t get64(uint64_t addr) {
    uint64_t v;
    std::memcpy(&v, reinterpret_cast<void*>(addr), 8);
    return v;
  }
  bool ours(uint64_t addr, size_t n) const {
    auto in = [&](uint64_t b, size_t size) { return addr >= b && addr + n <= b + size; };
    return in(code(0), 8192) || in(data(0), 8192) || in(low(0), 4096);
  }

  // Emulates and single-steps `bytes` placed at code(0x100) with registers from `setup`.
  void check(const std::vector<uint8_t>& bytes, const std::function<void(user_regs_struct&)>& setup,
             const std::string& what) {
    INFO(what);
    std::memset(code_ + 0x100, 0xcc, 64);
    std::memcpy(code_ + 0x100, bytes.data(), bytes.size());
    user_regs_struct u = base_;
    u.rip = code(0x100);
    u.rsp = data(0x800);
    u.eflags = 0x202;
    setup(u);

    BlockCache cache([this](uint64_t addr, std::span<uint8_t> out) -> size_t {
      if (!ours(addr, 1)) return 0;
      size_t n = out.size();
      while (n && !ours(addr, n)) --n;
      std::memcpy(out.data(), reinterpret_cast<void*>(addr), n);
      return n;
    });
    auto insn = cache.insn_at(u.rip);
    REQUIRE(insn.ok());
    REQUIRE(insn->first == bytes.size());
    REQUIRE(insn->second.has_value());

    RegisterLayout layout = test_layout();
    RegisterFile regs = to_file(layout, u);
    uint64_t wrote_at = 0, wrote = 0;
    int writes = 0;
    MemoryReader reader = [this](uint64_t addr, std::span<uint8_t> out) {
      if (!ours(addr, out.size())) return false;
      std::memcpy(out.data(), reinterpret_cast<void*>(addr), out.size());
      return true;
    };
    MemoryWriter writer = [&](uint64_t addr, std::span<const uint8_t> in) {
      REQUIRE(in.size() == 8);
      ++writes;
      wrote_at = addr;
      std::memcpy(&wrote, in.data(), 8);
      return true;
    };
    auto out = emulate_flow(*insn->second, regs, layout, reader, writer);
    if (!out.ok()) FAIL(out.error().message);

    // Ground truth: let the CPU execute it.
    REQUIRE(ptrace(PTRACE_SETREGS, pid_, nullptr, &u) == 0);
    REQUIRE(ptrace(PTRACE_SINGLESTEP, pid_, nullptr, nullptr) == 0);
    int status = 0;
    REQUIRE(waitpid(pid_, &status, 0) == pid_);
    REQUIRE(WIFSTOPPED(status));
    REQUIRE(WSTOPSIG(status) == SIGTRAP);
    user_regs_struct after{};
    REQUIRE(ptrace(PTRACE_GETREGS, pid_, nullptr, &after) == 0);

    CHECK(out->next_pc == after.rip);
    CHECK(regs.get_u64(layout, RegisterLayout::kRip) == after.rip);
    CHECK(regs.get_u64(layout, RegisterLayout::kRsp) == after.rsp);
    CHECK(regs.get_u64(layout, 2) == after.rcx);
    CHECK(out->taken == (after.rip != u.rip + bytes.size()));
    if (after.rsp < u.rsp) {  // the CPU pushed a return address
      CHECK(writes == 1);
      CHECK(wrote_at == after.rsp);
      CHECK(wrote == get64(after.rsp));
    } else {
      CHECK(writes == 0);
    }
  }

 private:
  pid_t pid_ = -1;
  user_regs_struct base_{};
  uint8_t* code_ = nullptr;
  uint8_t* data_ = nullptr;
  uint8_t* low_ = nullptr;
};

constexpr uint64_t CF = 1, PF = 4, ZF = 0x40, SF = 0x80, OF = 0x800;

std::vector<uint8_t> le32(std::vector<uint8_t> head, int32_t v) {
  for (int i = 0; i < 4; ++i) head.push_back(uint8_t(uint32_t(v) >> (8 * i)));
  return head;
}

}  // namespace

TEST_CASE("flow emulator: conditional jumps match the CPU for all conditions", "[flow]") {
  SteppedChild c;
  const uint64_t flag_sets[] = {0, CF, PF, ZF, SF, OF, SF | OF, ZF | SF, CF | ZF, OF | ZF, CF | PF | ZF | SF | OF};
  for (unsigned cc = 0; cc < 16; ++cc) {
    for (uint64_t fl : flag_sets) {
      auto setup = [fl](user_regs_struct& u) { u.eflags = 0x202 | fl; };
      c.check({uint8_t(0x70 + cc), 0x20}, setup, "jcc rel8 cc=" + std::to_string(cc) + " fl=" + std::to_string(fl));
      c.check({0x0f, uint8_t(0x80 + cc), 0x40, 0x02, 0x00, 0x00}, setup,
              "jcc rel32 cc=" + std::to_string(cc) + " fl=" + std::to_string(fl));
    }
  }
  // Backwards jump, and a jcc with a bnd prefix.
  c.check({0x75, 0x80}, [](user_regs_struct&) {}, "jne backwards");
  c.check({0xf2, 0x74, 0x10}, [](user_regs_struct& u) { u.eflags |= ZF; }, "bnd je");
}

TEST_CASE("flow emulator: direct jumps, calls and returns match the CPU", "[flow]") {
  SteppedChild c;
  auto none = [](user_regs_struct&) {};
  c.check({0xeb, 0x10}, none, "jmp rel8");
  c.check(le32({0xe9}, 0x300), none, "jmp rel32");
  c.check(le32({0xe8}, 0x300), none, "call rel32");
  c.check(le32({0xf2, 0xe8}, 0x300), none, "bnd call");
  c.check(le32({0x66, 0x66, 0x48, 0xe8}, 0x300), none, "data16 data16 rex.W call (TLS sequence)");
  c.put64(c.data(0x800), c.code(0x700));
  c.check({0xc3}, none, "ret");
  c.check({0xc2, 0x10, 0x00}, none, "ret 0x10");
  c.check({0xf2, 0xc3}, none, "bnd ret");
  c.check({0xf3, 0xc3}, none, "rep ret");
}

TEST_CASE("flow emulator: indirect jumps and calls match the CPU", "[flow]") {
  SteppedChild c;
  uint64_t target = c.code(0x900);
  c.check({0xff, 0xe0}, [&](user_regs_struct& u) { u.rax = target; }, "jmp *rax");
  c.check({0x3e, 0xff, 0xe0}, [&](user_regs_struct& u) { u.rax = target; }, "notrack jmp *rax");
  c.check({0x41, 0xff, 0xe3}, [&](user_regs_struct& u) { u.r11 = target; }, "jmp *r11");
  c.check({0xff, 0xd0}, [&](user_regs_struct& u) { u.rax = target; }, "call *rax");
  c.check({0x3e, 0xff, 0xd2}, [&](user_regs_struct& u) { u.rdx = target; }, "notrack call *rdx");
  c.check({0x41, 0xff, 0xd7}, [&](user_regs_struct& u) { u.r15 = target; }, "call *r15");

  c.put64(c.data(0x100), target + 1);
  c.check({0xff, 0x20}, [&](user_regs_struct& u) { u.rax = c.data(0x100); }, "jmp *(rax)");
  c.check({0x41, 0xff, 0x14, 0x24}, [&](user_regs_struct& u) { u.r12 = c.data(0x100); }, "call *(r12)");
  c.check({0x41, 0xff, 0x65, 0x08}, [&](user_regs_struct& u) { u.r13 = c.data(0xf8); }, "jmp *8(r13)");
  c.check({0xff, 0x54, 0xc8, 0x10}, [&](user_regs_struct& u) { u.rax = c.data(0xb0); u.rcx = 10; },
          "call *0x10(rax,rcx,8)");
  c.check({0x42, 0xff, 0x64, 0x0d, 0xf0}, [&](user_regs_struct& u) { u.rbp = c.data(0x100); u.r9 = 0x10; },
          "jmp *-0x10(rbp,r9,1)");
  c.check(le32({0x42, 0xff, 0x24, 0xcd}, 8), [&](user_regs_struct& u) { u.r9 = (c.data(0x100) - 8) / 8; },
          "jmp *8(,r9,8)");
  c.put64(c.data(0x800 + 8), target + 2);
  c.check({0xff, 0x54, 0x24, 0x08}, [](user_regs_struct&) {}, "call *8(rsp)");
  c.check(le32({0xff, 0x94, 0x24}, 8), [](user_regs_struct&) {}, "call *disp32(rsp)");

  // rip-relative: the pointer lies in the code page after the instruction.
  c.put64(c.code(0x180), target + 3);
  c.check(le32({0xff, 0x25}, 0x180 - 0x106), [](user_regs_struct&) {}, "jmp *disp(rip)");
  c.check(le32({0x3e, 0xff, 0x15}, 0x180 - 0x107), [](user_regs_struct&) {}, "notrack call *disp(rip)");

  // Segment bases.
  c.put64(c.data(0x410), target + 4);
  c.check(le32({0x64, 0xff, 0x24, 0x25}, 0x10), [&](user_regs_struct& u) { u.fs_base = c.data(0x400); },
          "jmp *fs:0x10");
  c.check(le32({0x65, 0xff, 0x14, 0x25}, 0x10), [&](user_regs_struct& u) { u.gs_base = c.data(0x400); },
          "call *gs:0x10");
  c.check({0x64, 0xff, 0x60, 0x10}, [&](user_regs_struct& u) { u.fs_base = c.data(0x300); u.rax = 0x100; },
          "jmp *fs:0x10(rax)");

  // 32-bit address size: the effective address is truncated.
  c.put64(c.low(0x20), target + 5);
  c.check({0x67, 0xff, 0x20}, [&](user_regs_struct& u) { u.rax = 0xdead000000000000ull | c.low(0x20); },
          "jmp *(eax)");
}

TEST_CASE("flow emulator: loop family matches the CPU", "[flow]") {
  SteppedChild c;
  for (uint64_t rcx : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{0x100000000}, uint64_t{0x100000001}, ~uint64_t{0}}) {
    for (uint64_t fl : {uint64_t{0}, ZF}) {
      auto setup = [=](user_regs_struct& u) { u.rcx = rcx; u.eflags = 0x202 | fl; };
      std::string s = " rcx=" + std::to_string(rcx) + " zf=" + std::to_string(fl != 0);
      c.check({0xe2, 0x20}, setup, "loop" + s);
      c.check({0xe1, 0x20}, setup, "loope" + s);
      c.check({0xe0, 0x20}, setup, "loopne" + s);
      c.check({0xe3, 0x20}, setup, "jrcxz" + s);
      c.check({0x67, 0xe3, 0x20}, setup, "jecxz" + s);
      c.check({0x67, 0xe2, 0x20}, setup, "loop (ecx)" + s);
      c.check({0x67, 0xe0, 0xf0}, setup, "loopne (ecx) backwards" + s);
    }
  }
}

TEST_CASE("flow emulator: refuses what it cannot emulate", "[flow]") {
  RegisterLayout layout = test_layout();
  RegisterFile regs;
  regs.bytes.assign(layout.total_bytes, 0);
  regs.valid.assign(layout.regs.size(), true);
  MemoryReader no_read = [](uint64_t, std::span<uint8_t>) { return false; };
  MemoryWriter no_write = [](uint64_t, std::span<const uint8_t>) { return false; };
  FlowInsn sys;
  sys.addr = 0x1000;
  sys.len = 2;
  sys.kind = FlowKind::Syscall;
  sys.bytes[0] = 0x0f;
  sys.bytes[1] = 0x05;
  auto r = emulate_flow(sys, regs, layout, no_read, no_write);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ENOTSUP);
  FlowInsn trap = sys;
  trap.kind = FlowKind::Trap;
  trap.len = 1;
  trap.bytes[0] = 0xcc;
  CHECK(emulate_flow(trap, regs, layout, no_read, no_write).error().code == ENOTSUP);

  // Unreadable return address / unwritable stack: EFAULT and registers untouched.
  regs.set_u64(layout, RegisterLayout::kRsp, 0x5000);
  regs.set_u64(layout, RegisterLayout::kRip, 0x1000);
  FlowInsn ret;
  ret.addr = 0x1000;
  ret.len = 1;
  ret.kind = FlowKind::Return;
  ret.bytes[0] = 0xc3;
  auto rr = emulate_flow(ret, regs, layout, no_read, no_write);
  REQUIRE_FALSE(rr.ok());
  CHECK(rr.error().code == EFAULT);
  FlowInsn call;
  call.addr = 0x1000;
  call.len = 5;
  call.kind = FlowKind::Call;
  call.direct_target = 0x2000;
  call.bytes[0] = 0xe8;
  CHECK(emulate_flow(call, regs, layout, no_read, no_write).error().code == EFAULT);
  CHECK(regs.get_u64(layout, RegisterLayout::kRsp) == 0x5000);
  CHECK(regs.get_u64(layout, RegisterLayout::kRip) == 0x1000);

  // 0x66 without REX.W: the CPU vendor decides, so we refuse.
  FlowInsn j16;
  j16.addr = 0x1000;
  j16.len = 3;
  j16.kind = FlowKind::IndirectJump;
  j16.bytes[0] = 0x66;
  j16.bytes[1] = 0xff;
  j16.bytes[2] = 0xe0;
  CHECK(emulate_flow(j16, regs, layout, no_read, no_write).error().code == ENOTSUP);
}
