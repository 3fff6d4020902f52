// ThreadDb (libthread_db through our proc_service callbacks) against real programs: the
// address it gives for a thread-local variable must hold that thread's own value.
#include <catch2/catch.hpp>

#include <gnu/libc-version.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/tls/thread_db.h"
#include "test_process_support.h"

using namespace backend;
using namespace bs_test;

namespace {

std::unique_ptr<Process> launch_ok(const LaunchOptions& o) {
  auto p = Process::launch(o);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p.ok());
  return std::move(p.value());
}

// st_value of a TLS symbol (its offset in the module's TLS block), from readelf; -1 if none.
int64_t tls_offset(const std::string& file, const std::string& name, bool dynamic = false) {
  std::string cmd = std::string("readelf -W ") + (dynamic ? "--dyn-syms " : "-s ") + file;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char line[1024];
  int64_t value = -1;
  while (std::fgets(line, sizeof line, p)) {
    unsigned long long v;
    char type[32], sym[512];
    // "   12: 0000000000000004     4 TLS     GLOBAL DEFAULT   21 tls_var"
    if (std::sscanf(line, " %*[0-9]: %llx %*s %31s %*s %*s %*s %511s", &v, type, sym) == 3 &&
        std::strcmp(type, "TLS") == 0) {
      std::string s = sym;
      if (s == name || s.starts_with(name + "@")) value = static_cast<int64_t>(v);
    }
  }
  ::pclose(p);
  return value;
}

// A shared library built from test_inferiors/<name>.c, reused like inferior()'s programs.
std::string shared_library(const std::string& name) {
  std::string src = std::string(BS_SOURCE_DIR) + "/tests/unit/backend/test_inferiors/" + name + ".c";
  std::string out = build_dir() + "/lib" + name + ".so";
  std::string tmp = out + ".tmp" + std::to_string(getpid());
  std::string cmd = "cc -g -O0 -shared -fPIC -o " + tmp + " " + src;
  if (std::system(cmd.c_str()) != 0 || std::rename(tmp.c_str(), out.c_str()) != 0) return {};
  return out;
}

int read_int(Process& p, uint64_t addr) {
  int v = 0;
  auto n = p.read_memory(addr, {reinterpret_cast<uint8_t*>(&v), sizeof v});
  REQUIRE(n.ok());
  REQUIRE(*n == sizeof v);
  return v;
}

// Runs the program to stop_here(), where every thread has set its values.
void run_to_stop_here(Process& p, const std::string& exe) {
  uint64_t stop = symbol(exe, "stop_here");
  REQUIRE(stop != 0);
  REQUIRE(p.insert_breakpoint(BreakpointKind::Software, stop, 1).ok());
  REQUIRE(p.resume(continue_all()).ok());
  auto ev = wait_stop(p);
  REQUIRE(ev);
  REQUIRE(ev->kind == StopKind::Breakpoint);
  REQUIRE(ev->tid == p.pid());
  REQUIRE(p.threads().size() == 3);
}

const LibraryInfo* library_named(const std::vector<LibraryInfo>& libs, const std::string& part) {
  for (const auto& l : libs)
    if (l.name.find(part) != std::string::npos) return &l;
  return nullptr;
}

// Each thread's value of the int at (offset, lm): main's first, then the workers' sorted.
std::vector<int> values_of(ThreadDb& db, Process& p, uint64_t offset, uint64_t lm) {
  std::vector<int> workers;
  std::vector<uint64_t> addresses;
  int main_value = -1;
  for (pid_t tid : p.threads()) {
    auto addr = db.tls_address(p, tid, offset, lm);
    INFO("thread " << tid << ": " << (addr ? std::string() : addr.error().message));
    REQUIRE(addr.ok());
    addresses.push_back(*addr);
    int v = read_int(p, *addr);
    if (tid == p.pid()) main_value = v;
    else workers.push_back(v);
  }
  std::sort(addresses.begin(), addresses.end());
  CHECK(std::adjacent_find(addresses.begin(), addresses.end()) == addresses.end());  // one block each
  std::sort(workers.begin(), workers.end());
  std::vector<int> out{main_value};
  out.insert(out.end(), workers.begin(), workers.end());
  return out;
}

}  // namespace

TEST_CASE("thread_db: __thread variables and errno of every thread", "[thread_db]") {
  auto exe = inferior("tls");
  REQUIRE(!exe.empty());
  int64_t var = tls_offset(exe, "tls_var");
  REQUIRE(var > 0);
  auto p = launch_ok(options_for(exe));
  ThreadDb db;

  // At the loader's entry libc is not mapped yet: no library accepts the process.
  auto early = db.tls_address(*p, p->pid(), static_cast<uint64_t>(var), 0);
  REQUIRE(!early.ok());
  CHECK(early.error().code == ENOENT);

  run_to_stop_here(*p, exe);
  uint64_t main_lm = 0;
  auto libs = p->libraries(&main_lm);
  REQUIRE(libs.ok());
  REQUIRE(main_lm != 0);
  CHECK(values_of(db, *p, static_cast<uint64_t>(var), main_lm) == std::vector<int>{100, 101, 102});

  // errno is libc's own __thread variable.
  const LibraryInfo* libc = library_named(*libs, "libc.so");
  REQUIRE(libc);
  int64_t err = tls_offset(libc->name, "errno", true);
  REQUIRE(err >= 0);
  CHECK(values_of(db, *p, static_cast<uint64_t>(err), libc->lm) == std::vector<int>{1000, 1001, 1002});

  // Unknown threads are refused before libthread_db is asked.
  auto bad = db.tls_address(*p, 999999, static_cast<uint64_t>(var), main_lm);
  REQUIRE(!bad.ok());
  CHECK(bad.error().code == ESRCH);
  REQUIRE(p->kill().ok());
}

TEST_CASE("thread_db: a static program's TLS is module 1 (lm 0)", "[thread_db]") {
  auto exe = inferior("tls", "-static -DNO_DLOPEN");
  REQUIRE(!exe.empty());
  int64_t var = tls_offset(exe, "tls_var");
  REQUIRE(var > 0);
  auto p = launch_ok(options_for(exe));
  ThreadDb db;

  // At the first instruction libthread_db finds glibc in the executable, but the main thread
  // has no descriptor yet.
  auto early = db.tls_address(*p, p->pid(), static_cast<uint64_t>(var), 0);
  REQUIRE(!early.ok());
  CHECK(early.error().code == ESRCH);

  run_to_stop_here(*p, exe);
  CHECK(values_of(db, *p, static_cast<uint64_t>(var), 0) == std::vector<int>{100, 101, 102});
  REQUIRE(p->kill().ok());
}

TEST_CASE("thread_db: dlopen'ed TLS that a thread has no storage for yet", "[thread_db]") {
  auto exe = inferior("tls");
  auto lib = shared_library("tls_dl");
  REQUIRE(!exe.empty());
  REQUIRE(!lib.empty());
  int64_t var = tls_offset(lib, "dl_tls");
  REQUIRE(var >= 0);
  auto o = options_for(exe);
  o.argv.push_back(lib);
  auto p = launch_ok(o);
  run_to_stop_here(*p, exe);
  auto libs = p->libraries(nullptr);
  REQUIRE(libs.ok());
  const LibraryInfo* dl = library_named(*libs, "libtls_dl.so");
  REQUIRE(dl);

  ThreadDb db;
  for (pid_t tid : p->threads()) {
    auto addr = db.tls_address(*p, tid, static_cast<uint64_t>(var), dl->lm);
    if (tid == p->pid()) {
      REQUIRE(addr.ok());
      CHECK(read_int(*p, *addr) == 900);
    } else {
      // The workers never touched dl_tls: libthread_db says TD_TLSDEFER.
      REQUIRE(!addr.ok());
      CHECK(addr.error().code == EAGAIN);
      CHECK(addr.error().message.find("TD_TLSDEFER") != std::string::npos);
    }
  }
  REQUIRE(p->kill().ok());
}

TEST_CASE("thread_db: the search path", "[thread_db]") {
  auto exe = inferior("tls");
  int64_t var = tls_offset(exe, "tls_var");
  REQUIRE(var > 0);
  auto p = launch_ok(options_for(exe));
  run_to_stop_here(*p, exe);
  uint64_t main_lm = 0;
  REQUIRE(p->libraries(&main_lm).ok());
  auto libs = p->libraries(nullptr);
  const LibraryInfo* libc = library_named(*libs, "libc.so");
  REQUIRE(libc);
  // The maps file names the file itself (/usr/lib/... where /lib is a link to usr/lib).
  char* real = ::realpath(libc->name.c_str(), nullptr);
  REQUIRE(real);
  std::string libc_path = real;
  std::free(real);
  std::string libc_dir = libc_path.substr(0, libc_path.rfind('/'));

  ThreadDb db;
  CHECK(db.search_path() == "$sdir:$pdir");
  CHECK(db.candidates(*p) == std::vector<std::string>{"libthread_db.so.1", libc_dir + "/libthread_db.so.1"});

  // An unresolvable path: no library, as no-thread-db.exp wants it.
  db.set_search_path("/nonexistent:/also/not");
  CHECK(db.candidates(*p) ==
        std::vector<std::string>{"/nonexistent/libthread_db.so.1", "/also/not/libthread_db.so.1"});
  auto none = db.tls_address(*p, p->pid(), static_cast<uint64_t>(var), main_lm);
  REQUIRE(!none.ok());
  CHECK(none.error().code == ENOENT);

  // $pdir alone: the libthread_db next to the program's libc.
  db.set_search_path("/nonexistent:$pdir");
  auto addr = db.tls_address(*p, p->pid(), static_cast<uint64_t>(var), main_lm);
  REQUIRE(addr.ok());
  CHECK(read_int(*p, *addr) == 100);

  // Once accepted, a process keeps its library (gdbserver's thread_db stays loaded)...
  db.set_search_path("/nonexistent");
  auto kept = db.tls_address(*p, p->pid(), static_cast<uint64_t>(var), main_lm);
  REQUIRE(kept.ok());
  CHECK(*kept == *addr);
  // ...which a fresh one would not find.
  ThreadDb other;
  other.set_search_path("/nonexistent");
  CHECK(!other.tls_address(*p, p->pid(), static_cast<uint64_t>(var), main_lm).ok());

  // An empty path is the default again.
  db.set_search_path("");
  CHECK(db.search_path() == "$sdir:$pdir");
  REQUIRE(p->kill().ok());
}

TEST_CASE("thread_db: symbols of the process's own files", "[thread_db]") {
  auto exe = inferior("tls");
  auto p = launch_ok(options_for(exe));
  run_to_stop_here(*p, exe);
  auto map = p->memory_map();
  REQUIRE(map.ok());
  auto modules = Symbolizer::loaded_modules(*map);
  ThreadDb db;
  // glibc's version string, which libthread_db checks first, read from the inferior's libc.
  auto version = db.lookup_symbol(modules, "__nptl_version");
  REQUIRE(version);
  std::string expected = gnu_get_libc_version();
  std::string text(expected.size(), '\0');
  auto n = p->read_memory(*version, {reinterpret_cast<uint8_t*>(text.data()), text.size()});
  REQUIRE(n.ok());
  CHECK(text == expected);
  // A non-PIE program's own function: its link-time address.
  CHECK(db.lookup_symbol(modules, "stop_here") == symbol(exe, "stop_here"));
  CHECK(!db.lookup_symbol(modules, "no_such_symbol_anywhere"));
  REQUIRE(p->kill().ok());
}
