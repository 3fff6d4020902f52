#include "backend/replay/syscall_table.h"

#include <fcntl.h>
#include <sys/syscall.h>

#include <map>

#include <fmt/format.h>

namespace backend::replay {

namespace {

struct Entry {
  const char* name;
  int args;
  ReplayAs as;
};

// Everything glibc's start-up and ordinary single-threaded programs use. Absent: refused.
const std::map<long, Entry>& table() {
  using R = ReplayAs;
  static const std::map<long, Entry> t = {
      {SYS_read, {"read", 3, R::Emulate}},
      {SYS_write, {"write", 3, R::Emulate}},
      {SYS_close, {"close", 1, R::Execute}},
      {SYS_stat, {"stat", 2, R::Emulate}},
      {SYS_fstat, {"fstat", 2, R::Emulate}},
      {SYS_lstat, {"lstat", 2, R::Emulate}},
      {SYS_poll, {"poll", 3, R::Emulate}},
      {SYS_lseek, {"lseek", 3, R::Emulate}},
      {SYS_mmap, {"mmap", 6, R::Execute}},
      {SYS_mprotect, {"mprotect", 3, R::Execute}},
      {SYS_munmap, {"munmap", 2, R::Execute}},
      {SYS_brk, {"brk", 1, R::Execute}},
      {SYS_rt_sigaction, {"rt_sigaction", 4, R::Execute}},
      {SYS_rt_sigprocmask, {"rt_sigprocmask", 4, R::Execute}},
      {SYS_rt_sigreturn, {"rt_sigreturn", 0, R::ExecuteUnchecked}},
      {SYS_ioctl, {"ioctl", 3, R::Emulate}},
      {SYS_pread64, {"pread64", 4, R::Emulate}},
      {SYS_pwrite64, {"pwrite64", 4, R::Emulate}},
      {SYS_readv, {"readv", 3, R::Emulate}},
      {SYS_writev, {"writev", 3, R::Emulate}},
      {SYS_access, {"access", 2, R::Emulate}},
      {SYS_pipe, {"pipe", 1, R::Execute}},
      {SYS_sched_yield, {"sched_yield", 0, R::Emulate}},
      {SYS_mremap, {"mremap", 5, R::Execute}},
      {SYS_madvise, {"madvise", 3, R::Execute}},
      {SYS_dup, {"dup", 1, R::Execute}},
      {SYS_dup2, {"dup2", 2, R::Execute}},
      {SYS_pause, {"pause", 0, R::Emulate}},
      {SYS_nanosleep, {"nanosleep", 2, R::Emulate}},
      {SYS_getitimer, {"getitimer", 2, R::Emulate}},
      {SYS_alarm, {"alarm", 1, R::Emulate}},
      {SYS_setitimer, {"setitimer", 3, R::Emulate}},
      {SYS_getpid, {"getpid", 0, R::Emulate}},
      {SYS_exit, {"exit", 1, R::ExecuteUnchecked}},
      {SYS_kill, {"kill", 2, R::SignalSelf}},
      {SYS_uname, {"uname", 1, R::Emulate}},
      {SYS_fcntl, {"fcntl", 3, R::Emulate}},
      {SYS_getdents64, {"getdents64", 3, R::Emulate}},
      {SYS_getcwd, {"getcwd", 2, R::Emulate}},
      {SYS_readlink, {"readlink", 3, R::Emulate}},
      {SYS_umask, {"umask", 1, R::Emulate}},
      {SYS_gettimeofday, {"gettimeofday", 2, R::Emulate}},
      {SYS_getrlimit, {"getrlimit", 2, R::Emulate}},
      {SYS_getrusage, {"getrusage", 2, R::Emulate}},
      {SYS_sysinfo, {"sysinfo", 1, R::Emulate}},
      {SYS_times, {"times", 1, R::Emulate}},
      {SYS_getuid, {"getuid", 0, R::Emulate}},
      {SYS_getgid, {"getgid", 0, R::Emulate}},
      {SYS_geteuid, {"geteuid", 0, R::Emulate}},
      {SYS_getegid, {"getegid", 0, R::Emulate}},
      {SYS_getppid, {"getppid", 0, R::Emulate}},
      {SYS_getpgrp, {"getpgrp", 0, R::Emulate}},
      {SYS_getpgid, {"getpgid", 1, R::Emulate}},
      {SYS_getsid, {"getsid", 1, R::Emulate}},
      {SYS_sigaltstack, {"sigaltstack", 2, R::Execute}},
      {SYS_arch_prctl, {"arch_prctl", 2, R::Execute}},
      {SYS_gettid, {"gettid", 0, R::Emulate}},
      {SYS_tkill, {"tkill", 2, R::SignalSelf}},
      {SYS_time, {"time", 1, R::Emulate}},
      {SYS_futex, {"futex", 6, R::Emulate}},
      {SYS_sched_getaffinity, {"sched_getaffinity", 3, R::Emulate}},
      {SYS_set_tid_address, {"set_tid_address", 1, R::ExecuteAnyResult}},
      {SYS_restart_syscall, {"restart_syscall", 0, R::Emulate}},
      {SYS_clock_gettime, {"clock_gettime", 2, R::Emulate}},
      {SYS_clock_getres, {"clock_getres", 2, R::Emulate}},
      {SYS_clock_nanosleep, {"clock_nanosleep", 4, R::Emulate}},
      {SYS_exit_group, {"exit_group", 1, R::ExecuteUnchecked}},
      {SYS_tgkill, {"tgkill", 3, R::SignalSelf}},
      {SYS_openat, {"openat", 4, R::OpenFile}},
      {SYS_newfstatat, {"newfstatat", 4, R::Emulate}},
      {SYS_readlinkat, {"readlinkat", 4, R::Emulate}},
      {SYS_faccessat, {"faccessat", 3, R::Emulate}},
      {SYS_faccessat2, {"faccessat2", 4, R::Emulate}},
      {SYS_set_robust_list, {"set_robust_list", 2, R::Execute}},
      {SYS_dup3, {"dup3", 3, R::Execute}},
      {SYS_pipe2, {"pipe2", 2, R::Execute}},
      {SYS_prlimit64, {"prlimit64", 4, R::Emulate}},
      {SYS_getcpu, {"getcpu", 3, R::Emulate}},
      {SYS_getrandom, {"getrandom", 3, R::Emulate}},
      {SYS_statx, {"statx", 5, R::Emulate}},
      {SYS_rseq, {"rseq", 4, R::Emulate}},
      // ls -l and gzip -c (issue 28's benchmarks): file systems, extended attributes, advice.
      {SYS_statfs, {"statfs", 2, R::Emulate}},
      {SYS_fstatfs, {"fstatfs", 2, R::Emulate}},
      {SYS_getxattr, {"getxattr", 4, R::Emulate}},
      {SYS_lgetxattr, {"lgetxattr", 4, R::Emulate}},
      {SYS_fgetxattr, {"fgetxattr", 4, R::Emulate}},
      {SYS_listxattr, {"listxattr", 3, R::Emulate}},
      {SYS_llistxattr, {"llistxattr", 3, R::Emulate}},
      {SYS_flistxattr, {"flistxattr", 3, R::Emulate}},
      {SYS_fadvise64, {"fadvise64", 4, R::Emulate}},
      // A local socket (glibc asks nscd for user names): made again, so descriptors stay
      // numbered as recorded; what goes through it is emulated.
      {SYS_socket, {"socket", 3, R::Execute}},
      {SYS_connect, {"connect", 3, R::Emulate}},
  };
  return t;
}

// Names of what is refused, for the message.
const std::map<long, const char*>& refused_names() {
  static const std::map<long, const char*> t = {
      {SYS_open, "open"}, {SYS_clone, "clone"}, {SYS_clone3, "clone3"}, {SYS_fork, "fork"},
      {SYS_vfork, "vfork"}, {SYS_execve, "execve"}, {SYS_execveat, "execveat"}, {SYS_accept, "accept"},
      {SYS_io_uring_setup, "io_uring_setup"},
      {SYS_io_setup, "io_setup"}, {SYS_ptrace, "ptrace"}, {SYS_prctl, "prctl"}, {SYS_select, "select"},
      {SYS_pselect6, "pselect6"}, {SYS_ppoll, "ppoll"}, {SYS_epoll_create1, "epoll_create1"},
      {SYS_epoll_wait, "epoll_wait"}, {SYS_wait4, "wait4"}, {SYS_memfd_create, "memfd_create"},
      {SYS_eventfd2, "eventfd2"}, {SYS_timerfd_create, "timerfd_create"}, {SYS_shmget, "shmget"},
      {SYS_shmat, "shmat"}, {SYS_creat, "creat"}, {SYS_rename, "rename"}, {SYS_unlink, "unlink"},
      {SYS_mkdir, "mkdir"}, {SYS_chdir, "chdir"}, {SYS_ftruncate, "ftruncate"}, {SYS_fsync, "fsync"},
      {SYS_sendfile, "sendfile"}, {SYS_getdents, "getdents"}, {SYS_sched_setaffinity, "sched_setaffinity"},
  };
  return t;
}

constexpr uint64_t kStatSize = 144, kStatxSize = 256, kTimespec = 16, kUtsname = 390, kTermios = 36;
constexpr uint64_t kStatfsSize = 120;  // struct statfs

}  // namespace

std::string syscall_name(long nr) {
  if (auto it = table().find(nr); it != table().end()) return it->second.name;
  if (auto it = refused_names().find(nr); it != refused_names().end()) return it->second;
  return fmt::format("syscall {}", nr);
}

int syscall_arg_count(long nr) {
  auto it = table().find(nr);
  return it == table().end() ? 6 : it->second.args;
}

SyscallPolicy syscall_policy(long nr, const uint64_t args[6], int64_t self) {
  auto refuse = [&](std::string why) { return SyscallPolicy{ReplayAs::Refuse, std::move(why)}; };
  switch (nr) {
    case SYS_clone: case SYS_clone3: case SYS_fork: case SYS_vfork:
      return refuse(fmt::format("{}: threads and child processes are not supported by record yet (slice 1 "
                                "records single-threaded programs)", syscall_name(nr)));
    case SYS_execve: case SYS_execveat:
      return refuse(fmt::format("{}: a program that runs another program is not supported by record yet",
                                syscall_name(nr)));
    case SYS_kill: case SYS_tkill:
      if (static_cast<int64_t>(args[0]) != self)
        return refuse(fmt::format("{} to another process ({}): only signals to itself can be replayed",
                                  syscall_name(nr), static_cast<int64_t>(args[0])));
      break;
    case SYS_tgkill:
      if (static_cast<int64_t>(args[0]) != self || static_cast<int64_t>(args[1]) != self)
        return refuse("tgkill to another process or thread: only signals to itself can be replayed");
      break;
    case SYS_ioctl: {
      // Terminal queries only (isatty, the window size): they write a known struct.
      unsigned long request = args[1];
      if (request != 0x5401 /*TCGETS*/ && request != 0x5413 /*TIOCGWINSZ*/)
        return refuse(fmt::format("ioctl request {:#x}: its memory effects are not in the table", request));
      break;
    }
    case SYS_fcntl: {
      int cmd = static_cast<int>(args[1]);
      if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) return {ReplayAs::Execute, {}};
      if (cmd != F_GETFD && cmd != F_SETFD && cmd != F_GETFL && cmd != F_SETFL)
        return refuse(fmt::format("fcntl command {}: not in the table", cmd));
      break;
    }
    case SYS_prlimit64:
      if (args[2] != 0) return refuse("prlimit64 setting a limit: not supported by record yet");
      break;
    case SYS_mmap:
      if (args[3] & 0x01 /*MAP_SHARED*/ && !(args[3] & 0x20 /*MAP_ANONYMOUS*/) && (args[2] & 0x2 /*PROT_WRITE*/))
        return refuse("mmap of a file MAP_SHARED and writable: writes through it cannot be replayed yet");
      break;
    case SYS_futex:
      break;  // single-threaded: nobody else waits or wakes
    case SYS_socket:
      if (args[0] != 1 /*AF_UNIX*/)
        return refuse(fmt::format("socket of family {}: only local sockets are supported by record yet", args[0]));
      break;
    default:
      break;
  }
  auto it = table().find(nr);
  if (it == table().end())
    return refuse(fmt::format("{}: not in branchstub's table of recorded system calls", syscall_name(nr)));
  return {it->second.as, {}};
}

std::vector<Range> written_ranges(long nr, const uint64_t args[6], int64_t result, const MemoryReader& read) {
  std::vector<Range> out;
  auto add = [&](uint64_t addr, uint64_t length) {
    if (addr != 0 && length != 0) out.push_back({addr, length});
  };
  if (result < 0 && nr != SYS_nanosleep && nr != SYS_clock_nanosleep) return out;
  uint64_t r = static_cast<uint64_t>(result);
  switch (nr) {
    case SYS_read: case SYS_pread64: case SYS_getdents64: case SYS_readlink:
      add(args[1], r);
      break;
    case SYS_readlinkat: add(args[2], r); break;
    case SYS_getcwd: case SYS_getrandom: add(args[0], r); break;
    case SYS_readv: {
      // The result's bytes fill the iovecs in order.
      uint64_t left = r;
      for (uint64_t i = 0; i < args[2] && left > 0; ++i) {
        uint64_t iov[2];
        if (!read(args[1] + 16 * i, iov, sizeof iov)) break;
        uint64_t n = iov[1] < left ? iov[1] : left;
        add(iov[0], n);
        left -= n;
      }
      break;
    }
    case SYS_stat: case SYS_fstat: case SYS_lstat: add(args[1], kStatSize); break;
    case SYS_newfstatat: add(args[2], kStatSize); break;
    case SYS_statx: add(args[4], kStatxSize); break;
    case SYS_statfs: case SYS_fstatfs: add(args[1], kStatfsSize); break;
    // The value (the names) is written only when a buffer was given: size 0 asks for the length.
    case SYS_getxattr: case SYS_lgetxattr: case SYS_fgetxattr: if (args[3]) add(args[2], r); break;
    case SYS_listxattr: case SYS_llistxattr: case SYS_flistxattr: if (args[2]) add(args[1], r); break;
    case SYS_clock_gettime: case SYS_clock_getres: add(args[1], kTimespec); break;
    case SYS_gettimeofday: add(args[0], 16); add(args[1], 8); break;
    case SYS_time: add(args[0], 8); break;
    case SYS_uname: add(args[0], kUtsname); break;
    case SYS_poll: add(args[0], args[1] * 8); break;
    case SYS_ioctl: add(args[2], args[1] == 0x5401 ? kTermios : 8); break;
    case SYS_getitimer: add(args[1], 32); break;
    case SYS_setitimer: add(args[2], 32); break;
    case SYS_getrlimit: case SYS_getrusage: add(args[1], nr == SYS_getrlimit ? 16 : 144); break;
    case SYS_prlimit64: add(args[3], 16); break;
    case SYS_sysinfo: add(args[0], 112); break;
    case SYS_times: add(args[0], 32); break;
    case SYS_sched_getaffinity: add(args[2], r); break;
    case SYS_getcpu: add(args[0], 4); add(args[1], 4); break;
    case SYS_nanosleep: if (result != 0) add(args[1], kTimespec); break;  // the time left, when interrupted
    case SYS_clock_nanosleep: if (result != 0 && !(args[1] & 1)) add(args[3], kTimespec); break;
    case SYS_pipe: case SYS_pipe2: add(args[0], 8); break;
    // Run again, but what they report of the old state is the recording's (inherited
    // dispositions and masks may differ where the replay runs).
    case SYS_rt_sigaction: add(args[2], 24 + args[3]); break;  // handler, flags, restorer, mask
    case SYS_rt_sigprocmask: add(args[2], args[3]); break;
    default: break;  // writes nothing (or is run again in replay, which writes it)
  }
  return out;
}

}  // namespace backend::replay
