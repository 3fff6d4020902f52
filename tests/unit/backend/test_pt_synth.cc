// A software history written as Intel PT (backend/btrace/pt_synth.h): the packets' bytes as the
// SDM encodes them, and the stream for small paths through known code (GDB's decoding of whole
// programs is tests/integration/test_btrace_pt_synth.py).
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "backend/btrace/pt_synth.h"

using backend::Branch;
using backend::BlockCache;
using backend::PtPacketWriter;
using backend::synthesize_pt;
using Bytes = std::vector<uint8_t>;

namespace {

Bytes psb_plus() {
  Bytes b;
  for (int i = 0; i < 8; ++i) b.insert(b.end(), {0x02, 0x82});
  b.insert(b.end(), {0x99, 0x01, 0x02, 0x23});
  return b;
}

// header (IPBytes 011 = 6 bytes, sign-extended) and the ip's low 48 bits
Bytes ip(uint8_t kind, uint64_t v) {
  Bytes b{static_cast<uint8_t>(0x60 | kind)};
  for (int i = 0; i < 6; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return b;
}
Bytes tip(uint64_t v) { return ip(0x0d, v); }
Bytes pge(uint64_t v) { return ip(0x11, v); }
Bytes fup(uint64_t v) { return ip(0x1d, v); }
const Bytes kPgdNoIp{0x01};

Bytes tnt(std::initializer_list<int> oldest_first) {
  uint64_t payload = 1;
  for (int bit : oldest_first) payload = (payload << 1) | (bit ? 1 : 0);
  Bytes b{0x02, 0xa3};
  for (int i = 0; i < 6; ++i) b.push_back(static_cast<uint8_t>(payload >> (8 * i)));
  return b;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// 0x400000: test rax,rax          0x400003: je 0x400007        0x400005: nop; nop
// 0x400007: jne 0x40000a          0x400009: nop                0x40000a: call 0x400014
// 0x40000f: syscall               0x400011: ret                0x400012: nop; nop
// 0x400014: ret
constexpr uint64_t kBase = 0x400000;
const Bytes kCode{0x48, 0x85, 0xc0, 0x74, 0x02, 0x90, 0x90, 0x75, 0x01, 0x90, 0xe8, 0x05, 0x00,
                  0x00, 0x00, 0x0f, 0x05, 0xc3, 0x90, 0x90, 0xc3};

// The code `bytes` at `base`, nothing elsewhere.
BlockCache code_at(uint64_t base, Bytes bytes) {
  return BlockCache([base, bytes = std::move(bytes)](uint64_t addr, std::span<uint8_t> out) -> size_t {
    if (addr < base || addr >= base + bytes.size()) return 0;
    size_t n = std::min(out.size(), static_cast<size_t>(base + bytes.size() - addr));
    std::memcpy(out.data(), bytes.data() + (addr - base), n);
    return n;
  });
}
BlockCache code() { return code_at(kBase, kCode); }

}  // namespace

TEST_CASE("PT packets are encoded as the SDM has them", "[pt_synth]") {
  PtPacketWriter w;
  w.psb_plus();
  CHECK(w.take() == psb_plus());
  PtPacketWriter t;
  t.ip(PtPacketWriter::IpKind::Tip, 0x7fffdeadbeef);
  t.ip(PtPacketWriter::IpKind::TipPge, 0x401000);
  t.ip(PtPacketWriter::IpKind::Fup, 0x401002);
  t.ip_suppressed(PtPacketWriter::IpKind::TipPgd);
  CHECK(t.take() == cat({Bytes{0x6d, 0xef, 0xbe, 0xad, 0xde, 0xff, 0x7f}, Bytes{0x71, 0x00, 0x10, 0x40, 0, 0, 0},
                         Bytes{0x7d, 0x02, 0x10, 0x40, 0, 0, 0}, Bytes{0x01}}));
}

TEST_CASE("conditional branches go into long TNT packets, 47 at most, flushed before other packets", "[pt_synth]") {
  PtPacketWriter w;
  w.tnt(true);
  w.tnt(false);
  w.tnt(true);
  w.ip(PtPacketWriter::IpKind::Tip, 0x1234);
  // 02 a3, payload 0b1101: the stop bit over taken, not taken, taken (oldest highest)
  CHECK(w.take() == cat({Bytes{0x02, 0xa3, 0x0d, 0, 0, 0, 0, 0}, tip(0x1234)}));
  PtPacketWriter full;
  for (int i = 0; i < 48; ++i) full.tnt(true);
  Bytes b = full.take();
  REQUIRE(b.size() == 16);  // 47 bits, then 1
  uint64_t first = 0;
  for (int i = 0; i < 6; ++i) first |= uint64_t{b[2 + i]} << (8 * i);
  CHECK(first == (uint64_t{1} << 48) - 1);  // stop bit 47, 47 taken
  CHECK(Bytes(b.begin() + 8, b.end()) == Bytes{0x02, 0xa3, 0x03, 0, 0, 0, 0, 0});
}

TEST_CASE("a path: not-taken and taken conditions, a direct call, a return, a syscall, the stop", "[pt_synth]") {
  auto c = code();
  // je not taken, jne taken, call (direct: no packet), ret back, the syscall returns in place,
  // the thread stops at the ret at 0x400011.
  std::vector<Branch> h{{0x400007, 0x40000a}, {0x40000a, 0x400014}, {0x400014, 0x40000f}};
  auto got = synthesize_pt(h, kBase, 0x400011, c);
  CHECK(got == cat({psb_plus(), pge(kBase), tnt({0, 1}), tip(0x40000f), kPgdNoIp, pge(0x400011), fup(0x400011), kPgdNoIp}));
}

TEST_CASE("a signal: an asynchronous branch after the last instruction run, and rt_sigreturn: a far branch", "[pt_synth]") {
  auto c = code();
  // The je not taken, then at the first nop (0x400005, not a branch) a signal: handler 0x400012.
  std::vector<Branch> h{{0x400005, 0x400012}};
  auto got = synthesize_pt(h, kBase, 0x400013, c);
  CHECK(got == cat({psb_plus(), pge(kBase), tnt({0}), fup(0x400006), tip(0x400012), fup(0x400013), kPgdNoIp}));
  // A signal right after a taken conditional branch (the history shows the branch going to the
  // handler): the branch taken, then interrupted at its target.
  std::vector<Branch> r{{0x400003, 0x400012}};
  got = synthesize_pt(r, kBase, 0x400013, c);
  CHECK(got == cat({psb_plus(), pge(kBase), tnt({1}), fup(0x400007), tip(0x400012), fup(0x400013), kPgdNoIp}));
  // rt_sigreturn: the syscall at 0x40000f goes back to where the signal came.
  std::vector<Branch> s{{0x40000a, 0x400014}, {0x400014, 0x40000f}, {0x40000f, 0x400005}};
  got = synthesize_pt(s, 0x400007, 0x400006, c);
  CHECK(got == cat({psb_plus(), pge(0x400007), tnt({0}), tip(0x40000f), tip(0x400005), fup(0x400006), kPgdNoIp}));
}

TEST_CASE("where the history and the code disagree, tracing is off there: a gap, never a wrong path", "[pt_synth]") {
  auto c = code();
  // A branch from the ret at 0x400014 although the path from 0x400000 must take the call first.
  std::vector<Branch> h{{0x400014, 0x40000f}};
  auto got = synthesize_pt(h, kBase, 0x400011, c);
  // not taken, not taken, then the call that would have to be taken: off at that block's start
  CHECK(got == cat({psb_plus(), pge(kBase), tnt({0, 0}), fup(0x400009), kPgdNoIp, pge(0x40000f), kPgdNoIp, pge(0x400011),
                    fup(0x400011), kPgdNoIp}));
  // A call through a null pointer: a branch to 0 (no gap: software histories have none).
  std::vector<Branch> null{{0x400014, 0}};
  got = synthesize_pt(null, 0x400014, 0, c);
  CHECK(got == cat({psb_plus(), pge(0x400014), tip(0), fup(0), kPgdNoIp}));
  // Unreadable code: off where the decoder is.
  std::vector<Branch> far{{0x900000, 0x400000}};
  got = synthesize_pt(far, 0x800000, 0x400003, c);
  CHECK(got == cat({psb_plus(), pge(0x800000), fup(0x800000), kPgdNoIp, pge(0x400000), fup(0x400003), kPgdNoIp}));
}

TEST_CASE("an indirect branch to the next instruction is no branch in the history, but a TIP in PT", "[pt_synth]") {
  // 0x500000: jmp *%rax (to 0x500002, the next instruction: a jump table's case that follows)
  // 0x500002: ret
  auto c = code_at(0x500000, Bytes{0xff, 0xe0, 0xc3});
  std::vector<Branch> h{{0x500002, 0x400000}};
  CHECK(synthesize_pt(h, 0x500000, 0x400000, c) ==
        cat({psb_plus(), pge(0x500000), tip(0x500002), tip(0x400000), fup(0x400000), kPgdNoIp}));
}

TEST_CASE("an instruction capstone does not know (CET's rdssp) is walked over by its length", "[pt_synth]") {
  // 0x600000: rdsspq %rax (f3 48 0f 1e c8); 0x600005: test %rax,%rax; 0x600008: je +0x10;
  // 0x60000a: ret
  auto c = code_at(0x600000, Bytes{0xf3, 0x48, 0x0f, 0x1e, 0xc8, 0x48, 0x85, 0xc0, 0x74, 0x10, 0xc3});
  std::vector<Branch> h{{0x60000a, 0x400000}};
  CHECK(synthesize_pt(h, 0x600000, 0x400000, c) ==
        cat({psb_plus(), pge(0x600000), tnt({0}), tip(0x400000), fup(0x400000), kPgdNoIp}));
}

TEST_CASE("no start: only PSB+, and a stop before any branch", "[pt_synth]") {
  auto c = code();
  CHECK(synthesize_pt({}, 0, 0x400000, c) == psb_plus());
  CHECK(synthesize_pt({}, kBase, 0x400005, c) == cat({psb_plus(), pge(kBase), tnt({0}), fup(0x400005), kPgdNoIp}));
}
