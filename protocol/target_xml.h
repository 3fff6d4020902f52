// x86-64 target description (qXfer:features:read:target.xml), self-contained: no xi:include.
#pragma once

#include <string>
#include <vector>

namespace protocol {

struct RegisterSpec {
  std::string name;     // GDB's name within its feature ("rax", "xmm0", "ymm0h", ...)
  int bitsize = 64;
  std::string type;     // int64, code_ptr, i387_ext, vec128, i386_eflags, v2ui128, ...
  std::string group;    // empty: no group attribute
  std::string feature;  // "org.gnu.gdb.i386.core", ...
  int regnum = 0;       // wire number (g order, p/P, stop replies)
};

// One <feature> per distinct feature name, in first-appearance order, each carrying the
// vector/union/flags types its registers use. Registers keep the order given.
std::string target_xml(const std::vector<RegisterSpec>& registers);
// Architecture and OS ABI only, for clients that did not offer xmlRegisters=i386.
std::string empty_target_xml();

}  // namespace protocol
