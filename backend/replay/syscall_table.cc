#include "backend/replay/syscall_table.h"

#include <fcntl.h>
#include <sys/syscall.h>

#include <algorithm>
#include <map>
#include <optional>

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
      // Run again, its recorded signal sent at its entry (replayer.cc, signal_sent_at_entry).
      {SYS_rt_sigsuspend, {"rt_sigsuspend", 2, R::Execute}},
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
      // Child processes (gdb.reverse's waitpid-reverse, system(), popen()): the child runs
      // unrecorded (syscall_policy says which clones), the parent gets its pid back in the replay,
      // which makes none; what the parent learns of it (wait status, SIGCHLD) is recorded.
      {SYS_fork, {"fork", 0, R::Emulate}},
      {SYS_vfork, {"vfork", 0, R::Emulate}},
      {SYS_clone, {"clone", 5, R::Emulate}},
      {SYS_clone3, {"clone3", 2, R::Emulate}},
      {SYS_wait4, {"wait4", 4, R::Emulate}},
      {SYS_waitid, {"waitid", 5, R::Emulate}},
      {SYS_getresuid, {"getresuid", 3, R::Emulate}},
      {SYS_getresgid, {"getresgid", 3, R::Emulate}},
      // A local socket pair is made again (descriptors numbered as recorded); what goes through
      // a socket is emulated.
      {SYS_socketpair, {"socketpair", 4, R::Execute}},
      {SYS_sendto, {"sendto", 6, R::Emulate}},
      {SYS_recvfrom, {"recvfrom", 6, R::Emulate}},
      {SYS_sendmsg, {"sendmsg", 3, R::Emulate}},
      {SYS_recvmsg, {"recvmsg", 3, R::Emulate}},
      {SYS_shutdown, {"shutdown", 2, R::Emulate}},
      {SYS_bind, {"bind", 3, R::Emulate}},
      {SYS_listen, {"listen", 2, R::Emulate}},
      {SYS_getsockname, {"getsockname", 3, R::Emulate}},
      {SYS_getpeername, {"getpeername", 3, R::Emulate}},
      {SYS_setsockopt, {"setsockopt", 5, R::Emulate}},
      {SYS_getsockopt, {"getsockopt", 5, R::Emulate}},
      // Changes to files and directories: made when recorded, not again in the replay (whose
      // opens read the trace's copies or /dev/null, and whose writes are emulated).
      {SYS_creat, {"creat", 2, R::Placeholder}},
      {SYS_rename, {"rename", 2, R::Emulate}},
      {SYS_renameat, {"renameat", 4, R::Emulate}},
      {SYS_renameat2, {"renameat2", 5, R::Emulate}},
      {SYS_unlink, {"unlink", 1, R::Emulate}},
      {SYS_unlinkat, {"unlinkat", 3, R::Emulate}},
      {SYS_mkdir, {"mkdir", 2, R::Emulate}},
      {SYS_mkdirat, {"mkdirat", 3, R::Emulate}},
      {SYS_rmdir, {"rmdir", 1, R::Emulate}},
      {SYS_link, {"link", 2, R::Emulate}},
      {SYS_linkat, {"linkat", 5, R::Emulate}},
      {SYS_symlink, {"symlink", 2, R::Emulate}},
      {SYS_symlinkat, {"symlinkat", 3, R::Emulate}},
      {SYS_chdir, {"chdir", 1, R::Emulate}},
      {SYS_fchdir, {"fchdir", 1, R::Emulate}},
      {SYS_chmod, {"chmod", 2, R::Emulate}},
      {SYS_fchmod, {"fchmod", 2, R::Emulate}},
      {SYS_fchmodat, {"fchmodat", 3, R::Emulate}},
      {SYS_chown, {"chown", 3, R::Emulate}},
      {SYS_fchown, {"fchown", 3, R::Emulate}},
      {SYS_lchown, {"lchown", 3, R::Emulate}},
      {SYS_fchownat, {"fchownat", 5, R::Emulate}},
      {SYS_utimensat, {"utimensat", 4, R::Emulate}},
      {SYS_truncate, {"truncate", 2, R::Emulate}},
      {SYS_ftruncate, {"ftruncate", 2, R::Emulate}},
      {SYS_fsync, {"fsync", 1, R::Emulate}},
      {SYS_fdatasync, {"fdatasync", 1, R::Emulate}},
      {SYS_flock, {"flock", 2, R::Emulate}},
      {SYS_prctl, {"prctl", 5, R::Emulate}},  // the options syscall_policy lets through
      {SYS_sched_setaffinity, {"sched_setaffinity", 3, R::Emulate}},
      {SYS_getdents, {"getdents", 3, R::Emulate}},
      {SYS_sendfile, {"sendfile", 4, R::Emulate}},
      {SYS_copy_file_range, {"copy_file_range", 6, R::Emulate}},
      {SYS_execve, {"execve", 3, R::Exec}},
      {SYS_execveat, {"execveat", 5, R::Exec}},
      {SYS_getgroups, {"getgroups", 2, R::Emulate}},           // id
      {SYS_getpriority, {"getpriority", 2, R::Emulate}},       // nice
      {SYS_setrlimit, {"setrlimit", 2, R::Execute}},           // its own limits: as prlimit64's
      // POSIX timers (timeout(1)): not armed in replay; their signals come from the trace.
      {SYS_timer_create, {"timer_create", 3, R::Emulate}},
      {SYS_timer_settime, {"timer_settime", 4, R::Emulate}},
      {SYS_timer_gettime, {"timer_gettime", 2, R::Emulate}},
      {SYS_timer_getoverrun, {"timer_getoverrun", 1, R::Emulate}},
      {SYS_timer_delete, {"timer_delete", 1, R::Emulate}},
      {SYS_mlock, {"mlock", 2, R::Emulate}},                   // gpg: residency only
      {SYS_munlock, {"munlock", 2, R::Emulate}},
      {SYS_mlockall, {"mlockall", 1, R::Emulate}},
      {SYS_munlockall, {"munlockall", 0, R::Emulate}},
      {SYS_mlock2, {"mlock2", 3, R::Emulate}},
      {SYS_setpgid, {"setpgid", 2, R::Emulate}},               // job control (bash -i)
      {SYS_setsid, {"setsid", 0, R::Emulate}},
      {SYS_setpriority, {"setpriority", 3, R::Emulate}},
      {SYS_capget, {"capget", 2, R::Emulate}},                 // node
      {SYS_get_mempolicy, {"get_mempolicy", 5, R::Emulate}},   // ps
      {SYS_set_mempolicy, {"set_mempolicy", 3, R::Emulate}},   // NUMA placement only
      {SYS_mbind, {"mbind", 6, R::Emulate}},
      {SYS_close_range, {"close_range", 3, R::Execute}},       // ssh: the descriptor table as recorded
      {SYS_memfd_create, {"memfd_create", 2, R::Placeholder}},
      {SYS_signalfd4, {"signalfd4", 4, R::Placeholder}},
      // Descriptors made as placeholders in the replay (ReplayAs::Placeholder), their use emulated.
      {SYS_accept, {"accept", 3, R::Placeholder}},
      {SYS_accept4, {"accept4", 4, R::Placeholder}},
      {SYS_eventfd, {"eventfd", 1, R::Placeholder}},
      {SYS_eventfd2, {"eventfd2", 2, R::Placeholder}},
      {SYS_timerfd_create, {"timerfd_create", 2, R::Placeholder}},
      {SYS_timerfd_settime, {"timerfd_settime", 4, R::Emulate}},
      {SYS_timerfd_gettime, {"timerfd_gettime", 2, R::Emulate}},
      {SYS_epoll_create, {"epoll_create", 1, R::Placeholder}},
      {SYS_epoll_create1, {"epoll_create1", 1, R::Placeholder}},
      {SYS_epoll_ctl, {"epoll_ctl", 4, R::Emulate}},
      {SYS_epoll_wait, {"epoll_wait", 4, R::Emulate}},
      {SYS_epoll_pwait, {"epoll_pwait", 6, R::Emulate}},
      {SYS_inotify_init1, {"inotify_init1", 1, R::Placeholder}},
      {SYS_inotify_add_watch, {"inotify_add_watch", 3, R::Emulate}},
      {SYS_inotify_rm_watch, {"inotify_rm_watch", 2, R::Emulate}},
      {SYS_sendmmsg, {"sendmmsg", 4, R::Emulate}},
      {SYS_select, {"select", 5, R::Emulate}},
      {SYS_pselect6, {"pselect6", 6, R::Emulate}},
      {SYS_ppoll, {"ppoll", 5, R::Emulate}},
  };
  return t;
}

// Names of what is refused, for the message.
const std::map<long, const char*>& refused_names() {
  static const std::map<long, const char*> t = {
      {SYS_open, "open"},
      {SYS_io_uring_setup, "io_uring_setup"}, {SYS_recvmmsg, "recvmmsg"},
      {SYS_io_setup, "io_setup"}, {SYS_ptrace, "ptrace"}, {SYS_seccomp, "seccomp"}, {SYS_shmget, "shmget"},
      {SYS_shmat, "shmat"},
  };
  return t;
}

constexpr uint64_t kStatSize = 144, kStatxSize = 256, kTimespec = 16, kUtsname = 390, kTermios = 36;
constexpr uint64_t kStatfsSize = 120;  // struct statfs
constexpr uint64_t kRusage = 144, kSiginfo = 128;

// clone's flags (linux/sched.h). The exit signal is clone's low byte (clone3 has a field).
constexpr uint64_t kCloneSignalMask = 0xff;
constexpr uint64_t kCloneVm = 0x100, kCloneVfork = 0x4000, kCloneThread = 0x10000, kCloneSettls = 0x80000,
                   kCloneParentSettid = 0x100000, kCloneChildCleartid = 0x200000, kCloneChildSettid = 0x01000000;

// What a clone or clone3 asks for: clone's registers (flags, stack, parent_tid, child_tid,
// tls; the exit signal in the flags' low byte), clone3's struct clone_args in memory (flags,
// pidfd, child_tid, parent_tid, ..., set_tid_size at 72; at least 64 bytes). nullopt: clone3's
// struct could not be read (or no reader).
struct CloneCall {
  uint64_t flags = 0, parent_tid = 0, child_tid = 0, set_tid_size = 0;
};
std::optional<CloneCall> read_clone(long nr, const uint64_t args[6], const MemoryReader* read) {
  if (nr == SYS_clone) return CloneCall{args[0] & ~uint64_t{kCloneSignalMask}, args[2], args[3], 0};
  uint64_t ca[10] = {};
  size_t size = std::min<uint64_t>(args[1], sizeof ca);
  if (size < 64 || !read || !(*read)(args[0], ca, size)) return std::nullopt;
  return CloneCall{ca[0], ca[3], ca[2], size >= 80 ? ca[9] : 0};
}

// Why a clone with these flags cannot be recorded, "" when it can: a child process (fork,
// vfork, posix_spawn's CLONE_VM|CLONE_VFORK) runs unrecorded and the parent's side replays.
// Threads, shared descriptor tables, file systems or signal handlers, namespaces, pidfds and
// untraced children (which would keep the recording's patched code) are refused.
std::string clone_refusal(uint64_t flags) {
  if (flags & kCloneThread) return "threads are not supported by record yet (slice 3)";
  if ((flags & kCloneVm) && !(flags & kCloneVfork))
    return "a child sharing the program's memory while it runs (CLONE_VM without CLONE_VFORK) is not supported by record yet";
  constexpr uint64_t allowed = kCloneVm | kCloneVfork | kCloneSettls | kCloneParentSettid | kCloneChildCleartid |
                               kCloneChildSettid;
  if (flags & ~allowed) return fmt::format("clone flags {:#x} are not supported by record yet", flags & ~allowed);
  return {};
}

// The bytes an ioctl request writes at its third argument; nullopt: not in the table.
std::optional<uint64_t> ioctl_write_size(unsigned long request) {
  switch (request) {
    case 0x5401: return kTermios;                      // TCGETS
    case 0x5413: return 8;                             // TIOCGWINSZ
    case 0x541b: case 0x540f: return 4;                // FIONREAD, TIOCGPGRP
    case 0x5402: case 0x5403: case 0x5404: return 0;   // TCSETS, TCSETSW, TCSETSF: terminal settings
    case 0x40049409: case 0x4020940d: return 0;        // FICLONE, FICLONERANGE (cp): files only
    // A program run from a terminal: tcdrain/tcflush/tcflow, tcsetpgrp, the window size,
    // the controlling terminal, non-blocking mode; their effects are the terminal's only.
    case 0x5409: case 0x540a: case 0x540b: case 0x5410: case 0x5414: case 0x540e: case 0x5422: case 0x5421:
      return 0;
    case 0x5429: return 4;                             // TIOCGSID
    case 0x5450: case 0x5451: return 0;                // FIONCLEX, FIOCLEX: run again (syscall_policy)
    default: return std::nullopt;
  }
}

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

SyscallPolicy syscall_policy(long nr, const uint64_t args[6], int64_t self, const MemoryReader* read) {
  auto refuse = [&](std::string why) { return SyscallPolicy{ReplayAs::Refuse, std::move(why)}; };
  switch (nr) {
    case SYS_clone: case SYS_clone3: {
      if (nr == SYS_clone3 && !read) break;  // the replay: the recording checked them
      auto call = read_clone(nr, args, read);
      if (!call) return refuse("clone3: its clone_args could not be read");
      if (call->set_tid_size != 0) return refuse("clone3 with set_tid: not supported by record yet");
      if (auto why = clone_refusal(call->flags); !why.empty()) return refuse(fmt::format("{}: {}", syscall_name(nr), why));
      break;
    }
    case SYS_kill: case SYS_tkill: {
      // To itself: sent again in the replay. To another process (a child it made, which the
      // replay does not have): not sent again, the recorded result given back. To a process
      // group or everyone: both at once, which the replay cannot split.
      auto target = static_cast<int64_t>(args[0]);
      if (target == self) break;
      if (target > 0) return {ReplayAs::Emulate, {}};
      return refuse(fmt::format("{} to process group or all processes ({}): not supported by record yet",
                                syscall_name(nr), target));
    }
    case SYS_tgkill:
      if (static_cast<int64_t>(args[0]) == self && static_cast<int64_t>(args[1]) == self) break;
      if (static_cast<int64_t>(args[0]) != self && static_cast<int64_t>(args[0]) > 0) return {ReplayAs::Emulate, {}};
      return refuse("tgkill to another thread of the program: threads are not supported by record yet");
    case SYS_prctl:
      // What only reads or names things (process and thread names, the parent-death signal,
      // dumpable, no_new_privs, subreaper, THP, anonymous VMA names); not seccomp, the TSC or
      // CPUID traps the recording relies on, nor the address space's layout.
      switch (args[0]) {
        case 15: return {ReplayAs::Execute, {}};  // PR_SET_NAME: the replay's thread is named alike
        case 1: case 2: case 3: case 4: case 16: case 23: case 36: case 37: case 38: case 39:
        case 41: case 42: case 0x53564d41:
          break;
        default:
          return refuse(fmt::format("prctl option {}: not supported by record yet", args[0]));
      }
      break;
    case SYS_socketpair:
      if (args[0] != 1 /*AF_UNIX*/)
        return refuse(fmt::format("socketpair of family {}: only local sockets are supported by record yet", args[0]));
      break;
    case SYS_ioctl: {
      // Terminal queries and settings, bytes waiting: a known struct written, or nothing.
      unsigned long request = args[1];
      if (!ioctl_write_size(request))
        return refuse(fmt::format("ioctl request {:#x}: its memory effects are not in the table", request));
      // Close-on-exec, which decides what an exec keeps (as fcntl's F_SETFD).
      if (request == 0x5450 || request == 0x5451) return {ReplayAs::Execute, {}};
      break;
    }
    case SYS_fcntl: {
      int cmd = static_cast<int>(args[1]);
      // Duplicates, and close-on-exec, which decides what an exec leaves open: run again.
      if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC || cmd == F_SETFD) return {ReplayAs::Execute, {}};
      // Record locks (sqlite, gcc's lock files) and pipe sizes matter between processes only.
      constexpr int kOfdGetlk = 36, kOfdSetlk = 37, kOfdSetlkw = 38, kSetPipeSz = 1031, kGetPipeSz = 1032;
      bool known = cmd == F_GETFD || cmd == F_GETFL || cmd == F_SETFL || cmd == F_GETLK || cmd == F_SETLK ||
                   cmd == F_SETLKW || cmd == kOfdGetlk || cmd == kOfdSetlk || cmd == kOfdSetlkw ||
                   cmd == kSetPipeSz || cmd == kGetPipeSz;
      if (!known) return refuse(fmt::format("fcntl command {}: not in the table", cmd));
      break;
    }
    case SYS_prlimit64:
      // Setting its own limit runs again (what it may open or map later depends on it); another
      // process's (or its own by pid, which the replay does not have) is not set in the replay.
      if (args[2] != 0) return {args[0] == 0 ? ReplayAs::Execute : ReplayAs::Emulate, {}};
      break;
    case SYS_mmap:
      if (args[3] & 0x01 /*MAP_SHARED*/ && !(args[3] & 0x20 /*MAP_ANONYMOUS*/) && (args[2] & 0x2 /*PROT_WRITE*/))
        return refuse("mmap of a file MAP_SHARED and writable: writes through it cannot be replayed yet");
      break;
    case SYS_futex:
      break;  // single-threaded: nobody else waits or wakes
    case SYS_socket:
      // A local socket is made again (glibc's nscd lookup connects it); another family's
      // (network, netlink) is a placeholder: nothing it would send or receive is in the replay.
      if (args[0] != 1 /*AF_UNIX*/) return {ReplayAs::Placeholder, {}};
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
  // `bytes` received fill the `count` iovecs at `at` in order (readv, recvmsg).
  auto add_iovecs = [&](uint64_t at, uint64_t count, uint64_t bytes) {
    for (uint64_t i = 0; i < count && bytes > 0; ++i) {
      uint64_t iov[2];
      if (!read(at + 16 * i, iov, sizeof iov)) break;
      uint64_t n = std::min(iov[1], bytes);
      add(iov[0], n);
      bytes -= n;
    }
  };
  if (result < 0 && nr != SYS_nanosleep && nr != SYS_clock_nanosleep) return out;
  uint64_t r = static_cast<uint64_t>(result);
  switch (nr) {
    case SYS_read: case SYS_pread64: case SYS_getdents64: case SYS_readlink:
      add(args[1], r);
      break;
    case SYS_readlinkat: add(args[2], r); break;
    case SYS_getcwd: case SYS_getrandom: add(args[0], r); break;
    case SYS_readv: add_iovecs(args[1], args[2], r); break;
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
    case SYS_ioctl: add(args[2], ioctl_write_size(args[1]).value_or(0)); break;
    case SYS_getitimer: add(args[1], 32); break;
    case SYS_setitimer: add(args[2], 32); break;
    case SYS_getrlimit: case SYS_getrusage: add(args[1], nr == SYS_getrlimit ? 16 : 144); break;
    case SYS_prlimit64: add(args[3], 16); break;
    case SYS_fcntl:
      if (args[1] == F_GETLK || args[1] == 36 /*F_OFD_GETLK*/) add(args[2], 32);  // struct flock
      break;
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
    case SYS_wait4:
      if (r > 0) {  // 0: WNOHANG and no child changed state, nothing written
        add(args[1], 4);
        add(args[3], kRusage);
      }
      break;
    case SYS_waitid: add(args[2], kSiginfo); add(args[4], kRusage); break;
    case SYS_getresuid: case SYS_getresgid: add(args[0], 4); add(args[1], 4); add(args[2], 4); break;
    case SYS_getdents: add(args[1], r); break;
    case SYS_getgroups: if (args[0]) add(args[1], r * 4); break;  // size 0 asks for the count
    case SYS_capget: add(args[0], 8); add(args[1], 24); break;   // the header's version, 2 data structs
    case SYS_get_mempolicy: add(args[0], 4); add(args[1], (args[2] + 63) / 64 * 8); break;
    case SYS_sendfile: add(args[2], 8); break;  // the input offset, advanced
    case SYS_copy_file_range: add(args[1], 8); add(args[3], 8); break;  // both offsets
    case SYS_prctl:
      if (args[0] == 2 || args[0] == 37) add(args[1], 4);    // PR_GET_PDEATHSIG, PR_GET_CHILD_SUBREAPER
      else if (args[0] == 16) add(args[1], 16);              // PR_GET_NAME
      break;
    case SYS_socketpair: add(args[3], 8); break;
    case SYS_clone: case SYS_clone3: {
      // The kernel writes the child's tid into the parent (CLONE_PARENT_SETTID), and into a
      // vfork child's memory, which is the parent's (CLONE_CHILD_SETTID; CLONE_CHILD_CLEARTID's
      // 0 when it execs or exits, before the parent goes on).
      auto call = read_clone(nr, args, &read);
      if (!call) break;
      if (call->flags & kCloneParentSettid) add(call->parent_tid, 4);
      if ((call->flags & kCloneVm) && (call->flags & (kCloneChildSettid | kCloneChildCleartid))) add(call->child_tid, 4);
      break;
    }
    case SYS_recvfrom: {
      add(args[1], r);
      uint32_t len = 0;  // the source address's length, as the kernel left it
      if (args[4] && args[5] && read(args[5], &len, 4)) {
        add(args[4], len);
        add(args[5], 4);
      }
      break;
    }
    case SYS_epoll_wait: case SYS_epoll_pwait: add(args[1], r * 12); break;  // struct epoll_event, packed
    case SYS_timerfd_settime: add(args[3], 32); break;                       // the old itimerspec
    case SYS_timer_create: add(args[2], 4); break;                           // the timer's id
    case SYS_timer_settime: add(args[3], 32); break;
    case SYS_timer_gettime: add(args[1], 32); break;
    case SYS_timerfd_gettime: add(args[1], 32); break;
    case SYS_sendmmsg:  // each sent message's msg_len (struct mmsghdr: a msghdr, then a u32)
      for (uint64_t i = 0; i < r; ++i) add(args[1] + 64 * i + 56, 4);
      break;
    case SYS_getsockname: case SYS_getpeername: case SYS_getsockopt: case SYS_accept: case SYS_accept4: {
      // (fd, addr, len*) or (fd, level, name, value, len*): the value and its length.
      uint64_t value = nr == SYS_getsockopt ? args[3] : args[1], len_at = nr == SYS_getsockopt ? args[4] : args[2];
      uint32_t len = 0;
      if (len_at && read(len_at, &len, 4)) {
        add(value, len);
        add(len_at, 4);
      }
      break;
    }
    case SYS_recvmsg: {
      // struct msghdr: name, namelen (u32), iov, iovlen, control, controllen, flags (int).
      uint64_t m[7] = {};
      if (!read(args[1], m, sizeof m)) break;
      add_iovecs(m[2], m[3], r);
      add(m[0], m[1] & 0xffffffffu);
      add(m[4], m[5]);
      add(args[1] + 8, 4);   // namelen
      add(args[1] + 40, 8);  // controllen
      add(args[1] + 48, 4);  // flags
      break;
    }
    case SYS_select: case SYS_pselect6: {
      // The three descriptor sets (nfds bits, in longs), and the time left.
      uint64_t set = (args[0] + 63) / 64 * 8;
      add(args[1], set);
      add(args[2], set);
      add(args[3], set);
      add(args[4], 16);
      break;
    }
    case SYS_ppoll: add(args[0], args[1] * 8); add(args[2], kTimespec); break;
    default: break;  // writes nothing (or is run again in replay, which writes it)
  }
  return out;
}

bool placeholder_cloexec(long nr, const uint64_t args[6]) {
  constexpr uint64_t kCloexec = 0x80000;  // O_CLOEXEC = SOCK_/EFD_/TFD_/EPOLL_/IN_/SFD_CLOEXEC
  switch (nr) {
    case SYS_socket: return args[1] & kCloexec;
    case SYS_accept4: case SYS_signalfd4: return args[3] & kCloexec;
    case SYS_eventfd2: case SYS_timerfd_create: return args[1] & kCloexec;
    case SYS_epoll_create1: case SYS_inotify_init1: return args[0] & kCloexec;
    case SYS_memfd_create: return args[1] & 1;  // MFD_CLOEXEC
    default: return false;                      // accept, eventfd, epoll_create, creat
  }
}

std::string unreplayable_result(long nr, const uint64_t args[6], int64_t result, const MemoryReader& read) {
  if (nr != SYS_recvmsg || result < 0) return {};
  // Descriptors passed over the socket (SCM_RIGHTS) are new descriptors in the program: the
  // replay, which receives nothing, would not have them.
  uint64_t m[7] = {};
  if (!read(args[1], m, sizeof m)) return "recvmsg: its msghdr could not be read";
  uint64_t control = m[4], length = m[5];
  for (uint64_t at = 0; at + 16 <= length;) {
    uint64_t cmsg_len = 0;
    int32_t level_type[2] = {};
    if (!read(control + at, &cmsg_len, 8) || !read(control + at + 8, level_type, 8))
      return "recvmsg: its control messages could not be read";
    if (level_type[0] == 1 /*SOL_SOCKET*/ && level_type[1] == 1 /*SCM_RIGHTS*/)
      return "recvmsg received file descriptors (SCM_RIGHTS): not supported by record yet";
    if (cmsg_len < 16) break;
    at += (cmsg_len + 7) & ~uint64_t{7};
  }
  return {};
}

}  // namespace backend::replay
