// LinuxProcess's accessors: signals' siginfo, registers, memory (through the breakpoint
// shadows), breakpoints and watchpoints (debug registers, or emulated), and information read
// from /proc. The ptrace loop itself is in linux_process.cc.
#include <signal.h>
#include <sys/ptrace.h>

#include <cstring>

#include <fmt/format.h>

#include "backend/linux_process.h"
#include "backend/proc_info.h"

namespace backend {

Result<std::vector<uint8_t>> LinuxProcess::siginfo(pid_t tid) {
  std::vector<uint8_t> out(128, 0);
  static_assert(sizeof(siginfo_t) == 128);
  if (::ptrace(PTRACE_GETSIGINFO, tid, nullptr, out.data()) != 0)
    return errno_error(fmt::format("Cannot read the siginfo of thread {}", tid));
  return out;
}

Result<void> LinuxProcess::set_siginfo(pid_t tid, std::span<const uint8_t> info) {
  if (info.size() != sizeof(siginfo_t)) return Error{EINVAL, "A siginfo is 128 bytes."};
  siginfo_t si;
  std::memcpy(&si, info.data(), sizeof si);
  if (::ptrace(PTRACE_SETSIGINFO, tid, nullptr, &si) != 0)
    return errno_error(fmt::format("Cannot write the siginfo of thread {}", tid));
  return {};
}

// ---------------------------------------------------------------- registers

Result<RegisterFile> LinuxProcess::read_registers(pid_t tid, RegisterSet set) {
  if (!has_thread(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  std::string err;
  auto f = RegisterAccess::read(tid, layout_, &err, set);
  if (!f) return Error{errno ? errno : EIO, err};
  return std::move(*f);
}

Result<void> LinuxProcess::write_registers(pid_t tid, const RegisterFile& regs) {
  if (!has_thread(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  std::string err;
  if (!RegisterAccess::write(tid, layout_, regs, &err)) return Error{errno ? errno : EIO, err};
  return {};
}

// ---------------------------------------------------------------- memory

Result<size_t> LinuxProcess::read_memory(uint64_t addr, std::span<uint8_t> out) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  auto n = mem_.read(addr, out);
  if (!n) return n;
  breakpoints_.unshadow(addr, out.first(*n));
  stepper_.patch_unshadow(addr, out.first(*n));
  return n;
}

Result<size_t> LinuxProcess::write_memory(uint64_t addr, std::span<const uint8_t> data) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  std::vector<uint8_t> copy(data.begin(), data.end());
  breakpoints_.shadow_write(addr, copy);  // keeps our int3s, remembers the new originals
  code_cache_.invalidate(addr, copy.size());
  stepper_.patch_invalidate(addr, copy.size());
  watch_.invalidate_code(addr, copy.size());
  return mem_.write(addr, copy);
}

// ---------------------------------------------------------------- breakpoints

namespace {
HwKind hw_kind_of(BreakpointKind kind) {
  switch (kind) {
    case BreakpointKind::Hardware: return HwKind::Execute;
    case BreakpointKind::WriteWatch: return HwKind::Write;
    case BreakpointKind::ReadWatch: return HwKind::Read;
    default: return HwKind::Access;
  }
}
}  // namespace

Result<void> LinuxProcess::insert_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind == BreakpointKind::Software) return breakpoints_.insert(mem_, addr, BreakpointOwner::Client);
  HwKind hk = hw_kind_of(kind);
  if (settings_.watch_emulation) {
    // The slot accounting of the debug registers; an execute breakpoint is an int3 besides.
    if (auto r = watch_.insert(hk, addr, len); !r) return r;
    if (hk == HwKind::Execute)
      if (auto r = breakpoints_.insert(mem_, addr, BreakpointOwner::ClientHardware); !r) {
        (void)watch_.remove(hk, addr, len);
        return r;
      }
    return {};
  }
  // DR7 watches reads only together with writes: a read watchpoint would report writes too.
  if (hk == HwKind::Read)
    return Error{EOPNOTSUPP, "Read watchpoints are not supported by the debug registers (use awatch)."};
  if (auto r = debug_.insert(hk, addr, len); !r) return r;
  for (auto& [tid, t] : threads_)
    if (auto r = debug_.apply(tid); !r) {
      (void)debug_.remove(hk, addr, len);
      for (auto& [other, t2] : threads_) (void)debug_.apply(other);
      return r;
    }
  return {};
}

Result<void> LinuxProcess::remove_breakpoint(BreakpointKind kind, uint64_t addr, uint64_t len) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind == BreakpointKind::Software) return breakpoints_.remove(mem_, addr, BreakpointOwner::Client);
  HwKind hk = hw_kind_of(kind);
  if (settings_.watch_emulation) {
    if (auto r = watch_.remove(hk, addr, len); !r) return r;
    if (hk == HwKind::Execute) return breakpoints_.remove(mem_, addr, BreakpointOwner::ClientHardware);
    return {};
  }
  if (auto r = debug_.remove(hk, addr, len); !r) return r;
  for (auto& [tid, t] : threads_) (void)debug_.apply(tid);
  return {};
}

// ---------------------------------------------------------------- information

Result<std::vector<uint8_t>> LinuxProcess::auxv() { return read_auxv(pid_); }
Result<std::string> LinuxProcess::exe_path() { return read_exe_path(pid_); }
Result<std::vector<MemoryRegion>> LinuxProcess::memory_map() { return read_memory_map(pid_); }

Result<std::vector<LibraryInfo>> LinuxProcess::libraries(uint64_t* main_lm) {
  auto av = read_auxv(pid_);
  if (!av) return av.error();
  return read_libraries(*av, [this](uint64_t addr, std::span<uint8_t> out) -> size_t {
    auto n = read_memory(addr, out);
    return n ? *n : 0;
  }, main_lm);
}

}  // namespace backend
