// LinuxProcess's accessors: signals' siginfo, registers, memory (through the breakpoint
// shadows), breakpoints and watchpoints (debug registers, or emulated), and information read
// from /proc. The ptrace loop itself: see linux_process.h.
#include <signal.h>
#include <sys/ptrace.h>

#include <cstring>

#include <fmt/format.h>

#include "backend/linux/linux_process.h"
#include "backend/ptrace/proc_info.h"

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
  if (non_stop_ && thread_running(tid)) return Error{EBUSY, fmt::format("Thread {} is running.", tid)};
  LinuxThread* t = find(tid);
  std::string err;
  auto f = RegisterAccess::read(tid, layout_, &err, set);
  if (!f) {
    int code = errno ? errno : EIO;
    if (code == ESRCH && t && t->stop_regs) return *t->stop_regs;  // died while stopped
    return Error{code, err};
  }
  // An All read keeps what a General one of the same stop would add nothing to.
  if (t && !t->running && (set == RegisterSet::All || !t->stop_regs)) t->stop_regs = *f;
  return std::move(*f);
}

Result<void> LinuxProcess::write_registers(pid_t tid, const RegisterFile& regs) {
  if (!has_thread(tid)) return Error{ESRCH, fmt::format("Unknown thread {}.", tid)};
  if (non_stop_ && thread_running(tid)) return Error{EBUSY, fmt::format("Thread {} is running.", tid)};
  if (LinuxThread* t = find(tid)) t->stop_regs.reset();
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
  // Non-stop: a running thread must never execute half-written code; one byte is written at
  // once, more with the running threads paused for the instant of the write.
  if (!non_stop_ || copy.size() <= 1) return mem_.write(addr, copy);
  std::vector<pid_t> paused = pause_running();
  auto n = mem_.write(addr, copy);
  resume_paused(paused);
  return n;
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
  // Debug registers are written per thread with ptrace: running threads are paused meanwhile.
  std::vector<pid_t> paused = non_stop_ ? pause_running() : std::vector<pid_t>{};
  struct Resume {
    LinuxProcess* p;
    std::vector<pid_t>& tids;
    ~Resume() { p->resume_paused(tids); }
  } resume_after{this, paused};
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
  auto r = remove_client_point(kind, addr, len);
  // The conditions and commands go with the client's last breakpoint of that kind there.
  if (r && (kind == BreakpointKind::Software || kind == BreakpointKind::Hardware) && !has_client_breakpoint(kind, addr))
    conditions_.erase(addr, kind == BreakpointKind::Hardware);
  return r;
}

Result<void> LinuxProcess::remove_client_point(BreakpointKind kind, uint64_t addr, uint64_t len) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind == BreakpointKind::Software) return breakpoints_.remove(mem_, addr, BreakpointOwner::Client);
  HwKind hk = hw_kind_of(kind);
  if (settings_.watch_emulation) {
    if (auto r = watch_.remove(hk, addr, len); !r) return r;
    if (hk == HwKind::Execute) return breakpoints_.remove(mem_, addr, BreakpointOwner::ClientHardware);
    return {};
  }
  std::vector<pid_t> paused = non_stop_ ? pause_running() : std::vector<pid_t>{};
  if (auto r = debug_.remove(hk, addr, len); !r) {
    resume_paused(paused);
    return r;
  }
  for (auto& [tid, t] : threads_) (void)debug_.apply(tid);
  resume_paused(paused);
  return {};
}

bool LinuxProcess::has_client_breakpoint(BreakpointKind kind, uint64_t addr) const {
  if (kind == BreakpointKind::Software) return breakpoints_.has(addr, BreakpointOwner::Client);
  if (kind != BreakpointKind::Hardware) return false;
  if (settings_.watch_emulation) return breakpoints_.has(addr, BreakpointOwner::ClientHardware);
  return debug_.contains(HwKind::Execute, addr);
}

Result<void> LinuxProcess::set_breakpoint_program(BreakpointKind kind, uint64_t addr, BreakpointProgram program) {
  if (!alive_) return Error{ESRCH, "The process is not being debugged."};
  if (kind != BreakpointKind::Software && kind != BreakpointKind::Hardware)
    return Error{EOPNOTSUPP, "Conditions are evaluated in the server for code breakpoints only."};
  if (!program.empty() && !has_client_breakpoint(kind, addr))
    return Error{ENOENT, fmt::format("No breakpoint at {:#x}", addr)};
  conditions_.set(addr, kind == BreakpointKind::Hardware, std::move(program));
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
