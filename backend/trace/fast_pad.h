// Fast tracepoints (ftrace) without an agent library: the site's instruction is replaced by a
// jmp to a pad, machine code built here, that runs in the program itself: it keeps every
// register and the flags, evaluates the condition, appends a compact frame to a data area it
// shares with nothing but the server (which reads it through /proc), runs the displaced
// instruction and jumps back. Pure code generation over bytes (no ptrace), unit-tested by
// running pads in the test process.
//
// What a pad can do: GDB's agent expressions without trace state variables, printf, floats or
// backward jumps (each collection op then runs at most once, so a frame's size is bounded and
// reserved up front); memory is read with process_vm_readv, so an unreadable address costs a
// failed read (the block is left out), never a fault in the program. A tracepoint asking for
// more (or while-stepping) is collected with a stop per hit instead (the process decides).
//
// The data area: a header (DataHeader), then frames. A frame is reserved with a compare-and-swap
// on `head` (threads may hit at once) and committed by writing its tracepoint number last; the
// server converts committed frames (fast_frames.h) and resets `head` only while every thread
// is stopped outside the pads.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/error.h"
#include "backend/trace/tracepoint.h"

namespace backend::trace {

struct DataHeader {
  uint64_t head = 0;      // offset (from the area start) of the next free byte
  uint64_t limit = 0;     // offset of the area's end
  uint64_t lost = 0;      // unused (a full area traps to the server, which drains it)
  uint64_t reserved[5] = {};
};
static_assert(sizeof(DataHeader) == 64);

// A frame in the data area: this header, 18 registers (rax rbx rcx rdx rsi rdi rbp rsp r8..r15
// rip eflags: the tdesc's first 18, 8 bytes each), then gdbserver-style 'M' blocks.
struct FastFrameHeader {
  uint32_t reserved_size = 0;  // bytes the frame took in the area (the next one starts after)
  uint32_t used_size = 0;      // bytes written: header, registers, blocks
  uint16_t tracepoint = 0;     // written last: 0 = not committed yet
  uint16_t flags = 0;          // kFrameRegisters: the actions collect the registers
  uint32_t pad = 0;
};
static_assert(sizeof(FastFrameHeader) == 16);
constexpr uint16_t kFrameRegisters = 1;
constexpr size_t kFastRegisters = 18;

struct FastPadSpec {
  uint64_t site = 0;                   // the tracepoint's address
  std::vector<uint8_t> code;           // the program's bytes at the site (at least 16)
  uint64_t pad_addr = 0;               // where the pad goes (within rel32 of the site)
  uint64_t data_addr = 0;              // the data area (its DataHeader)
  int32_t pid = 0;                     // for process_vm_readv
  const Tracepoint* tracepoint = nullptr;
};

struct FastPad {
  std::vector<uint8_t> code;           // the pad
  std::vector<uint8_t> jump;           // what replaces the site's first bytes (a jmp rel32)
  std::vector<uint8_t> original;       // the bytes the jump replaces
  uint64_t resume_addr = 0;            // the pad's exit: the site's next instruction
  uint32_t frame_bytes = 0;            // bytes reserved per hit
  // Offsets in the pad: the int3 a full data area runs into (the server drains the area and
  // sends the thread back to `retry`, the reservation).
  size_t full_trap = 0, retry = 0;
};

// Why a tracepoint cannot be served by a pad (nullopt: it can).
std::optional<std::string> fast_unsupported(const Tracepoint& tp);

// Builds the pad for spec; an error says why the site cannot have one (the instruction there is
// shorter than the jump or moves the pc, an op the pad does not compile...).
Result<FastPad> build_fast_pad(const FastPadSpec& spec);

}  // namespace backend::trace
