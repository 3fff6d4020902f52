// The record/replay trace format (header text, event records, the directory) and the syscall table.
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backend/host/cpu_id.h"
#include "backend/replay/register_digest.h"
#include "backend/replay/syscall_table.h"
#include "backend/replay/trace_format.h"

using namespace backend::replay;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/bs-trace-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

TraceHeader sample_header() {
  TraceHeader h;
  h.argv = {"./prog", "two words", "line\nbreak", "back\\slash"};
  h.env = {"A=1", "PATH=/usr/bin"};
  h.cwd = "/tmp/x";
  h.exe = "/tmp/x/prog";
  h.exe_hash = 0x0123456789abcdefULL;
  h.auxv = {1, 2, 3, 0xff};
  h.at_random = std::vector<uint8_t>(16, 0xab);
  h.pid = 4242;
  h.event_count = 7;
  h.complete = true;
  h.exit_status = -9;
  h.files.push_back({"/lib/with space.so", "0-with_space.so", 0xfeed, 1234});
  h.cpu = "AuthenticAMD 26 2 1";
  h.cpu_features = {0xfed83203, 0x178bfbff, 0xf1bf03a9, 0x405fce, 0x10, 0x75c237ff, 0x2fd3fbff};
  h.xcr0 = 0x2e7;
  h.fds = std::vector<int>{0, 1, 2, 5, 255};
  h.sig_ignored = 0x800;
  h.sig_blocked = 0x4000;
  return h;
}

}  // namespace

TEST_CASE("trace header: text round trip keeps every field") {
  TraceHeader h = sample_header();
  auto back = parse_header(format_header(h));
  REQUIRE(back.ok());
  CHECK(back->argv == h.argv);
  CHECK(back->env == h.env);
  CHECK(back->cwd == h.cwd);
  CHECK(back->exe == h.exe);
  CHECK(back->exe_hash == h.exe_hash);
  CHECK(back->auxv == h.auxv);
  CHECK(back->at_random == h.at_random);
  CHECK(back->pid == 4242);
  CHECK(back->event_count == 7);
  CHECK(back->complete);
  CHECK(back->exit_status == -9);
  REQUIRE(back->files.size() == 1);
  CHECK(back->files[0].path == "/lib/with space.so");
  CHECK(back->files[0].copy == "0-with_space.so");
  CHECK(back->files[0].hash == 0xfeed);
  CHECK(back->files[0].size == 1234);
  CHECK(back->cpu == h.cpu);
  CHECK(back->cpu_features == h.cpu_features);
  CHECK(back->xcr0 == 0x2e7);
  CHECK(back->fds == h.fds);
  CHECK(back->sig_ignored == h.sig_ignored);
  CHECK(back->sig_blocked == h.sig_blocked);
}

TEST_CASE("trace header: descriptors kept, none open, or not kept (older traces)") {
  TraceHeader h = sample_header();
  h.fds = std::vector<int>{};
  auto none = parse_header(format_header(h));
  REQUIRE(none.ok());
  REQUIRE(none->fds.has_value());
  CHECK(none->fds->empty());
  h.fds.reset();
  CHECK(format_header(h).find("fds") == std::string::npos);
  auto older = parse_header(format_header(h));
  REQUIRE(older.ok());
  CHECK_FALSE(older->fds.has_value());
  h.sig_ignored.reset();
  h.sig_blocked.reset();
  auto no_signals = parse_header(format_header(h));
  REQUIRE(no_signals.ok());
  CHECK_FALSE(no_signals->sig_ignored.has_value());
  CHECK_FALSE(no_signals->sig_blocked.has_value());
}

TEST_CASE("trace header: the recording CPU's features against this one's") {
  backend::CpuFeatures recorded{"GenuineIntel 6 85 7", {0x80000001, 0x2, 0x10030, 0, 0, 0, 0}, 0xe7};
  backend::CpuFeatures here{"AuthenticAMD 25 1 1", {0x00000001, 0x2, 0x00010, 0, 0, 0, 0}, 0x7};
  // The hypervisor bit says where it ran, not what it can execute.
  CHECK(backend::missing_features(recorded, here) == "CPUID.7:EBX bits 0x10020");
  CHECK(backend::missing_features(here, recorded).empty());
  CHECK(backend::missing_features(recorded, recorded).empty());
  auto now = backend::read_cpu_features();
  CHECK(now.words.size() == 7);
  CHECK(now.cpu.find(' ') != std::string::npos);
  CHECK(backend::missing_features(now, now).empty());
}

TEST_CASE("trace header: wrong version, foreign files and unknown keys are errors") {
  CHECK(!parse_header("branchstub-trace 99\narg x\n").ok());
  CHECK(parse_header("branchstub-trace 99\narg x\n").error().message.find("version 99") != std::string::npos);
  CHECK(!parse_header("hello\n").ok());
  CHECK(!parse_header("").ok());
  CHECK(!parse_header("branchstub-trace 2\narg x\nbogus 1\n").ok());
  CHECK(!parse_header("branchstub-trace 2\n").ok());  // no program
  CHECK(!parse_header("branchstub-trace 2\narg x\nauxv 0g\n").ok());
}

TEST_CASE("trace header: a version 1 trace (no instruction events) is refused by name") {
  auto old = parse_header("branchstub-trace 1\narg x\n");
  REQUIRE(!old.ok());
  CHECK(old.error().message.find("version 1, this branchstub reads version 2") != std::string::npos);
}

TEST_CASE("trace events: an instruction event keeps its kind, result and input") {
  TraceEvent e;
  e.kind = EventKind::Instruction;
  e.branches = 12;
  e.pc = 0x7ffff7fe4b70;
  e.nr = 1;  // rdrand
  e.args[0] = 0xfedcba9876543210ULL;
  e.args[1] = 1;
  e.args[4] = 0x800;
  auto bytes = encode_event(e);
  size_t at = 0;
  auto back = decode_event(bytes, at);
  REQUIRE(back.ok());
  CHECK(back->kind == EventKind::Instruction);
  CHECK(back->nr == 1);
  CHECK(back->args[0] == 0xfedcba9876543210ULL);
  CHECK(back->args[4] == 0x800);
  CHECK(at == bytes.size());
}

TEST_CASE("trace events: encode/decode round trip, truncation reported with its byte") {
  TraceEvent e;
  e.kind = EventKind::Syscall;
  e.position = 3;
  e.branches = 99;
  e.pc = 0x401000;
  e.nr = SYS_read;
  for (int i = 0; i < 6; ++i) e.args[i] = 100 + i;
  e.result = -14;
  e.mapped_file = 2;
  e.writes = {{0x7fff0000, 0, 16}, {0x7fff1000, 16, 8}};
  auto bytes = encode_event(e);
  TraceEvent r;
  r.kind = EventKind::Rdtsc;
  r.nr = 0;
  r.args[0] = 0x1234;
  auto more = encode_event(r);
  bytes.insert(bytes.end(), more.begin(), more.end());
  size_t at = 0;
  auto back = decode_event(bytes, at);
  REQUIRE(back.ok());
  CHECK(back->kind == EventKind::Syscall);
  CHECK(back->position == 3);
  CHECK(back->branches == 99);
  CHECK(back->pc == 0x401000);
  CHECK(back->nr == SYS_read);
  CHECK(back->args[5] == 105);
  CHECK(back->result == -14);
  CHECK(back->mapped_file == 2);
  REQUIRE(back->writes.size() == 2);
  CHECK(back->writes[1].addr == 0x7fff1000);
  CHECK(back->writes[1].data_offset == 16);
  auto second = decode_event(bytes, at);
  REQUIRE(second.ok());
  CHECK(second->kind == EventKind::Rdtsc);
  CHECK(second->args[0] == 0x1234);
  CHECK(at == bytes.size());

  std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 20);
  at = 0;
  auto bad = decode_event(cut, at);
  REQUIRE(!bad.ok());
  CHECK(bad.error().message.find("byte 0") != std::string::npos);
  std::vector<uint8_t> junk(40, 0x55);
  at = 0;
  CHECK(!decode_event(junk, at).ok());
}

TEST_CASE("trace directory: writer and reader agree, data, files and hashes") {
  std::string dir = temp_dir() + "/t";
  std::string input = dir + ".input";
  { std::ofstream(input) << "mapped bytes"; }
  TraceHeader h;
  h.argv = {"prog"};
  {
    auto w = TraceWriter::create(dir);
    REQUIRE(w.ok());
    auto m = (*w)->add_data(0x1000, {1, 2, 3});
    auto m2 = (*w)->add_data(0x2000, {4, 5});
    TraceEvent e;
    e.nr = SYS_read;
    e.result = 3;
    e.writes = {m, m2};
    REQUIRE((*w)->add_event(e).ok());
    auto f = (*w)->add_file(input, h);
    REQUIRE(f.ok());
    CHECK(*f == 0);
    CHECK(*(*w)->add_file(input, h) == 0);  // once per path
    e.kind = EventKind::Exit;
    e.writes.clear();
    REQUIRE((*w)->add_event(e).ok());
    REQUIRE((*w)->finish(h).ok());
    CHECK(!TraceWriter::create(dir).ok());  // a trace is never overwritten
  }
  auto r = TraceReader::open(dir);
  REQUIRE(r.ok());
  CHECK(r->header().event_count == 2);
  REQUIRE(r->events().size() == 2);
  CHECK(r->events()[0].position == 0);
  CHECK(r->events()[1].position == 1);
  CHECK(r->events()[1].kind == EventKind::Exit);
  auto b = r->bytes(r->events()[0].writes[1]);
  REQUIRE(b.ok());
  CHECK(*b == std::vector<uint8_t>{4, 5});
  REQUIRE(r->header().files.size() == 1);
  std::string text = "mapped bytes";
  CHECK(r->header().files[0].hash == fnv1a64(text.data(), text.size()));
  CHECK(*hash_file(r->file_copy_path(0)) == r->header().files[0].hash);
  CHECK(!TraceReader::open(dir + "/nothing").ok());
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

TEST_CASE("syscall table: what is emulated, run again, refused") {
  uint64_t none[6] = {};
  CHECK(syscall_policy(SYS_read, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_getrandom, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_mmap, none, 1).as == ReplayAs::Execute);
  CHECK(syscall_policy(SYS_openat, none, 1).as == ReplayAs::OpenFile);
  CHECK(syscall_policy(SYS_set_tid_address, none, 1).as == ReplayAs::ExecuteAnyResult);
  // Child processes: fork, vfork, posix_spawn's CLONE_VM|CLONE_VFORK (the child unrecorded).
  CHECK(syscall_policy(SYS_fork, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_vfork, none, 1).as == ReplayAs::Emulate);
  uint64_t glibc_fork[6] = {0x01200000 | SIGCHLD, 0, 0, 0x7000, 0};
  CHECK(syscall_policy(SYS_clone, glibc_fork, 1).as == ReplayAs::Emulate);
  uint64_t spawn[6] = {0x100 | 0x4000 | SIGCHLD, 0x9000};
  CHECK(syscall_policy(SYS_clone, spawn, 1).as == ReplayAs::Emulate);
  uint64_t thread_flags[6] = {0x3d0f00, 0x9000};  // pthread_create's
  auto clone = syscall_policy(SYS_clone, thread_flags, 1);
  CHECK(clone.as == ReplayAs::Refuse);
  CHECK(clone.why.find("clone") != std::string::npos);
  CHECK(clone.why.find("threads") != std::string::npos);
  uint64_t shared_vm[6] = {0x100 | SIGCHLD};
  CHECK(syscall_policy(SYS_clone, shared_vm, 1).why.find("CLONE_VM without CLONE_VFORK") != std::string::npos);
  uint64_t untraced[6] = {0x800000 | SIGCHLD};
  CHECK(syscall_policy(SYS_clone, untraced, 1).why.find("0x800000") != std::string::npos);
  // clone3: its flags are in memory (the recorder reads them; the replay follows the recording).
  uint64_t clone_args[11] = {0x100 | 0x4000, 0, 0, 0, SIGCHLD, 0x9000, 0x10000};
  MemoryReader args_at = [&](uint64_t addr, void* out, size_t size) {
    if (addr != 0x4000 || size > sizeof clone_args) return false;
    std::memcpy(out, clone_args, size);
    return true;
  };
  uint64_t c3[6] = {0x4000, 88};
  CHECK(syscall_policy(SYS_clone3, c3, 1, &args_at).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_clone3, c3, 1).as == ReplayAs::Emulate);
  clone_args[0] = 0x3d0f00;
  CHECK(syscall_policy(SYS_clone3, c3, 1, &args_at).why.find("threads") != std::string::npos);
  clone_args[0] = 0;
  clone_args[9] = 1;  // set_tid_size
  CHECK(syscall_policy(SYS_clone3, c3, 1, &args_at).as == ReplayAs::Refuse);
  uint64_t unreadable[6] = {0x5000, 88};
  CHECK(syscall_policy(SYS_clone3, unreadable, 1, &args_at).as == ReplayAs::Refuse);
  CHECK(syscall_policy(SYS_wait4, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_getresuid, none, 1).as == ReplayAs::Emulate);
  uint64_t unix_pair[6] = {1, 1, 0, 0x3000};
  CHECK(syscall_policy(SYS_socketpair, unix_pair, 1).as == ReplayAs::Execute);
  uint64_t inet_pair[6] = {2, 1, 0, 0x3000};
  CHECK(syscall_policy(SYS_socketpair, inet_pair, 1).as == ReplayAs::Refuse);
  uint64_t inet_socket_plain[6] = {2, 1, 0};
  CHECK(syscall_policy(SYS_execve, none, 1).as == ReplayAs::Exec);
  CHECK(syscall_policy(SYS_execveat, none, 1).as == ReplayAs::Exec);
  uint64_t setfd[6] = {3, F_SETFD, FD_CLOEXEC};  // close-on-exec decides what an exec keeps
  CHECK(syscall_policy(SYS_fcntl, setfd, 1).as == ReplayAs::Execute);
  uint64_t getfl[6] = {3, F_GETFL};
  CHECK(syscall_policy(SYS_fcntl, getfl, 1).as == ReplayAs::Emulate);
  // A placeholder is close-on-exec when the recorded descriptor was.
  uint64_t cloexec_socket[6] = {2, 1 | 0x80000, 0};
  CHECK(placeholder_cloexec(SYS_socket, cloexec_socket));
  CHECK_FALSE(placeholder_cloexec(SYS_socket, inet_socket_plain));
  uint64_t memfd_cloexec[6] = {0x1000, 1};
  CHECK(placeholder_cloexec(SYS_memfd_create, memfd_cloexec));
  uint64_t epoll_cloexec[6] = {0x80000};
  CHECK(placeholder_cloexec(SYS_epoll_create1, epoll_cloexec));
  CHECK_FALSE(placeholder_cloexec(SYS_accept, none));
  auto unknown = syscall_policy(SYS_ptrace, none, 1);
  CHECK(unknown.as == ReplayAs::Refuse);
  CHECK(unknown.why.find("ptrace") != std::string::npos);
  // ls -l and gzip -c: emulated; a local socket made again, any other refused.
  CHECK(syscall_policy(SYS_statfs, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_lgetxattr, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_getxattr, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_fadvise64, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_connect, none, 1).as == ReplayAs::Emulate);
  uint64_t unix_socket[6] = {1, 0x80801, 0};
  CHECK(syscall_policy(SYS_socket, unix_socket, 1).as == ReplayAs::Execute);
  // Descriptors the replay cannot make alike: /dev/null placeholders, their use emulated.
  uint64_t inet_socket[6] = {2, 1, 0};
  CHECK(syscall_policy(SYS_socket, inet_socket, 1).as == ReplayAs::Placeholder);
  CHECK(syscall_policy(SYS_accept4, none, 1).as == ReplayAs::Placeholder);
  CHECK(syscall_policy(SYS_epoll_create1, none, 1).as == ReplayAs::Placeholder);
  CHECK(syscall_policy(SYS_eventfd2, none, 1).as == ReplayAs::Placeholder);
  CHECK(syscall_policy(SYS_timerfd_create, none, 1).as == ReplayAs::Placeholder);
  CHECK(syscall_policy(SYS_epoll_wait, none, 1).as == ReplayAs::Emulate);
  CHECK(syscall_policy(SYS_recvmmsg, none, 1).as == ReplayAs::Refuse);
  uint64_t set_name[6] = {15, 0x1000};
  CHECK(syscall_policy(SYS_prctl, set_name, 1).as == ReplayAs::Execute);
  uint64_t set_tsc[6] = {26, 1};
  CHECK(syscall_policy(SYS_prctl, set_tsc, 1).why.find("prctl option 26") != std::string::npos);
  uint64_t get_name[6] = {16, 0x2000};
  auto gn = written_ranges(SYS_prctl, get_name, 0, [](uint64_t, void*, size_t) { return false; });
  REQUIRE(gn.size() == 1);
  CHECK(gn[0].length == 16);
  uint64_t groups[6] = {32, 0x3000};
  auto gr = written_ranges(SYS_getgroups, groups, 3, [](uint64_t, void*, size_t) { return false; });
  REQUIRE(gr.size() == 1);
  CHECK(gr[0].length == 12);
  uint64_t count_only[6] = {0, 0};
  CHECK(written_ranges(SYS_getgroups, count_only, 3, [](uint64_t, void*, size_t) { return false; }).empty());
  CHECK(syscall_policy(SYS_close_range, none, 1).as == ReplayAs::Execute);
  uint64_t raise_stack[6] = {0, 3, 0x3000, 0};  // prlimit64(0, RLIMIT_STACK, new, NULL): gcc
  CHECK(syscall_policy(SYS_prlimit64, raise_stack, 1).as == ReplayAs::Execute);
  uint64_t other_limit[6] = {4242, 3, 0x3000, 0};
  CHECK(syscall_policy(SYS_prlimit64, other_limit, 1).as == ReplayAs::Emulate);
  uint64_t setlk[6] = {3, F_SETLK, 0x3000};  // sqlite's locks
  CHECK(syscall_policy(SYS_fcntl, setlk, 1).as == ReplayAs::Emulate);
  CHECK(written_ranges(SYS_fcntl, setlk, 0, [](uint64_t, void*, size_t) { return false; }).empty());
  uint64_t getlk[6] = {3, F_GETLK, 0x3000};
  auto lk = written_ranges(SYS_fcntl, getlk, 0, [](uint64_t, void*, size_t) { return false; });
  REQUIRE(lk.size() == 1);
  CHECK(lk[0].length == 32);
  uint64_t notify[6] = {3, 1026 /*F_NOTIFY*/, 0};
  CHECK(syscall_policy(SYS_fcntl, notify, 1).as == ReplayAs::Refuse);
  uint64_t timer[6] = {1, 0x3000, 0x3100};  // timer_create(CLOCK_MONOTONIC, sev, &id): timeout(1)
  CHECK(syscall_policy(SYS_timer_create, timer, 1).as == ReplayAs::Emulate);
  auto tid_slot = written_ranges(SYS_timer_create, timer, 0, [](uint64_t, void*, size_t) { return false; });
  REQUIRE(tid_slot.size() == 1);
  CHECK((tid_slot[0].addr == 0x3100 && tid_slot[0].length == 4));
  uint64_t tcsetpgrp[6] = {0, 0x5410, 0x3000};  // a program run from a terminal
  CHECK(syscall_policy(SYS_ioctl, tcsetpgrp, 1).as == ReplayAs::Emulate);
  CHECK(written_ranges(SYS_ioctl, tcsetpgrp, 0, [](uint64_t, void*, size_t) { return false; }).empty());
  uint64_t fioclex[6] = {3, 0x5451, 0};
  CHECK(syscall_policy(SYS_ioctl, fioclex, 1).as == ReplayAs::Execute);
  uint64_t tiocgsid[6] = {0, 0x5429, 0x3000};
  REQUIRE(written_ranges(SYS_ioctl, tiocgsid, 0, [](uint64_t, void*, size_t) { return false; }).size() == 1);
  uint64_t ficlone[6] = {4, 0x40049409, 3};
  CHECK(syscall_policy(SYS_ioctl, ficlone, 1).as == ReplayAs::Emulate);
  CHECK(written_ranges(SYS_ioctl, ficlone, 0, [](uint64_t, void*, size_t) { return false; }).empty());
  CHECK(syscall_name(SYS_recvmmsg) == "recvmmsg");
  CHECK(syscall_name(SYS_lgetxattr) == "lgetxattr");
  CHECK(syscall_policy(999, none, 1).why.find("syscall 999") != std::string::npos);
  uint64_t self_kill[6] = {77, 10};
  CHECK(syscall_policy(SYS_kill, self_kill, 77).as == ReplayAs::SignalSelf);
  CHECK(syscall_policy(SYS_kill, self_kill, 78).as == ReplayAs::Emulate);  // a child: not sent again
  uint64_t group_kill[6] = {0, 15};
  CHECK(syscall_policy(SYS_kill, group_kill, 78).as == ReplayAs::Refuse);
  uint64_t everyone[6] = {static_cast<uint64_t>(-1), 15};
  CHECK(syscall_policy(SYS_kill, everyone, 78).as == ReplayAs::Refuse);
  uint64_t own_thread[6] = {78, 79, 15};
  CHECK(syscall_policy(SYS_tgkill, own_thread, 78).as == ReplayAs::Refuse);
  uint64_t other_process[6] = {90, 90, 15};
  CHECK(syscall_policy(SYS_tgkill, other_process, 78).as == ReplayAs::Emulate);
  uint64_t tcgets[6] = {1, 0x5401, 0x1000};
  CHECK(syscall_policy(SYS_ioctl, tcgets, 1).as == ReplayAs::Emulate);
  uint64_t tcsetsw[6] = {0, 0x5403, 0x1000};
  CHECK(syscall_policy(SYS_ioctl, tcsetsw, 1).as == ReplayAs::Emulate);
  uint64_t fionread[6] = {0, 0x541b, 0x1000};
  CHECK(syscall_policy(SYS_ioctl, fionread, 1).as == ReplayAs::Emulate);
  uint64_t other_ioctl[6] = {1, 0x1234, 0x1000};
  CHECK(syscall_policy(SYS_ioctl, other_ioctl, 1).as == ReplayAs::Refuse);
  uint64_t shared_write[6] = {0, 4096, 3, 1, 3, 0};
  CHECK(syscall_policy(SYS_mmap, shared_write, 1).as == ReplayAs::Refuse);
  CHECK(syscall_name(SYS_getpid) == "getpid");
}

TEST_CASE("syscall table: the memory each syscall writes") {
  auto no_read = [](uint64_t, void*, size_t) { return false; };
  uint64_t rd[6] = {3, 0x5000, 4096};
  auto w = written_ranges(SYS_read, rd, 10, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].addr == 0x5000);
  CHECK(w[0].length == 10);
  CHECK(written_ranges(SYS_read, rd, -11, no_read).empty());  // failed: nothing written
  uint64_t ts[6] = {1, 0x6000};
  w = written_ranges(SYS_clock_gettime, ts, 0, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 16);
  uint64_t tm[6] = {0};
  CHECK(written_ranges(SYS_time, tm, 1700000000, no_read).empty());  // time(NULL)
  // readv: the result's bytes fill the iovecs in order.
  uint64_t iov[4] = {0x7000, 4, 0x8000, 100};
  auto reader = [&](uint64_t addr, void* out, size_t size) {
    if (addr < 0x9000 || addr + size > 0x9000 + sizeof iov) return false;
    std::memcpy(out, reinterpret_cast<char*>(iov) + (addr - 0x9000), size);
    return true;
  };
  uint64_t rv[6] = {3, 0x9000, 2};
  w = written_ranges(SYS_readv, rv, 10, reader);
  REQUIRE(w.size() == 2);
  CHECK(w[0].addr == 0x7000);
  CHECK(w[0].length == 4);
  CHECK(w[1].addr == 0x8000);
  CHECK(w[1].length == 6);
}

TEST_CASE("syscall table: memory of the rows ls -l and gzip -c need") {
  auto no_read = [](uint64_t, void*, size_t) { return false; };
  uint64_t sf[6] = {0x1000, 0x2000};
  auto w = written_ranges(SYS_statfs, sf, 0, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].addr == 0x2000);
  CHECK(w[0].length == 120);
  CHECK(written_ranges(SYS_fstatfs, sf, 0, no_read).size() == 1);
  CHECK(written_ranges(SYS_statfs, sf, -2, no_read).empty());
  // lgetxattr(path, name, value, size): the value's bytes, only with a buffer.
  uint64_t xa[6] = {0x1000, 0x1100, 0x3000, 255};
  w = written_ranges(SYS_lgetxattr, xa, 28, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].addr == 0x3000);
  CHECK(w[0].length == 28);
  uint64_t xa_len[6] = {0x1000, 0x1100, 0, 0};
  CHECK(written_ranges(SYS_getxattr, xa_len, 28, no_read).empty());  // the length only
  CHECK(written_ranges(SYS_lgetxattr, xa, -61, no_read).empty());     // ENODATA
  uint64_t lx[6] = {0x1000, 0x4000, 64};
  w = written_ranges(SYS_llistxattr, lx, 17, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 17);
  // rt_sigaction(sig, act, oldact, 8): the old action (32 bytes), put back after it runs again.
  uint64_t sa[6] = {2, 0x1000, 0x5000, 8};
  w = written_ranges(SYS_rt_sigaction, sa, 0, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].addr == 0x5000);
  CHECK(w[0].length == 32);
  uint64_t sa_no_old[6] = {2, 0x1000, 0, 8};
  CHECK(written_ranges(SYS_rt_sigaction, sa_no_old, 0, no_read).empty());
  uint64_t pm[6] = {0, 0x1000, 0x6000, 8};
  w = written_ranges(SYS_rt_sigprocmask, pm, 0, no_read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 8);
  uint64_t adv[6] = {3, 0, 0, 2};
  CHECK(written_ranges(SYS_fadvise64, adv, 0, no_read).empty());
}


namespace {
// A little program memory for the readers: [base, base + bytes.size()).
struct FakeMemory {
  uint64_t base = 0x10000;
  std::vector<uint8_t> bytes = std::vector<uint8_t>(0x4000);
  template <typename T>
  void put(uint64_t addr, T value) {
    REQUIRE((addr >= base && addr + sizeof value <= base + bytes.size()));
    std::memcpy(bytes.data() + (addr - base), &value, sizeof value);
  }
  MemoryReader reader() {
    return [this](uint64_t addr, void* out, size_t size) {
      if (addr < base || addr + size > base + bytes.size()) return false;
      std::memcpy(out, bytes.data() + (addr - base), size);
      return true;
    };
  }
};
}  // namespace

TEST_CASE("syscall table: what child processes, sockets and waits write") {
  FakeMemory m;
  auto read = m.reader();
  // recvmsg(fd, msg, 0) = 20 into two iovecs of 8 and 64: 8 + 12 bytes, the name, the control
  // data, and the three fields the kernel updates.
  uint64_t msg = 0x10000, iov = 0x10100;
  m.put(msg + 0, uint64_t{0x10200});  // name
  m.put(msg + 8, uint32_t{16});       // namelen as left
  m.put(msg + 16, iov);
  m.put(msg + 24, uint64_t{2});
  m.put(msg + 32, uint64_t{0x10300});  // control
  m.put(msg + 40, uint64_t{24});       // controllen as left
  m.put(iov + 0, uint64_t{0x10400});
  m.put(iov + 8, uint64_t{8});
  m.put(iov + 16, uint64_t{0x10500});
  m.put(iov + 24, uint64_t{64});
  uint64_t rm[6] = {3, msg, 0};
  auto w = written_ranges(SYS_recvmsg, rm, 20, read);
  REQUIRE(w.size() == 7);
  CHECK((w[0].addr == 0x10400 && w[0].length == 8));
  CHECK((w[1].addr == 0x10500 && w[1].length == 12));
  CHECK((w[2].addr == 0x10200 && w[2].length == 16));
  CHECK((w[3].addr == 0x10300 && w[3].length == 24));
  CHECK((w[4].addr == msg + 8 && w[4].length == 4));
  CHECK((w[5].addr == msg + 40 && w[5].length == 8));
  CHECK((w[6].addr == msg + 48 && w[6].length == 4));
  CHECK(written_ranges(SYS_recvmsg, rm, -11, read).empty());
  // Control data: credentials can be replayed, descriptors (SCM_RIGHTS) cannot.
  m.put(0x10300, uint64_t{24});
  m.put(0x10308, int32_t{1});  // SOL_SOCKET
  m.put(0x1030c, int32_t{2});  // SCM_CREDENTIALS
  CHECK(unreplayable_result(SYS_recvmsg, rm, 20, read).empty());
  m.put(0x1030c, int32_t{1});  // SCM_RIGHTS
  CHECK(unreplayable_result(SYS_recvmsg, rm, 20, read).find("SCM_RIGHTS") != std::string::npos);
  CHECK(unreplayable_result(SYS_recvmsg, rm, -11, read).empty());
  CHECK(unreplayable_result(SYS_read, rm, 20, read).empty());
  // recvfrom(fd, buf, len, flags, addr, addrlen*): the bytes, the address as long as left.
  m.put(0x10600, uint32_t{110});
  uint64_t rf[6] = {3, 0x10700, 100, 0, 0x10800, 0x10600};
  w = written_ranges(SYS_recvfrom, rf, 5, read);
  REQUIRE(w.size() == 3);
  CHECK((w[0].addr == 0x10700 && w[0].length == 5));
  CHECK((w[1].addr == 0x10800 && w[1].length == 110));
  CHECK((w[2].addr == 0x10600 && w[2].length == 4));
  // wait4(pid, status, options, rusage): both only when a child was reported.
  uint64_t w4[6] = {123, 0x10900, 0, 0x10a00};
  w = written_ranges(SYS_wait4, w4, 123, read);
  REQUIRE(w.size() == 2);
  CHECK((w[0].addr == 0x10900 && w[0].length == 4));
  CHECK((w[1].addr == 0x10a00 && w[1].length == 144));
  CHECK(written_ranges(SYS_wait4, w4, 0, read).empty());  // WNOHANG, nothing yet
  uint64_t wid[6] = {1, 123, 0x10b00, 4, 0};
  w = written_ranges(SYS_waitid, wid, 0, read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 128);
  // getresuid: three ids; socketpair: two descriptors.
  uint64_t res[6] = {0x10c00, 0x10c04, 0x10c08};
  CHECK(written_ranges(SYS_getresuid, res, 0, read).size() == 3);
  uint64_t sp[6] = {1, 1, 0, 0x10d00};
  w = written_ranges(SYS_socketpair, sp, 0, read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 8);
  // clone: the parent's tid slot; a vfork child's own slot is the parent's memory too.
  uint64_t cl[6] = {0x100 | 0x4000 | 0x100000 | 0x01000000 | SIGCHLD, 0x9000, 0x10e00, 0x10e08, 0};
  w = written_ranges(SYS_clone, cl, 4242, read);
  REQUIRE(w.size() == 2);
  CHECK(w[0].addr == 0x10e00);
  CHECK(w[1].addr == 0x10e08);
  uint64_t plain_fork[6] = {0x01200000 | SIGCHLD, 0, 0, 0x10e08, 0};
  CHECK(written_ranges(SYS_clone, plain_fork, 4242, read).empty());  // the child's copy only
  m.put(0x10f00, uint64_t{0x100000});  // clone3: flags, pidfd, child_tid, parent_tid
  m.put(0x10f18, uint64_t{0x10e10});
  uint64_t c3[6] = {0x10f00, 88};
  w = written_ranges(SYS_clone3, c3, 4242, read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].addr == 0x10e10);
  // select: the three sets (nfds bits in longs) and the timeout; ioctl: per request.
  uint64_t sel[6] = {65, 0x11000, 0, 0x11100, 0x11200};
  w = written_ranges(SYS_select, sel, 1, read);
  REQUIRE(w.size() == 3);
  CHECK(w[0].length == 16);
  CHECK(w[2].length == 16);
  uint64_t tcsetsw[6] = {0, 0x5403, 0x11300};
  CHECK(written_ranges(SYS_ioctl, tcsetsw, 0, read).empty());
  uint64_t fionread[6] = {0, 0x541b, 0x11300};
  w = written_ranges(SYS_ioctl, fionread, 0, read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 4);
  // epoll_wait(epfd, events, max, timeout) = 3: three 12-byte events; accept(fd, addr, len*).
  uint64_t ew[6] = {5, 0x11400, 16, 100};
  w = written_ranges(SYS_epoll_wait, ew, 3, read);
  REQUIRE(w.size() == 1);
  CHECK(w[0].length == 36);
  CHECK(written_ranges(SYS_epoll_wait, ew, 0, read).empty());
  m.put(0x11500, uint32_t{16});
  uint64_t ac[6] = {3, 0x11600, 0x11500};
  w = written_ranges(SYS_accept, ac, 4, read);
  REQUIRE(w.size() == 2);
  CHECK((w[0].addr == 0x11600 && w[0].length == 16));
  uint64_t ac_no_addr[6] = {3, 0, 0};
  CHECK(written_ranges(SYS_accept4, ac_no_addr, 4, read).empty());
  // sendmmsg(fd, vec, n, flags) = 2: the msg_len of the two messages sent.
  uint64_t sm[6] = {3, 0x11700, 4, 0};
  w = written_ranges(SYS_sendmmsg, sm, 2, read);
  REQUIRE(w.size() == 2);
  CHECK((w[0].addr == 0x11700 + 56 && w[1].addr == 0x11700 + 64 + 56));
}

#include "backend/replay/branch_counter.h"

TEST_CASE("replay: an asynchronous signal's count, flag and siginfo pointer survive encoding", "[replay]") {
  backend::replay::TraceEvent e;
  e.kind = backend::replay::EventKind::Signal;
  e.branches = 123456789;
  e.nr = 14;
  e.args[0] = 0x80;
  e.args[1] = backend::replay::kSignalAtSyscallExit;
  e.writes.push_back({0, 64, 128});
  auto bytes = backend::replay::encode_event(e);
  size_t at = 0;
  auto back = backend::replay::decode_event(bytes, at);
  REQUIRE(back.ok());
  CHECK(back->branches == 123456789);
  CHECK(back->args[1] == backend::replay::kSignalAtSyscallExit);
  REQUIRE(back->writes.size() == 1);
  CHECK(back->writes[0].length == 128);
}

TEST_CASE("replay: the branch counter counts per thread, from its start", "[replay]") {
  backend::replay::BranchCounter c;
  c.thread_started(7, 0x1000);
  CHECK(c.count(7) == 0);
  c.branch(7, 1, 2);
  c.branch(7, 3, 4);
  c.branch(8, 3, 4);
  c.thread_started(7, 0x2000);  // a new tracer (the server's settings): the count goes on
  CHECK(c.count(7) == 2);
  CHECK(c.count(8) == 1);
  CHECK(c.count(9) == 0);
}

TEST_CASE("replay: the register digest sees the program's registers, not the debugger's flags", "[replay]") {
  user_regs_struct a{};
  a.rax = 1;
  a.rcx = 0x40;  // a `rep movs` half done: same pc and count, other rcx
  a.rip = 0x401000;
  a.eflags = 0x246;
  user_regs_struct b = a;
  b.eflags |= 0x100 | 0x10000;  // TF, RF: ptrace's, not the program's
  b.orig_rax = 12345;           // not a register the program computes with
  CHECK(backend::replay::register_digest(a) == backend::replay::register_digest(b));
  b.rcx = 0x3f;
  CHECK(backend::replay::register_digest(a) != backend::replay::register_digest(b));
  b = a;
  b.eflags ^= 0x1;  // CF
  CHECK(backend::replay::register_digest(a) != backend::replay::register_digest(b));
}

TEST_CASE("replay: a signal in the program's code keeps its register digest through encoding", "[replay]") {
  backend::replay::TraceEvent e;
  e.kind = backend::replay::EventKind::Signal;
  e.branches = 42;
  e.pc = 0x401234;
  e.nr = 14;
  e.args[1] = backend::replay::kSignalInCode;
  e.args[2] = 0xfeedfacecafebeefULL;
  auto bytes = backend::replay::encode_event(e);
  size_t at = 0;
  auto back = backend::replay::decode_event(bytes, at);
  REQUIRE(back.ok());
  CHECK(back->args[1] == backend::replay::kSignalInCode);
  CHECK(back->args[2] == 0xfeedfacecafebeefULL);
  CHECK(back->pc == 0x401234);
}
