// Software breakpoints on this process's own memory (through /proc/self/mem, as the server
// writes a program's): shadows, shared addresses, and an address lifted for a step.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <cstdint>

#include "backend/points/software_breakpoints.h"
#include "backend/ptrace/proc_memory.h"

using namespace backend;

namespace {
struct Code {
  std::array<uint8_t, 8> bytes{0x90, 0x0f, 0x05, 0xc3, 0x90, 0x90, 0x90, 0x90};  // nop; syscall; ret
  uint64_t at(size_t i) const { return reinterpret_cast<uint64_t>(bytes.data() + i); }
};
}  // namespace

TEST_CASE("breakpoints: int3 in memory, original bytes for reads, shared by owners", "[breakpoints]") {
  Code code;
  ProcMemory mem(::getpid());
  SoftwareBreakpoints bps;
  REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Internal));
  REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Client));
  CHECK(code.bytes[1] == 0xcc);
  std::array<uint8_t, 4> read{};
  std::copy(code.bytes.begin(), code.bytes.begin() + 4, read.begin());
  bps.unshadow(code.at(0), read);
  CHECK(read[1] == 0x0f);
  REQUIRE(bps.remove(mem, code.at(1), BreakpointOwner::Internal));
  CHECK(code.bytes[1] == 0xcc);  // the client's is still there
  REQUIRE(bps.remove(mem, code.at(1), BreakpointOwner::Client));
  CHECK(code.bytes[1] == 0x0f);
  CHECK(!bps.contains(code.at(1)));
}

TEST_CASE("breakpoints: an address lifted for a step stays lifted until lowered, whatever happens meanwhile",
          "[breakpoints]") {
  Code code;
  ProcMemory mem(::getpid());
  SoftwareBreakpoints bps;
  REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Internal));
  REQUIRE(bps.lift(mem, code.at(1)));
  CHECK(code.bytes[1] == 0x0f);  // the thread steps the original instruction

  SECTION("removed and inserted again before the step ends: no int3 under the stepping thread") {
    REQUIRE(bps.remove(mem, code.at(1), BreakpointOwner::Internal));
    REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Internal));
    CHECK(code.bytes[1] == 0x0f);
    REQUIRE(bps.lower(mem, code.at(1)));
    CHECK(code.bytes[1] == 0xcc);  // now it is back
    REQUIRE(bps.remove(mem, code.at(1), BreakpointOwner::Internal));
    CHECK(code.bytes[1] == 0x0f);
  }
  SECTION("removed for good: lowering writes nothing, a later insert is an ordinary one") {
    REQUIRE(bps.remove(mem, code.at(1), BreakpointOwner::Internal));
    REQUIRE(bps.lower(mem, code.at(1)));
    CHECK(code.bytes[1] == 0x0f);
    CHECK(!bps.contains(code.at(1)));
    REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Client));
    CHECK(code.bytes[1] == 0xcc);
  }
}

TEST_CASE("breakpoints: while a vfork child shares the memory, nothing is written until reinsert_all",
          "[breakpoints]") {
  Code code;
  ProcMemory mem(::getpid());
  SoftwareBreakpoints bps;
  REQUIRE(bps.insert(mem, code.at(1), BreakpointOwner::Client));
  bps.restore_into(mem);  // the vfork event: the child runs in this memory
  bps.set_shared_with_vfork_child(true);
  CHECK(code.bytes[1] == 0x0f);
  // The parent is resumed with its next stop armed: recorded, not written.
  REQUIRE(bps.insert(mem, code.at(3), BreakpointOwner::Internal));
  CHECK(code.bytes[3] == 0xc3);
  CHECK(bps.contains(code.at(3)));
  // A write over them keeps the original bytes in memory too.
  std::array<uint8_t, 3> data{0x0f, 0x05, 0xc3};
  bps.shadow_write(code.at(1), data);
  CHECK(data[0] == 0x0f);
  CHECK(data[2] == 0xc3);
  // A breakpoint gone meanwhile leaves its byte alone.
  REQUIRE(bps.insert(mem, code.at(4), BreakpointOwner::Internal));
  REQUIRE(bps.remove(mem, code.at(4), BreakpointOwner::Internal));
  CHECK(code.bytes[4] == 0x90);
  // VFORK_DONE: every int3 of the table goes in.
  bps.set_shared_with_vfork_child(false);
  bps.reinsert_all(mem);
  CHECK(code.bytes[1] == 0xcc);
  CHECK(code.bytes[3] == 0xcc);
  CHECK(code.bytes[4] == 0x90);
  bps.restore_all(mem);
  CHECK(code.bytes[1] == 0x0f);
  CHECK(code.bytes[3] == 0xc3);
}

TEST_CASE("breakpoints: a range asks for anyone's or only the client's", "[breakpoints]") {
  Code code;
  ProcMemory mem(::getpid());
  SoftwareBreakpoints bps;
  CHECK(!bps.any_in(code.at(0), code.at(8)));
  REQUIRE(bps.insert(mem, code.at(4), BreakpointOwner::Internal));
  CHECK(bps.any_in(code.at(0), code.at(8)));
  CHECK(bps.any_in(code.at(4), code.at(5)));
  CHECK(!bps.any_in(code.at(0), code.at(4)));  // the end is not in the range
  CHECK(!bps.any_in(code.at(5), code.at(8)));
  CHECK(!bps.any_client_in(code.at(0), code.at(8)));  // ours only
  REQUIRE(bps.insert(mem, code.at(6), BreakpointOwner::Client));
  CHECK(bps.any_client_in(code.at(0), code.at(8)));
  CHECK(!bps.any_client_in(code.at(0), code.at(6)));
  REQUIRE(bps.remove(mem, code.at(6), BreakpointOwner::Client));
  REQUIRE(bps.remove(mem, code.at(4), BreakpointOwner::Internal));
  CHECK(!bps.any_in(code.at(0), code.at(8)));
  CHECK(code.bytes[4] == 0x90);
}
