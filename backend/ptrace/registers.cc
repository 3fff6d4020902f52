// x86-64 register layout in GDB's tdesc order and the ptrace plumbing that fills a register file
// from PTRACE_GETREGS (general), PTRACE_GETFPREGS (x87/SSE, FXSAVE format) and
// PTRACE_GETREGSET NT_X86_XSTATE (AVX, AVX-512, PKRU).
#include "backend/ptrace/registers.h"

#include <cpuid.h>
#include <elf.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include <fmt/format.h>

namespace backend {

namespace {

constexpr uint64_t kXcr0Sse = 1u << 1, kXcr0Avx = 1u << 2, kXcr0Opmask = 1u << 5,
                   kXcr0ZmmHi256 = 1u << 6, kXcr0Hi16Zmm = 1u << 7, kXcr0Pkru = 1u << 9;
constexpr uint64_t kXcr0Avx512 = kXcr0Opmask | kXcr0ZmmHi256 | kXcr0Hi16Zmm;

struct LayoutBuilder {
  RegisterLayout layout;
  void add(std::string name, int bits, std::string type, std::string group, const std::string& feature) {
    RegisterInfo r{std::move(name), bits, std::move(type), std::move(group), feature,
                   static_cast<int>(layout.regs.size()), layout.total_bytes};
    layout.total_bytes += static_cast<size_t>(bits / 8);
    layout.regs.push_back(std::move(r));
  }
};

// The CPU's XSAVE geometry (CPUID leaf 0xD). Read once: CPUID traps to the hypervisor in a VM
// and costs microseconds, and it is asked for every register of every stop otherwise.
struct XsaveGeometry {
  uint32_t area_size = 4096;
  uint32_t offset[32] = {};
  XsaveGeometry() {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid_count(0xd, 0, &eax, &ebx, &ecx, &edx) && ecx >= 576) area_size = ecx;
    for (unsigned c = 2; c < 32; ++c)
      if (__get_cpuid_count(0xd, c, &eax, &ebx, &ecx, &edx)) offset[c] = ebx;
  }
};

const XsaveGeometry& xsave_geometry() {
  static const XsaveGeometry geometry;  // a constant of the machine, computed on first use
  return geometry;
}

// Offset of an XSAVE component in the standard (non-compacted) format the kernel uses for ptrace.
uint32_t xsave_component_offset(int component) {
  return component >= 0 && component < 32 ? xsave_geometry().offset[component] : 0;
}

uint32_t xsave_area_size() { return xsave_geometry().area_size; }

// The i387 tag of one 80-bit register value (0 valid, 1 zero, 2 special).
unsigned i387_tag(const uint8_t* raw) {
  uint64_t mantissa;
  std::memcpy(&mantissa, raw, 8);
  unsigned exponent = (raw[8] | (raw[9] << 8)) & 0x7fff;
  bool integer = mantissa >> 63;
  uint64_t fraction = mantissa & ~(1ull << 63);
  if (exponent == 0x7fff) return 2;
  if (exponent == 0) return (fraction == 0 && !integer) ? 1 : 2;
  return integer ? 0 : 2;
}

// Which xstate component holds a layout register (-1: not an xstate register).
int xstate_component_of(const RegisterInfo& r) {
  if (r.feature == "org.gnu.gdb.i386.avx") return 2;
  if (r.feature == "org.gnu.gdb.i386.pkeys") return 9;
  if (r.feature == "org.gnu.gdb.i386.avx512") {
    if (r.name[0] == 'k') return 5;
    if (r.name[0] == 'z') {
      int n = std::atoi(r.name.c_str() + 3);
      return n < 16 ? 6 : 7;
    }
    return 7;  // xmm16-31, ymm16h-31h
  }
  return -1;
}

// Where a register lives inside the xstate buffer.
size_t xstate_offset_of(const RegisterInfo& r) {
  const std::string& n = r.name;
  if (r.feature == "org.gnu.gdb.i386.avx") return xsave_component_offset(2) + 16 * std::atoi(n.c_str() + 3);
  if (r.feature == "org.gnu.gdb.i386.pkeys") return xsave_component_offset(9);
  if (n[0] == 'k') return xsave_component_offset(5) + 8 * std::atoi(n.c_str() + 1);
  int idx = std::atoi(n.c_str() + 3);
  if (n.rfind("zmm", 0) == 0) {
    if (idx < 16) return xsave_component_offset(6) + 32 * idx;
    return xsave_component_offset(7) + 64 * (idx - 16) + 32;
  }
  if (n.rfind("xmm", 0) == 0) return xsave_component_offset(7) + 64 * (idx - 16);
  return xsave_component_offset(7) + 64 * (idx - 16) + 16;  // ymmNh, N >= 16
}

bool get_xstate(pid_t tid, std::vector<uint8_t>& buf, std::string* err) {
  buf.assign(xsave_area_size(), 0);
  iovec iov{buf.data(), buf.size()};
  if (ptrace(PTRACE_GETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0) {
    if (err) *err = fmt::format("PTRACE_GETREGSET(NT_X86_XSTATE) on thread {}: {}", tid, std::strerror(errno));
    return false;
  }
  buf.resize(iov.iov_len);
  return true;
}

}  // namespace

std::optional<int> RegisterLayout::find(std::string_view name) const {
  for (const auto& r : regs)
    if (r.name == name) return r.regnum;
  return std::nullopt;
}

RegisterLayout make_register_layout(uint64_t xcr0) {
  LayoutBuilder b;
  b.layout.xcr0 = xcr0;
  const std::string core = "org.gnu.gdb.i386.core";
  static const char* const kGeneral[] = {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp",
                                         "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
  for (const char* n : kGeneral) {
    std::string type = "int64";
    if (std::strcmp(n, "rbp") == 0 || std::strcmp(n, "rsp") == 0) type = "data_ptr";
    b.add(n, 64, type, "", core);
  }
  b.add("rip", 64, "code_ptr", "", core);
  b.add("eflags", 32, "i386_eflags", "", core);
  for (const char* n : {"cs", "ss", "ds", "es", "fs", "gs"}) b.add(n, 32, "int32", "", core);
  for (int i = 0; i < 8; ++i) b.add(fmt::format("st{}", i), 80, "i387_ext", "", core);
  for (const char* n : {"fctrl", "fstat", "ftag", "fiseg", "fioff", "foseg", "fooff", "fop"})
    b.add(n, 32, "int", "float", core);

  const std::string sse = "org.gnu.gdb.i386.sse";
  for (int i = 0; i < 16; ++i) b.add(fmt::format("xmm{}", i), 128, "vec128", "", sse);
  b.add("mxcsr", 32, "i386_mxcsr", "vector", sse);

  b.add("orig_rax", 64, "int", "", "org.gnu.gdb.i386.linux");
  b.add("fs_base", 64, "int", "", "org.gnu.gdb.i386.segments");
  b.add("gs_base", 64, "int", "", "org.gnu.gdb.i386.segments");

  if (xcr0 & kXcr0Avx)
    for (int i = 0; i < 16; ++i) b.add(fmt::format("ymm{}h", i), 128, "uint128", "", "org.gnu.gdb.i386.avx");

  if ((xcr0 & kXcr0Avx512) == kXcr0Avx512) {
    const std::string f = "org.gnu.gdb.i386.avx512";
    for (int i = 16; i < 32; ++i) b.add(fmt::format("xmm{}", i), 128, "vec128", "", f);
    for (int i = 16; i < 32; ++i) b.add(fmt::format("ymm{}h", i), 128, "uint128", "", f);
    for (int i = 0; i < 8; ++i) b.add(fmt::format("k{}", i), 64, "uint64", "", f);
    for (int i = 0; i < 32; ++i) b.add(fmt::format("zmm{}h", i), 256, "v2ui128", "", f);
  }
  if (xcr0 & kXcr0Pkru) b.add("pkru", 32, "uint32", "", "org.gnu.gdb.i386.pkeys");
  return std::move(b.layout);
}

uint64_t host_xcr0() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return kXcr0Sse | 1;
  uint32_t lo = 0, hi = 0;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

uint64_t RegisterFile::get_u64(const RegisterLayout& layout, int regno) const {
  const auto& r = layout.regs.at(static_cast<size_t>(regno));
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + r.offset, std::min<size_t>(8, static_cast<size_t>(r.bitsize / 8)));
  return v;
}

void RegisterFile::set_u64(const RegisterLayout& layout, int regno, uint64_t value) {
  const auto& r = layout.regs.at(static_cast<size_t>(regno));
  size_t n = static_cast<size_t>(r.bitsize / 8);
  std::memset(bytes.data() + r.offset, 0, n);
  std::memcpy(bytes.data() + r.offset, &value, std::min<size_t>(8, n));
  if (valid.size() > static_cast<size_t>(regno)) valid[static_cast<size_t>(regno)] = true;
}

namespace {

// user_regs_struct field for each of GDB's registers 0-23 (core, without x87).
size_t gpr_offset(int regno) {
  switch (regno) {
    case 0: return offsetof(user_regs_struct, rax);
    case 1: return offsetof(user_regs_struct, rbx);
    case 2: return offsetof(user_regs_struct, rcx);
    case 3: return offsetof(user_regs_struct, rdx);
    case 4: return offsetof(user_regs_struct, rsi);
    case 5: return offsetof(user_regs_struct, rdi);
    case 6: return offsetof(user_regs_struct, rbp);
    case 7: return offsetof(user_regs_struct, rsp);
    case 8: return offsetof(user_regs_struct, r8);
    case 9: return offsetof(user_regs_struct, r9);
    case 10: return offsetof(user_regs_struct, r10);
    case 11: return offsetof(user_regs_struct, r11);
    case 12: return offsetof(user_regs_struct, r12);
    case 13: return offsetof(user_regs_struct, r13);
    case 14: return offsetof(user_regs_struct, r14);
    case 15: return offsetof(user_regs_struct, r15);
    case 16: return offsetof(user_regs_struct, rip);
    case 17: return offsetof(user_regs_struct, eflags);
    case 18: return offsetof(user_regs_struct, cs);
    case 19: return offsetof(user_regs_struct, ss);
    case 20: return offsetof(user_regs_struct, ds);
    case 21: return offsetof(user_regs_struct, es);
    case 22: return offsetof(user_regs_struct, fs);
    case 23: return offsetof(user_regs_struct, gs);
  }
  return 0;
}

constexpr int kSt0 = 24, kFctrl = 32, kFstat = 33, kFtag = 34, kFiseg = 35, kFioff = 36, kFoseg = 37,
              kFooff = 38, kFop = 39, kXmm0 = 40, kMxcsr = 56, kOrigRax = 57, kFsBase = 58, kGsBase = 59,
              kFirstXstate = 60;

void put32(RegisterFile& f, const RegisterLayout& l, int regno, uint32_t v) {
  std::memcpy(f.bytes.data() + l.regs[regno].offset, &v, 4);
}
uint32_t get32(const RegisterFile& f, const RegisterLayout& l, int regno) {
  uint32_t v;
  std::memcpy(&v, f.bytes.data() + l.regs[regno].offset, 4);
  return v;
}

void fill_from_fxsave(RegisterFile& f, const RegisterLayout& l, const user_fpregs_struct& fp) {
  const auto* raw = reinterpret_cast<const uint8_t*>(&fp);
  for (int i = 0; i < 8; ++i)
    std::memcpy(f.bytes.data() + l.regs[kSt0 + i].offset, reinterpret_cast<const uint8_t*>(fp.st_space) + 16 * i, 10);
  put32(f, l, kFctrl, fp.cwd);
  put32(f, l, kFstat, fp.swd);
  // FXSAVE keeps an abridged tag (1 bit per register); GDB wants the full 2-bit tag word.
  unsigned top = (fp.swd >> 11) & 7, ftag = 0;
  for (unsigned phys = 0; phys < 8; ++phys) {
    unsigned tag = 3;  // empty
    if (fp.ftw & (1u << phys)) {
      unsigned st = (phys - top) & 7;
      tag = i387_tag(reinterpret_cast<const uint8_t*>(fp.st_space) + 16 * st);
    }
    ftag |= tag << (2 * phys);
  }
  put32(f, l, kFtag, ftag);
  // 64-bit FXSAVE: FIP/FDP are 64-bit; GDB shows the low half as fioff/fooff, the high as fiseg/foseg.
  uint32_t w;
  std::memcpy(&w, raw + 8, 4); put32(f, l, kFioff, w);
  std::memcpy(&w, raw + 12, 4); put32(f, l, kFiseg, w);
  std::memcpy(&w, raw + 16, 4); put32(f, l, kFooff, w);
  std::memcpy(&w, raw + 20, 4); put32(f, l, kFoseg, w);
  put32(f, l, kFop, fp.fop & 0x7ff);
  for (int i = 0; i < 16; ++i)
    std::memcpy(f.bytes.data() + l.regs[kXmm0 + i].offset, reinterpret_cast<const uint8_t*>(fp.xmm_space) + 16 * i, 16);
  put32(f, l, kMxcsr, fp.mxcsr);
}

void store_to_fxsave(const RegisterFile& f, const RegisterLayout& l, user_fpregs_struct& fp) {
  auto* raw = reinterpret_cast<uint8_t*>(&fp);
  for (int i = 0; i < 8; ++i)
    std::memcpy(reinterpret_cast<uint8_t*>(fp.st_space) + 16 * i, f.bytes.data() + l.regs[kSt0 + i].offset, 10);
  fp.cwd = static_cast<uint16_t>(get32(f, l, kFctrl));
  fp.swd = static_cast<uint16_t>(get32(f, l, kFstat));
  uint32_t ftag = get32(f, l, kFtag);
  uint16_t abridged = 0;
  for (unsigned phys = 0; phys < 8; ++phys)
    if (((ftag >> (2 * phys)) & 3) != 3) abridged |= static_cast<uint16_t>(1u << phys);
  fp.ftw = abridged;
  uint32_t w;
  w = get32(f, l, kFioff); std::memcpy(raw + 8, &w, 4);
  w = get32(f, l, kFiseg); std::memcpy(raw + 12, &w, 4);
  w = get32(f, l, kFooff); std::memcpy(raw + 16, &w, 4);
  w = get32(f, l, kFoseg); std::memcpy(raw + 20, &w, 4);
  fp.fop = static_cast<uint16_t>(get32(f, l, kFop) & 0x7ff);
  for (int i = 0; i < 16; ++i)
    std::memcpy(reinterpret_cast<uint8_t*>(fp.xmm_space) + 16 * i, f.bytes.data() + l.regs[kXmm0 + i].offset, 16);
  fp.mxcsr = get32(f, l, kMxcsr);
}

}  // namespace

bool is_general_register(int regno) {
  return (regno >= 0 && regno < kSt0) || regno == kOrigRax || regno == kFsBase || regno == kGsBase;
}

std::optional<RegisterFile> RegisterAccess::read(pid_t tid, const RegisterLayout& layout, std::string* err,
                                                 RegisterSet set) {
  RegisterFile f;
  f.bytes.assign(layout.total_bytes, 0);
  f.valid.assign(layout.regs.size(), false);

  user_regs_struct gp{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &gp) != 0) {
    if (err) *err = fmt::format("PTRACE_GETREGS on thread {}: {}", tid, std::strerror(errno));
    return std::nullopt;
  }
  const auto* g = reinterpret_cast<const uint8_t*>(&gp);
  for (int r = 0; r < 24; ++r) {
    std::memcpy(f.bytes.data() + layout.regs[r].offset, g + gpr_offset(r), static_cast<size_t>(layout.regs[r].bitsize / 8));
    f.valid[r] = true;
  }
  f.set_u64(layout, kOrigRax, gp.orig_rax);
  f.set_u64(layout, kFsBase, gp.fs_base);
  f.set_u64(layout, kGsBase, gp.gs_base);
  if (set == RegisterSet::General) return f;

  user_fpregs_struct fp{};
  if (ptrace(PTRACE_GETFPREGS, tid, nullptr, &fp) == 0) {
    fill_from_fxsave(f, layout, fp);
    for (int r = kSt0; r <= kMxcsr; ++r) f.valid[r] = true;
  }

  if (layout.regs.size() > static_cast<size_t>(kFirstXstate)) {
    std::vector<uint8_t> xs;
    if (get_xstate(tid, xs, nullptr) && xs.size() >= 576) {
      uint64_t xstate_bv;
      std::memcpy(&xstate_bv, xs.data() + 512, 8);
      for (size_t r = kFirstXstate; r < layout.regs.size(); ++r) {
        const auto& info = layout.regs[r];
        int comp = xstate_component_of(info);
        size_t off = xstate_offset_of(info), n = static_cast<size_t>(info.bitsize / 8);
        // A component in its init state (XSTATE_BV bit clear) reads as zeros.
        if (comp >= 0 && (xstate_bv & (1ull << comp)) && off + n <= xs.size())
          std::memcpy(f.bytes.data() + info.offset, xs.data() + off, n);
        f.valid[r] = comp >= 0 && off + n <= xs.size();
      }
    }
  }
  return f;
}

bool RegisterAccess::write(pid_t tid, const RegisterLayout& layout, const RegisterFile& regs, std::string* err) {
  if (regs.bytes.size() < layout.total_bytes) {
    if (err) *err = "register file is smaller than the layout";
    return false;
  }
  // Read first so that registers marked invalid keep their current values.
  std::string read_err;
  auto current = read(tid, layout, &read_err);
  if (!current) {
    if (err) *err = read_err;
    return false;
  }
  RegisterFile merged = *current;
  for (size_t r = 0; r < layout.regs.size(); ++r) {
    if (r < regs.valid.size() && !regs.valid[r]) continue;
    const auto& info = layout.regs[r];
    std::memcpy(merged.bytes.data() + info.offset, regs.bytes.data() + info.offset, static_cast<size_t>(info.bitsize / 8));
  }

  user_regs_struct gp{};
  if (ptrace(PTRACE_GETREGS, tid, nullptr, &gp) != 0) {
    if (err) *err = fmt::format("PTRACE_GETREGS on thread {}: {}", tid, std::strerror(errno));
    return false;
  }
  auto* g = reinterpret_cast<uint8_t*>(&gp);
  for (int r = 0; r < 24; ++r) {
    size_t n = static_cast<size_t>(layout.regs[r].bitsize / 8);
    // 32-bit registers (eflags, selectors) sit in 64-bit slots: zero-extend.
    std::memset(g + gpr_offset(r), 0, 8);
    std::memcpy(g + gpr_offset(r), merged.bytes.data() + layout.regs[r].offset, n);
  }
  gp.orig_rax = merged.get_u64(layout, kOrigRax);
  gp.fs_base = merged.get_u64(layout, kFsBase);
  gp.gs_base = merged.get_u64(layout, kGsBase);
  if (ptrace(PTRACE_SETREGS, tid, nullptr, &gp) != 0) {
    if (err) *err = fmt::format("PTRACE_SETREGS on thread {}: {}", tid, std::strerror(errno));
    return false;
  }

  bool fp_changed = std::memcmp(merged.bytes.data() + layout.regs[kSt0].offset,
                                current->bytes.data() + layout.regs[kSt0].offset,
                                layout.regs[kOrigRax].offset - layout.regs[kSt0].offset) != 0;
  if (fp_changed) {
    user_fpregs_struct fp{};
    if (ptrace(PTRACE_GETFPREGS, tid, nullptr, &fp) != 0 || (store_to_fxsave(merged, layout, fp), false) ||
        ptrace(PTRACE_SETFPREGS, tid, nullptr, &fp) != 0) {
      if (err) *err = fmt::format("PTRACE_SETFPREGS on thread {}: {}", tid, std::strerror(errno));
      return false;
    }
  }

  // SETREGSET xstate can fail on some kernels (EFAULT): only write it when such a register changed.
  if (layout.regs.size() > static_cast<size_t>(kFirstXstate)) {
    size_t from = layout.regs[kFirstXstate].offset;
    if (std::memcmp(merged.bytes.data() + from, current->bytes.data() + from, layout.total_bytes - from) != 0) {
      std::vector<uint8_t> xs;
      if (!get_xstate(tid, xs, err)) return false;
      uint64_t xstate_bv;
      std::memcpy(&xstate_bv, xs.data() + 512, 8);
      for (size_t r = kFirstXstate; r < layout.regs.size(); ++r) {
        const auto& info = layout.regs[r];
        size_t n = static_cast<size_t>(info.bitsize / 8);
        if (std::memcmp(merged.bytes.data() + info.offset, current->bytes.data() + info.offset, n) == 0) continue;
        int comp = xstate_component_of(info);
        size_t off = xstate_offset_of(info);
        if (comp < 0 || off + n > xs.size()) continue;
        if (!(xstate_bv & (1ull << comp))) {
          // Leaving init state: the component's bytes in the buffer may be stale; start from zeros.
          for (size_t q = kFirstXstate; q < layout.regs.size(); ++q)
            if (xstate_component_of(layout.regs[q]) == comp) {
              size_t qo = xstate_offset_of(layout.regs[q]), qn = static_cast<size_t>(layout.regs[q].bitsize / 8);
              if (qo + qn <= xs.size()) std::memset(xs.data() + qo, 0, qn);
            }
          xstate_bv |= 1ull << comp;
        }
        std::memcpy(xs.data() + off, merged.bytes.data() + info.offset, n);
      }
      std::memcpy(xs.data() + 512, &xstate_bv, 8);
      iovec iov{xs.data(), xs.size()};
      if (ptrace(PTRACE_SETREGSET, tid, reinterpret_cast<void*>(NT_X86_XSTATE), &iov) != 0) {
        if (err) *err = fmt::format("PTRACE_SETREGSET(NT_X86_XSTATE) on thread {}: {}", tid, std::strerror(errno));
        return false;
      }
    }
  }
  return true;
}

}  // namespace backend
