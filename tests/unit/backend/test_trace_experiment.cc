// Tracepoints without a process (backend/trace/): frames in gdbserver's byte layout, the trace
// buffer (linear and circular, its raw bytes for qTBuffer), and the experiment's rules at hits
// (conditions, pass counts, a full buffer, while-stepping, trace state variables, tfind), with
// a fake HitSite made of a register block and a memory map. Also the agent-expression trace
// ops with collection callbacks.
#include <catch2/catch.hpp>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "backend/points/agent_expr.h"
#include "backend/trace/trace_buffer.h"
#include "backend/trace/trace_experiment.h"

using namespace backend::trace;

namespace {

using Bytes = std::vector<uint8_t>;

// Agent opcodes (GDB's manual, "Bytecode Descriptions"; the same values as agent_expr.cc).
enum : uint8_t {
  ADD = 0x02, TRACE = 0x0c, TRACE_QUICK = 0x0d, EQUAL = 0x13, DIV_SIGNED = 0x05, CONST8 = 0x22,
  CONST32 = 0x24, CONST64 = 0x25, REG = 0x26, END = 0x27, POP = 0x29, GETV = 0x2c, SETV = 0x2d,
  TRACEV = 0x2e, TRACENZ = 0x2f, TRACE16 = 0x30,
};

struct Asm {
  Bytes b;
  Asm& op(uint8_t o) { b.push_back(o); return *this; }
  Asm& be(uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Asm& c8(uint8_t v) { return op(CONST8).be(v, 1); }
  Asm& c64(uint64_t v) { return op(CONST64).be(v, 8); }
  Asm& op1(uint8_t o, uint8_t v) { return op(o).be(v, 1); }
  Asm& op2(uint8_t o, uint16_t v) { return op(o).be(v, 2); }
  Asm& end() { return op(END); }
};

void put_le(Bytes& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A stopped thread: three 8-byte registers (the pc the third, at byte 16) and a memory map.
constexpr size_t kBlock = 24;
constexpr size_t kPcOffset = 16;
struct FakeSite {
  uint64_t regs[3] = {0, 0, 0};
  std::map<uint64_t, Bytes> memory;  // non-overlapping regions
  uint64_t now = 0x1000;
  int register_block_calls = 0;

  void pc(uint64_t v) { regs[2] = v; }
  Bytes block() const {
    Bytes b;
    for (uint64_t r : regs) put_le(b, r, 8);
    return b;
  }
  bool read(uint64_t addr, std::span<uint8_t> out) const {
    for (const auto& [start, bytes] : memory) {
      if (addr >= start && addr - start + out.size() <= bytes.size()) {
        std::memcpy(out.data(), bytes.data() + (addr - start), out.size());
        return true;
      }
    }
    return false;
  }
  HitSite site() {
    HitSite s;
    s.register_block = [this]() -> std::optional<Bytes> {
      ++register_block_calls;
      return block();
    };
    s.reg = [this](int n) -> std::optional<uint64_t> {
      if (n < 0 || n > 2) return std::nullopt;
      return regs[n];
    };
    s.read = [this](uint64_t addr, std::span<uint8_t> out) { return read(addr, out); };
    s.now_usec = now;
    return s;
  }
};

Tracepoint tracepoint(uint32_t number, uint64_t addr) {
  Tracepoint tp;
  tp.number = number;
  tp.addr = addr;
  return tp;
}

TraceExperiment::ActionDef regs_action(bool stepping = false) {
  return {CollectRegisters{{0x07}}, "R07", stepping};
}
TraceExperiment::ActionDef mem_action(uint64_t addr, uint64_t len, bool stepping = false) {
  return {CollectMemory{-1, addr, len}, "M-1," + std::to_string(addr) + "," + std::to_string(len), stepping};
}
TraceExperiment::ActionDef expr_action(Bytes code, bool stepping = false) {
  return {CollectExpression{std::move(code)}, "X", stepping};
}

TraceExperiment experiment_with_block() {
  TraceExperiment e;
  e.set_register_block_size(kBlock);
  e.set_pc_offset(kPcOffset);
  return e;
}

Bytes frame_bytes(uint32_t tp, size_t payload) {  // a frame of `payload` block bytes (one M block)
  FrameBuilder f(tp);
  REQUIRE(payload >= 11);
  f.add_memory(0x1000, Bytes(payload - 11, 0xaa));
  return f.finish();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Frames

TEST_CASE("trace frames: the byte layout of gdbserver", "[trace][frames]") {
  // tracepoint 1: M of 4 bytes at 0x404028 holding 42, then V for variable 2 = 7
  FrameBuilder f(1);
  Bytes v{42, 0, 0, 0};
  f.add_memory(0x404028, v);
  f.add_variable(2, 7);
  CHECK(f.size() == 0x1c);
  CHECK(f.tracepoint() == 1u);
  Bytes expected{0x01, 0x00, 0x1c, 0x00, 0x00, 0x00,                          // header
                 'M',  0x28, 0x40, 0x40, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 42, 0, 0, 0,
                 'V',  0x02, 0x00, 0x00, 0x00, 0x07, 0, 0, 0, 0, 0, 0, 0};
  CHECK(f.finish() == expected);

  FrameBuilder empty(3);
  CHECK(empty.finish() == Bytes{0x03, 0, 0, 0, 0, 0});
  CHECK(FrameView(empty.finish()).memory(kBlock).empty());
  CHECK_FALSE(FrameView(empty.finish()).registers(kBlock));
}

TEST_CASE("trace frames: R, M and V blocks read back", "[trace][frames]") {
  FakeSite s;
  s.regs[0] = 0x1111;
  s.pc(0x401000);
  Bytes regs = s.block();
  FrameBuilder f(7);
  f.add_registers(regs);
  f.add_memory(0x600000, Bytes{1, 2, 3, 4});
  f.add_variable(5, -2);
  f.add_memory(0x700000, Bytes{9, 8});
  Bytes bytes = f.finish();
  CHECK(bytes.size() == 6 + 1 + kBlock + (11 + 4) + 13 + (11 + 2));
  FrameView view(bytes);
  CHECK(view.tracepoint() == 7u);
  auto r = view.registers(kBlock);
  REQUIRE(r);
  CHECK(Bytes(r->begin(), r->end()) == regs);
  auto mem = view.memory(kBlock);
  REQUIRE(mem.size() == 2);
  CHECK(mem[0].addr == 0x600000u);
  CHECK(Bytes(mem[0].bytes.begin(), mem[0].bytes.end()) == Bytes{1, 2, 3, 4});
  CHECK(mem[1].addr == 0x700000u);
  CHECK(mem[1].bytes.size() == 2);
  CHECK(view.variables(kBlock) == std::vector<std::pair<uint32_t, int64_t>>{{5, -2}});

  // read: from the block holding the start, up to that block's end
  Bytes out(4, 0xee);
  CHECK(view.read(0x600001, out, kBlock) == 3);
  CHECK(out == Bytes{2, 3, 4, 0xee});
  Bytes two(2);
  CHECK(view.read(0x600000, two, kBlock) == 2);
  CHECK(two == Bytes{1, 2});
  CHECK(view.read(0x5fffff, out, kBlock) == 0);  // the block starts after addr
  CHECK(view.read(0x600004, out, kBlock) == 0);
  CHECK(view.read(0x700001, out, kBlock) == 1);
  CHECK(out[0] == 8);
}

TEST_CASE("trace frames: memory over 64 KiB is split in blocks of 0xffff", "[trace][frames]") {
  Bytes big(0x10005);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 7);
  FrameBuilder f(2);
  f.add_memory(0x10000, big);
  CHECK(f.size() == 2 * 11 + big.size());
  Bytes bytes = f.finish();
  FrameView view(bytes);
  auto mem = view.memory(0);
  REQUIRE(mem.size() == 2);
  CHECK(mem[0].addr == 0x10000u);
  CHECK(mem[0].bytes.size() == 0xffffu);
  CHECK(mem[1].addr == 0x1ffffu);
  CHECK(mem[1].bytes.size() == 6u);
  CHECK(mem[1].bytes[5] == big.back());
  // a read across the split stops at the first block's end
  Bytes out(4);
  CHECK(view.read(0x1fffe, out, 0) == 1);
  CHECK(out[0] == big[0xfffe]);
  CHECK(view.read(0x1ffff, out, 0) == 4);
  CHECK(out[0] == big[0xffff]);
  // exactly 0xffff: one block
  FrameBuilder g(2);
  g.add_memory(0, Bytes(0xffff));
  CHECK(FrameView(g.finish()).memory(0).size() == 1);
}

TEST_CASE("trace frames: a truncated frame reads what is whole", "[trace][frames]") {
  FrameBuilder f(1);
  f.add_memory(0x10, Bytes{1, 2, 3, 4});
  f.add_memory(0x20, Bytes{5, 6});
  Bytes bytes = f.finish();
  bytes.resize(bytes.size() - 1);  // the second block is cut
  auto mem = FrameView(bytes).memory(0);
  REQUIRE(mem.size() == 1);
  CHECK(mem[0].addr == 0x10u);
  bytes.resize(3);
  CHECK(FrameView(bytes).memory(0).empty());
  CHECK(FrameView(std::span<const uint8_t>()).tracepoint() == 0u);
}

// ---------------------------------------------------------------------------------------------
// The buffer

TEST_CASE("trace buffer: a linear buffer refuses a frame once full", "[trace][buffer]") {
  TraceBuffer b;
  CHECK(b.size() == TraceBuffer::kDefaultSize);
  CHECK(b.free() == b.size());
  CHECK_FALSE(b.circular());
  b.set_size(100);
  CHECK(b.add(frame_bytes(1, 34)));  // 40 bytes with the header
  CHECK(b.add(frame_bytes(2, 34)));
  CHECK(b.used() == 80);
  CHECK(b.free() == 20);
  CHECK_FALSE(b.add(frame_bytes(3, 34)));
  CHECK(b.frames() == 2);
  CHECK(b.created() == 2);
  CHECK(b.used() == 80);
  CHECK(b.add(frame_bytes(3, 14)));  // exactly the 20 left
  CHECK(b.free() == 0);
  CHECK(b.frame(2).tracepoint() == 3u);
  b.clear();
  CHECK(b.frames() == 0);
  CHECK(b.used() == 0);
  CHECK(b.created() == 0);
  CHECK(b.size() == 100);
}

TEST_CASE("trace buffer: a circular buffer drops the oldest frames", "[trace][buffer]") {
  TraceBuffer b;
  b.set_size(100);
  b.set_circular(true);
  CHECK(b.add(frame_bytes(1, 34)));
  CHECK(b.add(frame_bytes(2, 34)));
  CHECK(b.add(frame_bytes(3, 34)));
  CHECK(b.frames() == 2);
  CHECK(b.created() == 3);
  CHECK(b.used() == 80);
  CHECK(b.frame(0).tracepoint() == 2u);  // renumbered: the oldest kept is frame 0
  CHECK(b.frame(1).tracepoint() == 3u);
  CHECK(b.add(frame_bytes(4, 84)));      // 90 bytes: both go
  CHECK(b.frames() == 1);
  CHECK(b.frame(0).tracepoint() == 4u);
  CHECK(b.created() == 4);
  CHECK_FALSE(b.add(frame_bytes(5, 95)));  // bigger than the whole buffer
  CHECK(b.frames() == 1);
  CHECK(b.created() == 4);
}

TEST_CASE("trace buffer: raw bytes at offsets, without an end marker", "[trace][buffer]") {
  TraceBuffer b;
  Bytes f1 = frame_bytes(1, 14);  // 20 bytes
  Bytes f2 = frame_bytes(2, 24);  // 30 bytes
  f2[10] = 0x55;
  b.add(f1);
  b.add(f2);
  Bytes all = f1;
  all.insert(all.end(), f2.begin(), f2.end());

  // qTBuffer serves the frames only, as gdbserver (tot = size - free); GDB's tsave writes the end
  CHECK(b.raw(0, 1000) == all);
  CHECK(b.raw(0, 50) == all);
  CHECK(b.raw(0, 0).empty());
  CHECK(b.raw(3, 5) == Bytes(all.begin() + 3, all.begin() + 8));
  CHECK(b.raw(15, 10) == Bytes(all.begin() + 15, all.begin() + 25));  // across frames
  CHECK(b.raw(20, 6) == Bytes(f2.begin(), f2.begin() + 6));           // the second header
  CHECK(b.raw(30, 1) == Bytes{0x55});
  CHECK(b.raw(45, 8) == Bytes(all.begin() + 45, all.end()));          // short at the end
  CHECK(b.raw(50, 100).empty());
  CHECK(b.raw(1000, 10).empty());

  // chunks as GDB reads them put back together
  Bytes joined;
  for (uint64_t off = 0;; off += 7) {
    Bytes chunk = b.raw(off, 7);
    if (chunk.empty()) break;
    joined.insert(joined.end(), chunk.begin(), chunk.end());
  }
  CHECK(joined == all);

  // circular: from the oldest frame kept
  TraceBuffer c;
  c.set_size(50);
  c.set_circular(true);
  c.add(f1);
  c.add(f2);
  c.add(f1);  // drops the first f1
  Bytes kept = f2;
  kept.insert(kept.end(), f1.begin(), f1.end());
  CHECK(c.raw(0, 100) == kept);

  TraceBuffer empty;
  CHECK(empty.raw(0, 100).empty());
}

// ---------------------------------------------------------------------------------------------
// The experiment

TEST_CASE("trace experiment: define, add actions, start, hit", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.pc(0x401000);
  s.regs[0] = 0xabc;
  s.memory[0x600000] = Bytes{1, 2, 3, 4, 5, 6, 7, 8};
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000, {regs_action(), mem_action(0x600002, 4)}));
  REQUIRE(e.add_source(1, 0x401000, "at:0:4:6d61696e"));
  const Tracepoint* tp = e.find(1, 0x401000);
  REQUIRE(tp);
  CHECK(tp->actions.size() == 2);
  CHECK(tp->action_texts == std::vector<std::string>{"R07", "M-1,6291458,4"});
  CHECK(tp->step_actions.empty());
  CHECK(tp->sources == std::vector<std::string>{"at:0:4:6d61696e"});
  CHECK_FALSE(e.add_actions(2, 0x401000, {regs_action()}));  // no such tracepoint
  CHECK_FALSE(e.add_actions(1, 0x401001, {regs_action()}));
  CHECK_FALSE(e.add_source(1, 0x401001, "at:0:0:"));

  // not running: no addresses, hits do nothing
  CHECK(e.addresses().empty());
  CHECK_FALSE(e.hit(0x401000, s.site()).collected);
  CHECK(e.buffer().frames() == 0);

  REQUIRE(e.start(0x100));
  CHECK(e.running());
  CHECK(e.addresses() == std::set<uint64_t>{0x401000});
  auto out = e.hit(0x401000, s.site());
  CHECK(out.collected);
  CHECK_FALSE(out.stop_tracing);
  CHECK(out.steps == 0);
  CHECK_FALSE(e.hit(0x401001, s.site()).collected);  // no tracepoint there
  REQUIRE(e.buffer().frames() == 1);
  FrameView f = e.frame(0);
  CHECK(f.tracepoint() == 1u);
  auto regs = f.registers(kBlock);
  REQUIRE(regs);
  CHECK(Bytes(regs->begin(), regs->end()) == s.block());
  auto mem = f.memory(kBlock);
  REQUIRE(mem.size() == 1);
  CHECK(mem[0].addr == 0x600002u);
  CHECK(Bytes(mem[0].bytes.begin(), mem[0].bytes.end()) == Bytes{3, 4, 5, 6});
  CHECK(e.frame_registers(0) == std::optional<Bytes>(s.block()));
  CHECK(e.frame_pc(0) == 0x401000u);

  tp = e.find(1, 0x401000);
  CHECK(tp->hits == 1);
  CHECK(tp->bytes_used == f.bytes().size() - 6);  // block bytes, as gdbserver counts them (qTP)
  CHECK(e.hit(0x401000, s.site()).collected);
  CHECK(e.find(1, 0x401000)->hits == 2);
  CHECK(e.buffer().frames() == 2);

  // start again: the buffer and the counts start over
  REQUIRE(e.start(0x200));
  CHECK(e.buffer().frames() == 0);
  CHECK(e.find(1, 0x401000)->hits == 0);
  CHECK(e.find(1, 0x401000)->bytes_used == 0);
}

TEST_CASE("trace experiment: registers once per frame, memory by register, unreadable memory", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.pc(0x401000);
  s.regs[1] = 0x7ff0;  // a base register
  s.memory[0x7ff0] = Bytes{0x10, 0x20, 0x30, 0x40};
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000,
                {regs_action(), regs_action(),
                 {CollectMemory{1, 2, 2}, "M1,2,2", false},   // 2 bytes at reg1 + 2
                 {CollectMemory{2, 0, 4}, "M2,0,4", false},   // pc-relative: unmapped
                 {CollectMemory{9, 0, 4}, "M9,0,4", false},   // no such register: skipped
                 mem_action(0xdead0000, 8)}));                 // unreadable: not in the frame
  REQUIRE(e.start(1));
  CHECK(e.hit(0x401000, s.site()).collected);
  CHECK(s.register_block_calls == 1);
  FrameView f = e.frame(0);
  auto mem = f.memory(kBlock);
  REQUIRE(mem.size() == 1);
  CHECK(mem[0].addr == 0x7ff2u);
  CHECK(Bytes(mem[0].bytes.begin(), mem[0].bytes.end()) == Bytes{0x30, 0x40});
  CHECK(f.registers(kBlock));
}

TEST_CASE("trace experiment: conditions true, false and faulting", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.pc(0x401000);
  s.regs[0] = 5;
  Tracepoint when5 = tracepoint(1, 0x401000);
  when5.condition = Asm().op2(REG, 0).c8(5).op(EQUAL).end().b;  // $r0 == 5
  Tracepoint never = tracepoint(2, 0x401000);
  never.condition = Asm().c8(0).end().b;
  Tracepoint faulting = tracepoint(3, 0x401000);
  faulting.condition = Asm().c8(1).c8(0).op(DIV_SIGNED).end().b;  // divide by zero
  Tracepoint bad_reg = tracepoint(4, 0x401000);
  bad_reg.condition = Asm().op2(REG, 99).end().b;
  for (auto* tp : {&when5, &never, &faulting, &bad_reg}) REQUIRE(e.define(*tp));
  REQUIRE(e.start(1));

  auto out = e.hit(0x401000, s.site());
  CHECK(out.collected);
  REQUIRE(e.buffer().frames() == 1);
  CHECK(e.frame(0).tracepoint() == 1u);
  CHECK(e.find(1, 0x401000)->hits == 1);
  CHECK(e.find(2, 0x401000)->hits == 0);
  CHECK(e.find(3, 0x401000)->hits == 0);  // a fault counts as false here (gdbserver)
  CHECK(e.find(4, 0x401000)->hits == 0);
  CHECK(e.running());

  s.regs[0] = 6;
  out = e.hit(0x401000, s.site());
  CHECK_FALSE(out.collected);
  CHECK(e.buffer().frames() == 1);
  CHECK(e.running());
}

TEST_CASE("trace experiment: a pass count stops the trace after that hit", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  Tracepoint tp = tracepoint(2, 0x401000);
  tp.pass_count = 2;
  REQUIRE(e.define(tp));
  REQUIRE(e.define(tracepoint(3, 0x402000)));
  REQUIRE(e.start(0x10));
  s.now = 0x20;
  auto first = e.hit(0x401000, s.site());
  CHECK(first.collected);
  CHECK_FALSE(first.stop_tracing);
  CHECK(e.hit(0x402000, s.site()).collected);
  s.now = 0x30;
  auto second = e.hit(0x401000, s.site());
  CHECK(second.collected);
  CHECK(second.stop_tracing);
  CHECK_FALSE(e.running());
  CHECK(e.buffer().frames() == 3);  // the pass-count-th hit is still collected
  CHECK(e.addresses().empty());
  auto st = e.status();
  CHECK_FALSE(st.running);
  CHECK(st.reason == StopReason::PassCount);
  CHECK(st.stop_tracepoint == 2u);
  CHECK(st.start_usec == 0x10u);
  CHECK(st.stop_usec == 0x30u);
  CHECK(st.frames == 3u);
  // stopped: hits change nothing
  CHECK_FALSE(e.hit(0x402000, s.site()).collected);
  CHECK(e.buffer().frames() == 3);
}

TEST_CASE("trace experiment: a full linear buffer stops the trace", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.memory[0x600000] = Bytes(16, 0x11);
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000, {mem_action(0x600000, 16)}));  // 6 + 11 + 16 = 33 bytes a frame
  e.buffer().set_size(70);
  REQUIRE(e.start(1));
  CHECK_FALSE(e.hit(0x401000, s.site()).stop_tracing);
  CHECK_FALSE(e.hit(0x401000, s.site()).stop_tracing);
  CHECK(e.buffer().free() == 4);
  auto out = e.hit(0x401000, s.site());
  CHECK(out.stop_tracing);
  CHECK_FALSE(e.running());
  auto st = e.status();
  CHECK(st.reason == StopReason::BufferFull);
  CHECK(st.stop_tracepoint == 0u);
  CHECK(st.frames == 2u);
  CHECK(st.created == 2u);
  CHECK(st.free == 4u);
  CHECK(st.size == 70u);

  // the same in a circular buffer goes on, dropping the oldest
  auto c = experiment_with_block();
  REQUIRE(c.define(tracepoint(1, 0x401000)));
  REQUIRE(c.add_actions(1, 0x401000, {mem_action(0x600000, 16)}));
  c.buffer().set_size(70);
  c.buffer().set_circular(true);
  REQUIRE(c.start(1));
  for (int i = 0; i < 5; ++i) CHECK_FALSE(c.hit(0x401000, s.site()).stop_tracing);
  CHECK(c.running());
  CHECK(c.status().frames == 2u);
  CHECK(c.status().created == 5u);
  CHECK(c.status().circular);
}

TEST_CASE("trace experiment: disabled tracepoints are skipped", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  Tracepoint off = tracepoint(1, 0x401000);
  off.enabled = false;
  REQUIRE(e.define(off));
  REQUIRE(e.define(tracepoint(2, 0x402000)));
  REQUIRE(e.start(1));
  CHECK(e.addresses() == std::set<uint64_t>{0x402000});
  CHECK_FALSE(e.hit(0x401000, s.site()).collected);
  REQUIRE(e.set_enabled(1, 0x401000, true));
  CHECK(e.addresses() == std::set<uint64_t>{0x401000, 0x402000});
  CHECK(e.hit(0x401000, s.site()).collected);
  REQUIRE(e.set_enabled(2, 0x402000, false));
  CHECK_FALSE(e.hit(0x402000, s.site()).collected);
  CHECK_FALSE(e.set_enabled(3, 0x402000, false));
  CHECK(e.buffer().frames() == 1);
  // static tracepoints are never hit here
  Tracepoint st = tracepoint(4, 0x403000);
  st.is_static = true;
  REQUIRE(e.define(st));
  CHECK(e.addresses().count(0x403000) == 0);
  CHECK_FALSE(e.hit(0x403000, s.site()).collected);
}

TEST_CASE("trace experiment: two tracepoints at one address give one frame each", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.pc(0x401000);
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.define(tracepoint(2, 0x401000)));
  REQUIRE(e.add_actions(2, 0x401000, {regs_action()}));
  REQUIRE(e.start(1));
  CHECK(e.addresses() == std::set<uint64_t>{0x401000});
  CHECK(e.hit(0x401000, s.site()).collected);
  REQUIRE(e.buffer().frames() == 2);
  CHECK(e.frame(0).tracepoint() == 1u);
  CHECK_FALSE(e.frame(0).registers(kBlock));
  CHECK(e.frame(1).tracepoint() == 2u);
  CHECK(e.frame(1).registers(kBlock));
  CHECK(e.find(1, 0x401000)->hits == 1);
  CHECK(e.find(2, 0x401000)->hits == 1);
  // defining (number, address) again replaces it
  Tracepoint again = tracepoint(2, 0x401000);
  again.pass_count = 9;
  REQUIRE(e.define(again));
  CHECK(e.tracepoints().size() == 2);
  CHECK(e.find(2, 0x401000)->pass_count == 9u);
  CHECK(e.find(2, 0x401000)->actions.empty());
}

TEST_CASE("trace experiment: while-stepping", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.pc(0x401000);
  s.memory[0x600000] = Bytes{1, 2, 3, 4};
  Tracepoint tp = tracepoint(1, 0x401000);
  tp.step_count = 3;
  REQUIRE(e.define(tp));
  REQUIRE(e.add_actions(1, 0x401000, {mem_action(0x600000, 4), regs_action(true)}));
  const Tracepoint* t = e.find(1, 0x401000);
  CHECK(t->actions.size() == 1);
  CHECK(t->step_actions.size() == 1);
  CHECK(t->step_action_texts == std::vector<std::string>{"R07"});
  REQUIRE(e.start(1));
  auto out = e.hit(0x401000, s.site());
  CHECK(out.collected);
  CHECK(out.steps == 3u);
  CHECK(out.step_tracepoint == 1u);
  CHECK(out.step_addr == 0x401000u);
  REQUIRE(e.buffer().frames() == 1);
  CHECK_FALSE(e.frame(0).registers(kBlock));  // the hit's actions only

  s.pc(0x401004);
  CHECK(e.step(1, 0x401000, s.site()));
  s.pc(0x401008);
  CHECK(e.step(1, 0x401000, s.site()));
  REQUIRE(e.buffer().frames() == 3);
  CHECK(e.frame(1).tracepoint() == 1u);
  CHECK(e.frame(1).memory(kBlock).empty());
  CHECK(e.frame_pc(1) == 0x401004u);  // the step's pc, from its register block
  CHECK(e.frame_pc(2) == 0x401008u);
  CHECK(e.find(1, 0x401000)->hits == 1);  // steps are not hits
  CHECK_FALSE(e.step(2, 0x401000, s.site()));  // no such tracepoint

  e.stop(StopReason::Stopped, 2);
  CHECK_FALSE(e.step(1, 0x401000, s.site()));  // stopped meanwhile: stop stepping
  CHECK(e.buffer().frames() == 3);

  // no step actions: nothing to step for
  auto n = experiment_with_block();
  Tracepoint bare = tracepoint(1, 0x401000);
  bare.step_count = 3;
  REQUIRE(n.define(bare));
  REQUIRE(n.start(1));
  CHECK(n.hit(0x401000, s.site()).steps == 0u);
}

TEST_CASE("trace experiment: while-stepping actions over several packets", "[trace][experiment]") {
  // GDB puts the 'S' only before the first while-stepping action string: QTDP:-1:a:SR…-,
  // then QTDP:-1:a:M…; gdbserver keeps the rest of the tracepoint's actions stepping.
  auto e = experiment_with_block();
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000, {mem_action(0x10, 4)}));
  REQUIRE(e.add_actions(1, 0x401000, {regs_action(true)}));
  REQUIRE(e.add_actions(1, 0x401000, {mem_action(0x20, 4)}));
  const Tracepoint* t = e.find(1, 0x401000);
  CHECK(t->actions.size() == 1);
  CHECK(t->step_actions.size() == 2);
  CHECK(t->action_texts == std::vector<std::string>{"M-1,16,4"});
  CHECK(t->step_action_texts == std::vector<std::string>{"R07", "M-1,32,4"});
  // a new definition starts over
  REQUIRE(e.define(tracepoint(2, 0x402000)));
  REQUIRE(e.add_actions(2, 0x402000, {mem_action(0x30, 4)}));
  CHECK(e.find(2, 0x402000)->actions.size() == 1);
  CHECK(e.find(2, 0x402000)->step_actions.empty());
}

TEST_CASE("trace experiment: trace state variables through setv and tracev", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  TraceVariable v;
  v.number = 2;
  v.initial = 10;
  v.name = "count";
  e.define_variable(v);
  CHECK(e.variable(2, 0) == std::optional<int64_t>(10));
  CHECK_FALSE(e.variable(9, 0));
  // collect $count after `$count += 1`: getv 2; const8 1; add; setv 2; pop; tracev 2; end
  Bytes inc = Asm().op2(GETV, 2).c8(1).op(ADD).op2(SETV, 2).op(POP).op2(TRACEV, 2).end().b;
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000, {expr_action(inc), expr_action(Asm().op2(TRACEV, 1).end().b)}));
  REQUIRE(e.start(1));
  s.now = 0x1234;
  e.hit(0x401000, s.site());
  s.now = 0x1235;
  e.hit(0x401000, s.site());
  REQUIRE(e.buffer().frames() == 2);
  CHECK(e.frame(0).variables(kBlock) == std::vector<std::pair<uint32_t, int64_t>>{{2, 11}, {1, 0x1234}});
  CHECK(e.frame(1).variables(kBlock) == std::vector<std::pair<uint32_t, int64_t>>{{2, 12}, {1, 0x1235}});
  CHECK(e.variable(2, 0) == std::optional<int64_t>(12));
  CHECK(e.variable(kTimestampVariable, 77) == std::optional<int64_t>(77));
  // a condition may change a variable too; start puts every variable back to its initial value
  REQUIRE(e.start(2));
  CHECK(e.variable(2, 0) == std::optional<int64_t>(10));
  // tracev of an unknown variable faults: what came before it stays in the frame
  auto u = experiment_with_block();
  REQUIRE(u.define(tracepoint(1, 0x401000)));
  s.memory[0x600000] = Bytes{7, 7};
  REQUIRE(u.add_actions(1, 0x401000, {expr_action(Asm().c64(0x600000).c8(2).op(TRACE).op2(TRACEV, 9).c8(1).end().b)}));
  REQUIRE(u.start(1));
  CHECK(u.hit(0x401000, s.site()).collected);
  CHECK(u.frame(0).memory(kBlock).size() == 1);
  CHECK(u.frame(0).variables(kBlock).empty());
}

TEST_CASE("trace experiment: expressions collect memory and strings", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  s.regs[0] = 0x600000;
  s.memory[0x600000] = Bytes{'h', 'i', 0, 'x', 'y', 'z', 0, 0};
  s.memory[0x700000] = Bytes{'h', 'e', 'l', 'l', 'o'};
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.add_actions(1, 0x401000,
                {expr_action(Asm().op2(REG, 0).c8(4).op(TRACE).c8(1).end().b),          // trace
                 expr_action(Asm().op2(REG, 0).op1(TRACE_QUICK, 2).end().b),            // trace_quick
                 expr_action(Asm().op2(REG, 0).op2(TRACE16, 3).end().b),                // trace16
                 expr_action(Asm().op2(REG, 0).c8(100).op(TRACENZ).c8(1).end().b),      // stops at the NUL
                 expr_action(Asm().c64(0x700000).c8(3).op(TRACENZ).c8(1).end().b),      // stops at the limit
                 expr_action(Asm().c64(0x700000).c8(100).op(TRACENZ).c8(1).end().b)}));  // unmapped after 5
  REQUIRE(e.start(1));
  CHECK(e.hit(0x401000, s.site()).collected);
  auto mem = e.frame(0).memory(kBlock);
  REQUIRE(mem.size() == 6);
  auto bytes = [](const MemoryBlock& b) { return std::string(b.bytes.begin(), b.bytes.end()); };
  CHECK(mem[0].addr == 0x600000u);
  CHECK(bytes(mem[0]) == std::string("hi\0x", 4));
  CHECK(bytes(mem[1]) == "hi");
  CHECK(bytes(mem[2]) == std::string("hi\0", 3));
  CHECK(bytes(mem[3]) == std::string("hi\0", 3));
  CHECK(mem[4].addr == 0x700000u);
  CHECK(bytes(mem[4]) == "hel");
  CHECK(bytes(mem[5]) == "hello");
}

TEST_CASE("trace experiment: find_frame by number, pc, tracepoint, range, outside", "[trace][experiment]") {
  auto e = experiment_with_block();
  FakeSite s;
  for (uint32_t n : {1u, 2u, 3u}) {
    REQUIRE(e.define(tracepoint(n, 0x401000 + 0x100 * (n - 1))));
    REQUIRE(e.add_actions(n, 0x401000 + 0x100 * (n - 1), {regs_action()}));
  }
  REQUIRE(e.start(1));
  // frames: 0 at A (tp1), 1 at B (tp2), 2 at A (tp1), 3 at C (tp3)
  for (uint64_t pc : {0x401000u, 0x401100u, 0x401000u, 0x401200u}) {
    s.pc(pc);
    REQUIRE(e.hit(pc, s.site()).collected);
  }
  e.stop(StopReason::Stopped, 2);
  REQUIRE(e.buffer().frames() == 4);
  using Q = FrameQuery;
  using F = std::optional<size_t>;
  CHECK(e.find_frame(Q::Number, 2) == F(2));
  CHECK(e.find_frame(Q::Number, 4) == F());
  CHECK(e.find_frame(Q::Pc, 0x401000) == F(0));
  CHECK(e.find_frame(Q::Tracepoint, 3) == F(3));
  CHECK(e.find_frame(Q::Range, 0x401100, 0x401200) == F(1));
  CHECK(e.find_frame(Q::Outside, 0x401000, 0x401100) == F(3));
  CHECK(e.find_frame(Q::Pc, 0x401300) == F());

  // searches start after the selected frame and do not wrap
  e.select(0);
  CHECK(e.selected() == F(0));
  CHECK(e.find_frame(Q::Pc, 0x401000) == F(2));
  CHECK(e.find_frame(Q::Tracepoint, 1) == F(2));
  CHECK(e.find_frame(Q::Range, 0x401000, 0x401000) == F(2));
  CHECK(e.find_frame(Q::Number, 0) == F(0));  // by number: absolute
  e.select(2);
  CHECK(e.find_frame(Q::Pc, 0x401000) == F());
  CHECK(e.find_frame(Q::Tracepoint, 2) == F());
  CHECK(e.find_frame(Q::Outside, 0x401000, 0x401100) == F(3));
  e.select(3);
  CHECK(e.find_frame(Q::Outside, 0, 1) == F());
  e.select(std::nullopt);
  CHECK(e.find_frame(Q::Range, 0x401050, 0x4010ff) == F());
  CHECK(e.find_frame(Q::Range, 0x401050, 0x401100) == F(1));
}

TEST_CASE("trace experiment: frame_pc from the register block or the tracepoint", "[trace][experiment]") {
  TraceExperiment e;  // no register block size yet
  FakeSite s;
  s.pc(0x401234);  // a pc not at the tracepoint (a step frame would have one)
  REQUIRE(e.define(tracepoint(5, 0x401000)));
  REQUIRE(e.add_actions(5, 0x401000, {regs_action()}));
  REQUIRE(e.define(tracepoint(6, 0x402000)));
  REQUIRE(e.start(1));
  e.hit(0x401000, s.site());
  e.hit(0x402000, s.site());
  // without a block size the R block cannot be read: the tracepoint's address
  CHECK(e.frame_pc(0) == 0x401000u);
  e.set_register_block_size(kBlock);
  e.set_pc_offset(kPcOffset);
  CHECK(e.register_block_size() == kBlock);
  CHECK(e.frame_pc(0) == 0x401234u);
  CHECK(e.frame_pc(1) == 0x402000u);  // no R block
  CHECK_FALSE(e.frame_registers(1));
  e.set_pc_offset(20);  // the pc would run past the block
  CHECK(e.frame_pc(0) == 0x401000u);
  e.set_pc_offset(0);
  CHECK(e.frame_pc(0) == 0u);  // regs[0]
  e.set_pc_offset(kPcOffset);
  CHECK(e.find_frame(FrameQuery::Pc, 0x401234) == std::optional<size_t>(0));
}

TEST_CASE("trace experiment: status fields and notes", "[trace][experiment]") {
  TraceExperiment e;
  auto st = e.status();
  CHECK_FALSE(st.running);
  CHECK(st.reason == StopReason::NotRun);
  CHECK(st.frames == 0u);
  CHECK(st.size == TraceBuffer::kDefaultSize);
  CHECK(st.free == TraceBuffer::kDefaultSize);
  CHECK(st.start_usec == 0u);

  e.set_user("bob");
  e.set_notes("hi");
  e.set_disconnected(true);
  CHECK(e.disconnected());
  e.buffer().set_circular(true);
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  REQUIRE(e.start(0x100));
  FakeSite s;
  e.hit(0x401000, s.site());
  st = e.status();
  CHECK(st.running);
  CHECK(st.frames == 1u);
  CHECK(st.created == 1u);
  CHECK(st.free == TraceBuffer::kDefaultSize - 6);
  CHECK(st.circular);
  CHECK(st.disconnected);
  CHECK(st.start_usec == 0x100u);
  CHECK(st.stop_usec == 0u);
  CHECK(st.user == "bob");
  CHECK(st.notes == "hi");

  e.stop(StopReason::Stopped, 0x200);
  e.set_stop_notes("because I can");  // GDB sends QTNotes:tstop after QTStop
  st = e.status();
  CHECK_FALSE(st.running);
  CHECK(st.reason == StopReason::Stopped);
  CHECK(st.stop_text == "because I can");
  CHECK(st.stop_usec == 0x200u);
  e.stop(StopReason::Error, 0x300);  // already stopped: nothing changes
  CHECK(e.status().reason == StopReason::Stopped);
  CHECK(e.status().stop_usec == 0x200u);
  REQUIRE(e.start(0x400));
  CHECK(e.status().stop_text.empty());
  e.stop(StopReason::Error, 0x500, 1, "divide by zero");
  CHECK(e.status().stop_text == "divide by zero");
  CHECK(e.status().stop_tracepoint == 1u);
}

TEST_CASE("trace experiment: init resets and keeps trace_timestamp", "[trace][experiment]") {
  TraceExperiment e;
  REQUIRE(e.variables().size() == 1);
  const TraceVariable& ts = e.variables().at(kTimestampVariable);
  CHECK(ts.builtin);
  CHECK(ts.name == "trace_timestamp");

  TraceVariable v;
  v.number = 2;
  v.initial = -1;
  v.name = "x";
  e.define_variable(v);
  // GDB downloads the builtin back at tstart (QTDV:1:0:1:…): it stays the clock
  TraceVariable back;
  back.number = 1;
  back.builtin = true;
  back.name = "trace_timestamp";
  e.define_variable(back);
  CHECK(e.variable(1, 0x55) == std::optional<int64_t>(0x55));
  REQUIRE(e.define(tracepoint(1, 0x401000)));
  e.add_read_only(0x1000, 0x2000);
  CHECK(e.read_only(0x1000, 0x10));
  CHECK(e.read_only(0x1ff0, 0x10));
  CHECK_FALSE(e.read_only(0x1ff8, 0x10));
  CHECK_FALSE(e.read_only(0xff0, 0x20));
  REQUIRE(e.start(1));
  FakeSite s;
  e.hit(0x401000, s.site());
  e.select(0);

  e.init();
  CHECK_FALSE(e.running());
  CHECK(e.tracepoints().empty());
  CHECK(e.buffer().frames() == 0);
  CHECK_FALSE(e.selected());
  CHECK_FALSE(e.read_only(0x1000, 0x10));
  REQUIRE(e.variables().size() == 1);
  CHECK(e.variables().count(kTimestampVariable) == 1);
  CHECK(e.variables().at(kTimestampVariable).name == "trace_timestamp");
  CHECK(e.variables().at(kTimestampVariable).builtin);
  CHECK_FALSE(e.variable(2, 0));
  CHECK(now_usec() > 0);
}

// ---------------------------------------------------------------------------------------------
// The agent's trace ops, with collection callbacks

TEST_CASE("agent trace ops call the collection callbacks", "[trace][agent]") {
  using namespace backend::agent;
  std::vector<std::pair<uint64_t, uint64_t>> mem, strings;
  std::vector<int> vars;
  Context ctx;
  ctx.collect_memory = [&](uint64_t a, uint64_t n) { mem.emplace_back(a, n); return a != 0xbad; };
  ctx.collect_string = [&](uint64_t a, uint64_t n) { strings.emplace_back(a, n); return a != 0xbad; };
  ctx.collect_variable = [&](int n) { vars.push_back(n); return n != 9; };

  // trace: addr size => (both popped)
  auto r = evaluate(Asm().c64(0x1000).c8(4).op(TRACE).c8(1).end().b, ctx);
  CHECK(r.outcome == Outcome::True);
  CHECK(r.value == std::optional<uint64_t>(1));
  // trace_quick n, trace16 n: the address stays on the stack
  r = evaluate(Asm().c64(0x2000).op1(TRACE_QUICK, 8).end().b, ctx);
  CHECK(r.value == std::optional<uint64_t>(0x2000));
  r = evaluate(Asm().c64(0x3000).op2(TRACE16, 0x1234).end().b, ctx);
  CHECK(r.value == std::optional<uint64_t>(0x3000));
  // tracenz: addr limit =>
  r = evaluate(Asm().c64(0x4000).c8(0x20).op(TRACENZ).c8(0).end().b, ctx);
  CHECK(r.outcome == Outcome::False);
  // tracev n: the stack unchanged
  r = evaluate(Asm().c8(3).op2(TRACEV, 2).end().b, ctx);
  CHECK(r.value == std::optional<uint64_t>(3));
  CHECK(mem == std::vector<std::pair<uint64_t, uint64_t>>{{0x1000, 4}, {0x2000, 8}, {0x3000, 0x1234}});
  CHECK(strings == std::vector<std::pair<uint64_t, uint64_t>>{{0x4000, 0x20}});
  CHECK(vars == std::vector<int>{2});

  // a refusing callback faults
  CHECK(evaluate(Asm().op1(CONST8, 0).c64(0xbad).c8(1).op(TRACE).end().b, ctx).fault == Fault::MemoryUnreadable);
  CHECK(evaluate(Asm().c64(0xbad).op1(TRACE_QUICK, 1).end().b, ctx).fault == Fault::MemoryUnreadable);
  CHECK(evaluate(Asm().c64(0xbad).c8(1).op(TRACENZ).c8(1).end().b, ctx).fault == Fault::MemoryUnreadable);
  CHECK(evaluate(Asm().op2(TRACEV, 9).c8(1).end().b, ctx).fault == Fault::TsvUnavailable);
  // too few operands
  CHECK(evaluate(Asm().c8(1).op(TRACE).end().b, ctx).fault == Fault::StackUnderflow);
  CHECK(evaluate(Asm().op1(TRACE_QUICK, 1).end().b, ctx).fault == Fault::StackUnderflow);
  CHECK(evaluate(Asm().c8(1).op(TRACENZ).end().b, ctx).fault == Fault::StackUnderflow);

  // without the callbacks (a condition, a dprintf command) they stay invalid
  Context none;
  CHECK(evaluate(Asm().c8(1).c8(1).op(TRACE).c8(1).end().b, none).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().c8(1).op1(TRACE_QUICK, 4).end().b, none).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().c8(1).op2(TRACE16, 4).end().b, none).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().op2(TRACEV, 1).c8(1).end().b, none).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().c8(1).c8(1).op(TRACENZ).c8(1).end().b, none).fault == Fault::Unsupported);
  // memory callbacks only: tracev still needs its own
  Context memory_only;
  memory_only.collect_memory = ctx.collect_memory;
  CHECK(evaluate(Asm().op2(TRACEV, 1).c8(1).end().b, memory_only).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().c8(1).c8(1).op(TRACENZ).c8(1).end().b, memory_only).fault == Fault::Unsupported);
  CHECK(evaluate(Asm().c8(1).c8(1).op(TRACE).c8(1).end().b, memory_only).outcome == Outcome::True);
}
