// What an instruction does with memory, by kind: no access at all, not computable (exact=false),
// how a first (destination) memory operand is used, which string instruction it is. The rules
// and the reasons for them: docs/watch-emulation.md. Internal to backend/x86/ (access decoder),
// not part of its public interface.
#pragma once

#include <capstone/capstone.h>

#include <string_view>

namespace backend::access {

enum class Op0 { Write, Read, ReadWrite };

// Instructions whose memory operand is only an address (hints, lea) or that never reach memory.
// Names cover hints capstone 4 does not know but a later capstone may decode (cldemote is a
// nop to capstone 4; neither it nor any prefetch fires a debug-register watchpoint).
bool no_access(unsigned id, std::string_view name);

// Instructions whose accesses this decoder does not compute (exact=false; the list and the reasons:
// docs/watch-emulation.md).
bool inexact(unsigned id, std::string_view name);

// What a memory operand in the first (destination) position does. capstone 4's access flags
// are not used: they call many stores reads (fstp, movq, pextr*, setcc, every VEX/EVEX store)
// and cmpxchg/rol/ror/rcl/rcr reads only.
Op0 op0_class(unsigned id);

// Legacy one-byte string opcodes (capstone's opcode[] holds a0..af alone for them; SSE
// movsd/cmpsd share the capstone id but have a 0f opcode).
enum class StrOp { None, Movs, Cmps, Stos, Lods, Scas };

StrOp string_op(const cs_x86& x);

}  // namespace backend::access
