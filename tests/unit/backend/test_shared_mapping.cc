// Memory shared between a stopped program and the server (backend/btrace/patch/shared_mapping.h), on a
// forked child of the test: it has this process's strings at the same addresses.
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "backend/btrace/patch/shared_mapping.h"
#include "backend/btrace/patch/area_writes.h"
#include "backend/ptrace/proc_memory.h"

using backend::ProcMemory;
using namespace backend::patch;

namespace {

const char kName[] = "bs-unit-shared";

// A child of this process stopped under ptrace (killed with the object).
struct StoppedChild {
  pid_t pid = -1;
  StoppedChild() {
    pid = ::fork();
    if (pid == 0) {
      ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
      ::raise(SIGSTOP);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  ~StoppedChild() {
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
};

size_t open_fds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

bool maps_mention(pid_t pid, const std::string& what) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("shared areas: one memory for the program and the server, nothing left on failure", "[patch]") {
  StoppedChild child;
  REQUIRE(child.pid > 0);
  ProcMemory mem(child.pid);
  const size_t fds = open_fds(child.pid);
  const auto name = reinterpret_cast<uint64_t>(kName);

  auto m = map_shared(child.pid, child.pid, mem, 0, false, 8192, PROT_READ | PROT_WRITE, 0, name);
  REQUIRE(m.ok());
  REQUIRE(m->view);
  CHECK(m->view.size() == 8192);
  CHECK(open_fds(child.pid) == fds);  // the program's descriptor is closed again
  CHECK(maps_mention(child.pid, std::string("memfd:") + kName));
  // The server's stores are the program's memory, and the other way round.
  m->view.data()[100] = 42;
  uint8_t got = 0;
  REQUIRE(mem.read(m->addr + 100, std::span<uint8_t>(&got, 1)).ok());
  CHECK(got == 42);
  const uint8_t seven = 7;
  REQUIRE(mem.write(m->addr + 8000, std::span<const uint8_t>(&seven, 1)).ok());
  CHECK(m->view.data()[8000] == 7);

  // Area writes into a shared area: stored at once, nothing pending, no copy needed.
  AreaWrites w;
  uint8_t* view = m->view.data();
  w.add_area(m->addr, m->addr + 8192, false, std::move(m->view));
  CHECK(w.view_of(m->addr + 16, 8) == view + 16);
  CHECK(w.view_of(m->addr + 8190, 8) == nullptr);  // past the area's end
  const uint8_t word[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  CHECK(w.write(mem, m->addr + 16, word, false));
  CHECK(!w.pending());
  uint8_t back[8] = {};
  REQUIRE(mem.read(m->addr + 16, back).ok());
  CHECK(std::memcmp(back, word, 8) == 0);
  CHECK(w.write(mem, m->addr + 31, std::span<const uint8_t>(word, 5), false));  // unaligned: a copy
  REQUIRE(mem.read(m->addr + 31, std::span<uint8_t>(back, 5)).ok());
  CHECK(std::memcmp(back, word, 5) == 0);

  // Exactly where another mapping is: refused, with nothing mapped and no descriptor left.
  auto over = map_shared(child.pid, child.pid, mem, m->addr, true, 4096, PROT_READ, 0, name);
  CHECK(!over.ok());
  CHECK(open_fds(child.pid) == fds);
  // A name the program cannot read: memfd_create fails in it, nothing happens.
  auto bad = map_shared(child.pid, child.pid, mem, 0, false, 4096, PROT_READ, 0, 8);
  CHECK(!bad.ok());
  CHECK(open_fds(child.pid) == fds);
  // Once the server's view is gone, the program still has its memory.
  w.remove_area(m->addr);
  REQUIRE(mem.read(m->addr + 100, std::span<uint8_t>(&got, 1)).ok());
  CHECK(got == 42);
}
