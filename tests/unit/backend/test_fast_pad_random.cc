// Hostile bytecode through the fast-tracepoint compiler (backend/trace/fast_pad.h): the client
// chooses a tracepoint's condition and actions, so whatever it sends must be refused with a
// reason or compiled, never crash or throw. Seeded, so a failure repeats.
#include <catch2/catch.hpp>

#include <random>

#include "backend/trace/fast_pad.h"

using namespace backend::trace;

namespace {

// Bytecode biased to the ops the compiler knows, with jumps and constants of every width.
std::vector<uint8_t> random_code(std::mt19937_64& rng) {
  static const uint8_t ops[] = {0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e,
                                0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x20,
                                0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d,
                                0x2e, 0x2f, 0x30, 0x32, 0x33, 0x34, 0x00, 0x31, 0xff};
  std::vector<uint8_t> code;
  size_t n = rng() % 24;
  for (size_t i = 0; i < n; ++i) {
    code.push_back(rng() % 4 ? ops[rng() % sizeof ops] : static_cast<uint8_t>(rng()));
    if (rng() % 3 == 0) code.push_back(static_cast<uint8_t>(rng() % 32));  // operand-ish bytes
  }
  if (rng() % 2) code.push_back(0x27);  // end
  return code;
}

}  // namespace

TEST_CASE("fast pad: random conditions and expressions are refused or compiled, never a crash", "[fastpad]") {
  std::mt19937_64 rng(31);
  // A site the pad can take: mov rax, 42 (7 bytes) then ret and padding.
  std::vector<uint8_t> site = {0x48, 0xc7, 0xc0, 0x2a, 0x00, 0x00, 0x00, 0xc3, 0x90, 0x90,
                               0x90, 0x90, 0x90, 0x90, 0x90, 0x90};
  int compiled = 0;
  for (int i = 0; i < 20000; ++i) {
    Tracepoint tp;
    tp.number = 1;
    tp.addr = 0x400000;
    tp.fast = true;
    if (rng() % 2) tp.condition = random_code(rng);
    tp.actions.push_back(CollectExpression{random_code(rng)});
    if (rng() % 4 == 0) tp.actions.push_back(CollectMemory{static_cast<int>(rng() % 20) - 1, rng() % 0x1000, rng() % 0x20000});
    FastPadSpec spec;
    spec.site = tp.addr;
    spec.code = site;
    spec.pad_addr = 0x410000;
    spec.data_addr = 0x7f0000000000;
    spec.pid = 1;
    spec.tracepoint = &tp;
    std::optional<std::string> why;
    REQUIRE_NOTHROW(why = fast_unsupported(tp));
    backend::Result<FastPad> pad = backend::Error{0, ""};
    REQUIRE_NOTHROW(pad = build_fast_pad(spec));
    INFO("iteration " << i << (why ? ": " + *why : std::string(": supported")));
    CHECK(static_cast<bool>(pad) == !why);  // what is accepted is compiled, and nothing else
    if (pad) {
      ++compiled;
      CHECK(pad->code.size() < 64 * 1024);
      CHECK(pad->frame_bytes >= sizeof(FastFrameHeader) + kFastRegisters * 8);
    }
  }
  CHECK(compiled > 50);  // the generator reaches the compiler, not just the refusals
}
