// x86-64 register layout in GDB's target-description order (core, sse, linux, segments, avx,
// avx512, pkeys as the CPU's XCR0 allows), and a register file in that layout.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backend {

struct RegisterInfo {
  std::string name;     // "rax", "xmm0", "ymm0h", "k0", "zmm0h", "pkru"...
  int bitsize = 64;
  std::string type;     // GDB tdesc type: int64, code_ptr, data_ptr, i387_ext, vec128, ...
  std::string group;    // "" or "float", "vector", "system"...
  std::string feature;  // "org.gnu.gdb.i386.core", ".sse", ".linux", ".segments", ".avx", ".avx512", ".pkeys"
  int regnum = 0;       // wire number (= index)
  size_t offset = 0;    // byte offset in the register file
};

struct RegisterLayout {
  std::vector<RegisterInfo> regs;
  size_t total_bytes = 0;
  uint64_t xcr0 = 0;
  static constexpr int kRbp = 6, kRsp = 7, kRip = 16, kEflags = 17, kOrigRax = 57;
  std::optional<int> find(std::string_view name) const;
};

// Layout for the given XCR0 (bits: 1 SSE, 2 AVX, 5-7 AVX-512, 9 PKRU).
RegisterLayout make_register_layout(uint64_t xcr0);
// XCR0 of this machine as the kernel reports it (xgetbv when OSXSAVE), 0x3 without XSAVE.
uint64_t host_xcr0();

struct RegisterFile {
  std::vector<uint8_t> bytes;  // total_bytes, little-endian values in layout order
  std::vector<bool> valid;     // per register; invalid ones go on the wire as "xx"
  uint64_t get_u64(const RegisterLayout& layout, int regno) const;  // low 8 bytes
  void set_u64(const RegisterLayout& layout, int regno, uint64_t value);
  uint64_t pc(const RegisterLayout& l) const { return get_u64(l, RegisterLayout::kRip); }
};

// Which part of a register file to fetch: General is what PTRACE_GETREGS gives (rax..gs,
// orig_rax, fs_base, gs_base) and costs one call; All adds x87/SSE and the XSAVE area.
enum class RegisterSet { General, All };
bool is_general_register(int regno);

// ptrace plumbing: read/write a thread's register file (GETREGS, GETFPREGS, GETREGSET xstate).
// A General read leaves every other register invalid.
struct RegisterAccess {
  static std::optional<RegisterFile> read(pid_t tid, const RegisterLayout& layout, std::string* err,
                                          RegisterSet set = RegisterSet::All);
  static bool write(pid_t tid, const RegisterLayout& layout, const RegisterFile& regs, std::string* err);
};

}  // namespace backend
