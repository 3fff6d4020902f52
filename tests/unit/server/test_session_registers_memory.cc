// Session, registers and memory: g/G/p/P against the fake's RegisterFile (the real x86-64
// layout), m/M/x/X against its memory ranges.
#include <catch2/catch.hpp>

#include "tests/unit/server/session_harness.h"

using backend::RegisterSet;
using fake::FakeProcess;
using fake::SessionHarness;

namespace {

// Byte offsets in the layout for XCR0 = x87|SSE|AVX, counted by hand from GDB's amd64
// target description: 16 GPRs, rip, eflags (4), 6 segments (4), st0-7 (10), 8 x87 control
// (4), xmm0-15 (16), mxcsr (4), orig_rax, fs_base, gs_base, ymm0h-15h (16).
constexpr size_t kRip = 128, kEflags = 136, kXmm3 = 276 + 3 * 16, kFsBase = 544, kYmm15h = 800, kTotal = 816;
constexpr int kRegs = 76;

void put(std::string& hex, size_t byte_offset, std::string_view digits) { hex.replace(byte_offset * 2, digits.size(), digits); }

struct Setup {
  SessionHarness h;
  FakeProcess& p = h.add_process(0x64, {0x64, 0x65});
  Setup() {
    auto& r = p.regs(0x64);
    p.set_reg(0x64, 0, 0x1122334455667788);  // rax
    p.set_reg(0x64, 16, 0x401000);           // rip
    p.set_reg(0x64, 17, 0x246);              // eflags
    p.set_reg(0x64, 58, 0x7ffff7d8a740);     // fs_base
    r.bytes[kYmm15h + 15] = 0xab;            // top byte of ymm15h
    r.valid[43] = false;                     // xmm3 unavailable
  }
};

}  // namespace

TEST_CASE("registers: g sends every register in layout order, 'x' for unavailable ones") {
  Setup s;
  REQUIRE(static_cast<int>(s.p.register_layout().regs.size()) == kRegs);
  REQUIRE(s.p.register_layout().total_bytes == kTotal);
  std::string expected(kTotal * 2, '0');
  put(expected, 0, "8877665544332211");
  put(expected, kRip, "0010400000000000");
  put(expected, kEflags, "46020000");
  put(expected, kFsBase, "40a7d8f7ff7f0000");
  put(expected, kXmm3, std::string(32, 'x'));
  put(expected, kYmm15h + 15, "ab");
  CHECK(s.h.request("g") == expected);
  CHECK(s.p.register_reads.back() == std::pair<pid_t, RegisterSet>{0x64, RegisterSet::All});
}

TEST_CASE("registers: g without AVX is the shorter layout") {
  SessionHarness h;
  h.add_process(std::make_unique<FakeProcess>(0x64, std::vector<pid_t>{0x64}, 0x3));
  CHECK(h.request("g") == std::string(560 * 2, '0'));
}

TEST_CASE("registers: g errors come from the backend") {
  Setup s;
  s.p.register_read_error = backend::Error{ESRCH, "thread gone"};
  CHECK(s.h.request("g") == "E.thread gone");
  CHECK(s.h.request("g;thread:65;") == "E.thread gone");
  CHECK(s.h.request("g;thread:zz;") == "E.g: bad thread suffix");
  CHECK(s.h.request("gxx") == "E.g: unexpected argument");
}

TEST_CASE("registers: p reads one register, from the set it is in") {
  Setup s;
  CHECK(s.h.request("p10") == "0010400000000000");
  CHECK(s.p.register_reads.back().second == RegisterSet::General);
  CHECK(s.h.request("p11") == "46020000");
  CHECK(s.h.request("p3a") == "40a7d8f7ff7f0000");
  CHECK(s.p.register_reads.back().second == RegisterSet::General);  // fs_base comes with GETREGS
  CHECK(s.h.request("p2b") == std::string(32, 'x'));
  CHECK(s.p.register_reads.back().second == RegisterSet::All);
  CHECK(s.h.request("p4b") == std::string(30, '0') + "ab");
  CHECK(s.h.request("p4c") == "E.No such register.");  // one past the last
  CHECK(s.h.request("pzz") == "E.p: bad register number");
}

TEST_CASE("registers: LLDB's thread: suffix picks the thread, Hg does otherwise") {
  Setup s;
  s.p.set_reg(0x65, 16, 0x402000);
  CHECK(s.h.request("p10;thread:65;") == "0020400000000000");
  CHECK(s.p.register_reads.back().first == 0x65);
  CHECK(s.h.request("p10") == "0010400000000000");
  CHECK(s.h.request("p10;thread:99;") == "E.no such thread");
}

TEST_CASE("registers: G writes the whole file, a short G only its prefix") {
  Setup s;
  std::string hex;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < kTotal; ++i) {
    bytes.push_back(static_cast<uint8_t>(i * 7));
    hex += fmt::format("{:02x}", bytes.back());
  }
  CHECK(s.h.request("G" + hex) == "OK");
  REQUIRE(s.p.register_writes.size() == 1);
  CHECK(s.p.register_writes[0].first == 0x64);
  CHECK(s.p.regs(0x64).bytes == bytes);

  CHECK(s.h.request("Gffffffffffffffff") == "OK");
  auto expected = bytes;
  std::fill_n(expected.begin(), 8, 0xff);
  CHECK(s.p.regs(0x64).bytes == expected);

  CHECK(s.h.request("G0102;thread:65;") == "OK");
  CHECK(s.p.register_writes.back().first == 0x65);
  CHECK(s.p.regs(0x65).bytes[0] == 1);
  CHECK(s.p.regs(0x65).bytes[1] == 2);

  CHECK(s.h.request("Gzz") == "E.G: bad hex");
  s.p.register_write_error = backend::Error{EIO, "no"};
  CHECK(s.h.request("G00") == "E.no");
}

TEST_CASE("registers: P writes one register and makes it valid") {
  Setup s;
  CHECK(s.h.request("P10=0020400000000000") == "OK");
  CHECK(s.p.regs(0x64).pc(s.p.register_layout()) == 0x402000);
  CHECK(s.h.request("P2b=00112233445566778899aabbccddeeff") == "OK");
  CHECK(s.p.regs(0x64).valid[43]);
  CHECK(s.h.request("p2b") == "00112233445566778899aabbccddeeff");
  CHECK(s.h.request("P10=00") == "E.Wrong register size.");  // wrong size
  CHECK(s.h.request("P4c=00") == "E.No such register.");  // no such register
  CHECK(s.h.request("P10") == "E.P: missing '='");     // no value
  CHECK(s.p.register_writes.size() == 2);
}

TEST_CASE("memory: m reads hex, short reads give what was readable, unmapped is E01") {
  Setup s;
  std::vector<uint8_t> bytes;
  for (int i = 0; i < 16; ++i) bytes.push_back(static_cast<uint8_t>(i));
  s.p.map_memory(0x1000, bytes);
  CHECK(s.h.request("m1000,4") == "00010203");
  CHECK(s.h.request("m100c,8") == "0c0d0e0f");
  CHECK(s.h.request("m1000,ffffffff") == "000102030405060708090a0b0c0d0e0f");
  CHECK(s.h.request("m2000,4") == "E05");
  CHECK(s.h.request("mfff,4") == "E05");  // the first byte is unreadable
  CHECK(s.h.request("m1000") == "E.m: bad addr,len");
  CHECK(s.h.request("m1000,zz") == "E.m: bad addr,len");
}

TEST_CASE("memory: long replies are run-length encoded on the wire") {
  Setup s;
  s.p.map_memory(0x4000, std::vector<uint8_t>(64, 0));
  s.h.send_raw(fake::frame("m4000,40"));
  auto out = fake::split_output(s.h.take_written());
  REQUIRE(out.packets.size() == 1);
  CHECK(out.packets[0] == std::string(128, '0'));
  CHECK(out.raw_packets[0].size() < 40);
  CHECK(out.raw_packets[0].find('*') != std::string::npos);
  CHECK_FALSE(out.bad_checksum);
}

TEST_CASE("memory: x reads binary with '}' escapes, after a 'b' for GDB") {
  Setup s;
  s.p.map_memory(0x3000, {0x23, 0x24, 0x7d, 0x2a, 0x41, 0x00});
  // GDB 16.1 sends x before any qSupported said binary-upload+: GDB's format all the same.
  std::string reply = s.h.request("x3000,6");
  CHECK(reply == std::string("b}\x03}\x04}]}\x0a" "A\0", 11));
  CHECK(fake::unescape(reply.substr(1)) == std::string("#$}*A\0", 6));
  CHECK(s.h.request("x0,0") == "b");
  CHECK(s.h.request("x2000,4") == "E05");
  // GDB 16/17 offer error-message+ and get the reason; m as well.
  s.h.request(std::string(SessionHarness::kGdbOffer) + ";error-message+");
  CHECK(s.h.request("x2000,4") == "E.unmapped");
  CHECK(s.h.request("m2000,4") == "E.unmapped");
  CHECK(s.h.request("x3004,2") == std::string("bA\0", 3));
}

TEST_CASE("memory: x for LLDB is the bare data, and its probe x0,0 is OK") {
  Setup s;
  s.p.map_memory(0x3000, {0x23, 0x62, 0x41});
  s.h.lldb_handshake();
  CHECK(s.h.request("x0,0") == "OK");
  CHECK(s.h.request("x3000,3") == "}\x03" "bA");  // a 'b' in the data is data
  CHECK(s.h.request("x2000,4").rfind("E05", 0) == 0);
}

TEST_CASE("memory: M and X write, partial and unmapped writes are errors") {
  Setup s;
  s.p.map_memory(0x1000, std::vector<uint8_t>(16, 0));
  CHECK(s.h.request("M1000,2:aabb") == "OK");
  CHECK(s.p.memory_at(0x1000, 3) == std::vector<uint8_t>{0xaa, 0xbb, 0x00});
  REQUIRE(s.p.memory_writes.size() == 1);
  CHECK(s.p.memory_writes[0].addr == 0x1000);
  CHECK(s.p.memory_writes[0].data == std::vector<uint8_t>{0xaa, 0xbb});

  CHECK(s.h.request(std::string("X1004,4:}\x03}\x04}]a")) == "OK");
  CHECK(s.p.memory_at(0x1004, 4) == std::vector<uint8_t>{'#', '$', '}', 'a'});

  CHECK(s.h.request("M100f,2:ccdd") == "E.Cannot write memory at 0x1010.");  // runs off the end: one byte written
  CHECK(s.h.request("M2000,1:00") == "E.unmapped");
  size_t writes = s.p.count("write_memory");
  CHECK(s.h.request("M1000,3:aabb") == "E.M/X: length does not match data");
  CHECK(s.h.request("M1000,1:zz") == "E.M: bad hex");
  CHECK(s.h.request("X1000,0:") == "OK");       // GDB's probe: nothing written
  CHECK(s.p.count("write_memory") == writes);
}
