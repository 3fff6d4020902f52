// Symbolizer tests: programs compiled at test time (non-PIE and PIE), truth from `nm`, libc's
// .dynsym with a fake bias, and memory maps taken from real processes.
#include "backend/host/symbolizer.h"

#include <dlfcn.h>
#include <elf.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using backend::MemoryRegion;
using backend::Symbolizer;

namespace {

const char* kLibc = "/lib/x86_64-linux-gnu/libc.so.6";

const char* kProgram = R"(
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int alpha(int x) { return x * 3 + 1; }
int beta(int x) { int s = 0; for (int i = 0; i < x; ++i) s += alpha(i); return s; }
static int gamma_static(int x) { return beta(x) - 1; }
void zero_sized(void);
__asm__(".text\n.globl zero_sized\n.type zero_sized,@function\nzero_sized:\n"
        "nop\nnop\nnop\nnop\nret\n");
int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "unlink") == 0) unlink(argv[0]);
  printf("sym alpha %p\n", (void*)alpha);
  printf("sym beta %p\n", (void*)beta);
  printf("sym gamma_static %p\n", (void*)gamma_static);
  printf("sym zero_sized %p\n", (void*)zero_sized);
  printf("sym getpid %p\n", dlsym(RTLD_DEFAULT, "getpid"));
  FILE* f = fopen("/proc/self/maps", "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) printf("map %s", line);
  if (f) fclose(f);
  return gamma_static(argc) == 12345;
}
)";

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

// A temporary directory with the test program built both ways; removed at exit.
struct Programs {
  std::string dir, nopie, pie;
  bool ok = false;
  Programs() {
    char tmpl[] = "/tmp/bs_symbolizer_XXXXXX";
    if (!mkdtemp(tmpl)) return;
    dir = tmpl;
    std::ofstream(dir + "/prog.c") << kProgram;
    nopie = dir + "/prog_nopie";
    pie = dir + "/prog_pie";
    int a = system(("cc -g -O0 -no-pie -o " + nopie + " " + dir + "/prog.c 2>&1").c_str());
    int b = system(("cc -g -O0 -pie -fPIE -o " + pie + " " + dir + "/prog.c 2>&1").c_str());
    ok = a == 0 && b == 0;
  }
  ~Programs() {
    if (!dir.empty()) (void)system(("rm -rf " + dir).c_str());
  }
};

const Programs& programs() {
  static const Programs p;  // built once per test run (const after construction)
  return p;
}

// nm truth: address -> names of function symbols (T/t/i, sized W) defined there.
std::map<uint64_t, std::set<std::string>> nm_functions(const std::string& args) {
  std::map<uint64_t, std::set<std::string>> out;
  std::istringstream in(run("nm -S --defined-only " + args + " 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<std::string> f;
    for (std::string w; ls >> w;) f.push_back(w);
    if (f.size() != 3 && f.size() != 4) continue;
    std::string addr = f[0], type = f[f.size() - 2], name = f.back();
    bool sized = f.size() == 4 && std::stoull(f[1], nullptr, 16) != 0;
    // Text symbols; weak ones (W can also be data, like data_start) only when they have a size.
    if (type != "T" && type != "t" && type != "i" && !(type == "W" && sized)) continue;
    if (auto at = name.find('@'); at != std::string::npos) name.resize(at);
    out[std::stoull(addr, nullptr, 16)].insert(name);
  }
  return out;
}

struct ProcessView {
  std::map<std::string, uint64_t> syms;
  std::vector<MemoryRegion> regions;
};

// Parses the child's output: "sym NAME ADDR" and "map <a /proc/PID/maps line>".
ProcessView parse_output(const std::string& text) {
  ProcessView v;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string tag;
    ls >> tag;
    if (tag == "sym") {
      std::string name, addr;
      ls >> name >> addr;
      v.syms[name] = std::stoull(addr, nullptr, 16);
    } else if (tag == "map") {
      std::string range, perms, offset, dev, inode;
      ls >> range >> perms >> offset >> dev >> inode;
      MemoryRegion r;
      auto dash = range.find('-');
      r.start = std::stoull(range.substr(0, dash), nullptr, 16);
      r.end = std::stoull(range.substr(dash + 1), nullptr, 16);
      r.read = perms[0] == 'r';
      r.write = perms[1] == 'w';
      r.exec = perms[2] == 'x';
      r.offset = std::stoull(offset, nullptr, 16);
      std::getline(ls >> std::ws, r.name);
      v.regions.push_back(r);
    }
  }
  return v;
}

std::string hex_offset(uint64_t v) {
  std::ostringstream o;
  o << "+0x" << std::hex << v;
  return o.str();
}

ProcessView run_program(const std::string& cmd) { return parse_output(run(cmd)); }

uint64_t nm_address(const std::string& file, const std::string& name) {
  for (auto& [addr, names] : nm_functions(file))
    if (names.count(name)) return addr;
  return 0;
}

// Every function nm knows is found at offset 0 under one of its names.
void check_all_functions(const Symbolizer& s, const std::map<uint64_t, std::set<std::string>>& fns,
                         uint64_t bias) {
  REQUIRE(fns.size() > 3);
  for (auto& [addr, names] : fns) {
    auto hit = s.lookup(addr + bias);
    INFO("addr " << std::hex << addr << " first name " << *names.begin());
    REQUIRE(hit.has_value());
    CHECK(hit->offset == 0);
    CHECK(names.count(hit->name) == 1);
  }
}

}  // namespace

TEST_CASE("symbolizer: non-PIE program, truth from nm", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  Symbolizer s;
  s.add_module(p.nopie, 0);
  REQUIRE(s.module_count() == 1);
  check_all_functions(s, nm_functions(p.nopie), 0);

  uint64_t alpha = nm_address(p.nopie, "alpha");
  REQUIRE(alpha != 0);
  auto hit = s.lookup(alpha + 4);
  REQUIRE(hit);
  CHECK(hit->name == "alpha");
  CHECK(hit->offset == 4);
  CHECK(hit->module == "prog_nopie");
  CHECK(s.describe(alpha) == "alpha");
  CHECK(s.describe(alpha + 0x12) == "alpha+0x12");
  CHECK(s.lookup(nm_address(p.nopie, "gamma_static") + 1)->name == "gamma_static");
  CHECK(s.address_of("beta") == nm_address(p.nopie, "beta"));
}

TEST_CASE("symbolizer: size-0 symbol extends to the next symbol", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  Symbolizer s;
  s.add_module(p.nopie, 0);
  uint64_t z = nm_address(p.nopie, "zero_sized");
  REQUIRE(z != 0);
  CHECK(s.describe(z) == "zero_sized");
  CHECK(s.describe(z + 4) == "zero_sized+0x4");
  // Whatever follows it is not swallowed.
  auto fns = nm_functions(p.nopie);
  auto next = fns.upper_bound(z);
  if (next != fns.end()) CHECK(s.lookup(next->first)->offset == 0);
}

TEST_CASE("symbolizer: PIE program with a bias", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  const uint64_t bias = 0x555555554000;
  Symbolizer s;
  s.add_module(p.pie, bias);
  check_all_functions(s, nm_functions(p.pie), bias);
  uint64_t beta = nm_address(p.pie, "beta");
  CHECK(s.describe(bias + beta + 0x20) == "beta+0x20");
  // Nothing there, but inside the module: link-time address after the module name.
  CHECK(s.describe(bias + 0x10) == "prog_pie+0x10");
  CHECK(s.describe(0x10) == "0x10");
  CHECK(!s.lookup(beta).has_value());  // the unbiased address is not in the module
}

// objdump truth for PLT stubs: "0000000000001030 <printf@plt>:" lines.
std::map<uint64_t, std::string> objdump_plt(const std::string& path) {
  std::map<uint64_t, std::string> out;
  std::istringstream in(run("objdump -d -j .plt -j .plt.sec " + path + " 2>/dev/null"));
  std::string line;
  while (std::getline(in, line)) {
    auto lt = line.find(" <"), gt = line.find(">:");
    if (lt == std::string::npos || gt == std::string::npos || gt < lt) continue;
    std::string name = line.substr(lt + 2, gt - lt - 2);
    if (name.size() < 5 || name.compare(name.size() - 4, 4, "@plt") != 0) continue;
    out[std::stoull(line.substr(0, lt), nullptr, 16)] = name;
  }
  return out;
}

TEST_CASE("symbolizer: PLT stubs are named like objdump names them", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  for (const auto& [path, bias] : {std::pair<std::string, uint64_t>{p.nopie, 0}, {p.pie, 0x555555554000}}) {
    INFO(path);
    auto truth = objdump_plt(path);
    REQUIRE(truth.size() >= 3);  // printf, fopen, strcmp, ...
    Symbolizer s;
    s.add_module(path, bias);
    for (const auto& [addr, name] : truth) {
      CHECK(s.describe(bias + addr) == name);
      CHECK(s.describe(bias + addr + 4) == name + "+0x4");
    }
  }
}

TEST_CASE("symbolizer: libc .dynsym with a fake bias", "[symbolizer]") {
  const uint64_t bias = 0x7f1234560000;
  Symbolizer s;
  s.add_module(kLibc, bias);
  REQUIRE(s.module_count() == 1);
  auto fns = nm_functions(std::string("-D ") + kLibc);
  uint64_t getpid = nm_address(std::string("-D ") + kLibc, "getpid");
  REQUIRE(getpid != 0);
  auto hit = s.lookup(bias + getpid);
  REQUIRE(hit);
  CHECK(hit->name == "getpid");  // preferred over its alias __getpid
  CHECK(hit->module == "libc.so.6");
  CHECK(s.describe(bias + getpid + 3) == "getpid+0x3");
  check_all_functions(s, fns, bias);
  CHECK(s.describe(bias + 0x10) == "libc.so.6+0x10");
}

TEST_CASE("symbolizer: unreadable, non-ELF and stripped files", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  Symbolizer s;
  s.add_module("/nonexistent/file", 0);
  s.add_module("/etc/hostname", 0);
  s.add_module("/proc/self/status", 0);
  s.add_module("", 0);
  CHECK(s.module_count() == 0);
  CHECK(s.describe(0x401000) == "0x401000");
  CHECK(!s.lookup(0x401000));

  std::string stripped = p.dir + "/prog_stripped";
  REQUIRE(system(("strip -o " + stripped + " " + p.pie).c_str()) == 0);
  const uint64_t bias = 0x560000000000;
  s.add_module(stripped, bias);
  REQUIRE(s.module_count() == 1);
  uint64_t alpha = nm_address(p.pie, "alpha");
  CHECK(!s.lookup(bias + alpha));  // only .dynsym left: alpha is gone
  CHECK(s.describe(bias + alpha) == "prog_stripped" + hex_offset(alpha));
}

TEST_CASE("symbolizer: a file without a section name table keeps its symbols", "[symbolizer]") {
  // e_shstrndx = SHN_UNDEF is legal: the sections lose their names, not their types.
  const Programs& p = programs();
  REQUIRE(p.ok);
  std::string unnamed = p.dir + "/prog_unnamed";
  REQUIRE(system(("cp " + p.nopie + " " + unnamed).c_str()) == 0);
  {
    std::fstream f(unnamed, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offsetof(Elf64_Ehdr, e_shstrndx));
    const char zero[2] = {0, 0};
    f.write(zero, sizeof zero);
  }
  Symbolizer s;
  s.add_module(unnamed, 0);
  REQUIRE(s.module_count() == 1);
  uint64_t alpha = nm_address(p.nopie, "alpha");
  REQUIRE(alpha != 0);
  CHECK(s.describe(alpha + 1) == "alpha+0x1");
  CHECK(backend::read_elf_symbol_values(unnamed).count("alpha") == 1);
}

TEST_CASE("symbolizer: from_memory_map of running programs", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  for (const std::string& prog : {p.nopie, p.pie}) {
    INFO(prog);
    ProcessView v = run_program(prog);
    REQUIRE(v.syms.size() == 5);
    REQUIRE(!v.regions.empty());
    Symbolizer s = Symbolizer::from_memory_map(v.regions);
    CHECK(s.module_count() >= 3);  // program, libc, ld.so; [vdso] skipped
    for (const char* name : {"alpha", "beta", "gamma_static", "zero_sized"}) {
      auto hit = s.lookup(v.syms[name]);
      REQUIRE(hit);
      CHECK(hit->name == name);
      CHECK(hit->offset == 0);
      CHECK(hit->module == prog.substr(prog.rfind('/') + 1));
      // nm's address plus the bias is where it runs.
      uint64_t bias = v.syms[name] - nm_address(prog, name);
      CHECK(bias % 4096 == 0);
      if (prog == p.nopie) CHECK(bias == 0);
    }
    CHECK(s.describe(v.syms["alpha"] + 5) == "alpha+0x5");
    auto libc = s.lookup(v.syms["getpid"]);
    REQUIRE(libc);
    CHECK(libc->name == "getpid");
    CHECK(libc->module == "libc.so.6");

    // Without file offsets (all 0) the lowest mapping of each file anchors it.
    std::vector<MemoryRegion> no_offsets = v.regions;
    for (auto& r : no_offsets) r.offset = 0;
    Symbolizer s2 = Symbolizer::from_memory_map(no_offsets);
    CHECK(s2.describe(v.syms["beta"] + 2) == "beta+0x2");
    CHECK(s2.describe(v.syms["getpid"]) == "getpid");
  }
}

TEST_CASE("symbolizer: deleted executable", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  std::string copy = p.dir + "/prog_deleted";
  REQUIRE(system(("cp " + p.pie + " " + copy).c_str()) == 0);
  ProcessView v = run_program(copy + " unlink");
  REQUIRE(v.syms.size() == 5);
  bool saw_deleted = false;
  for (auto& r : v.regions) saw_deleted |= r.name == copy + " (deleted)";
  CHECK(saw_deleted);
  // File gone: its mappings contribute nothing; libc still works.
  Symbolizer s = Symbolizer::from_memory_map(v.regions);
  CHECK(!s.lookup(v.syms["alpha"]));
  CHECK(s.describe(v.syms["alpha"]) == hex_offset(v.syms["alpha"]).substr(1));
  CHECK(s.describe(v.syms["getpid"]) == "getpid");
  // The same file put back at the path is accepted (its layout matches the mapping).
  REQUIRE(system(("cp " + p.pie + " " + copy).c_str()) == 0);
  Symbolizer back = Symbolizer::from_memory_map(v.regions);
  CHECK(back.describe(v.syms["alpha"]) == "alpha");
  // A different file at the path is refused.
  REQUIRE(system(("cp " + std::string(kLibc) + " " + copy).c_str()) == 0);
  Symbolizer other = Symbolizer::from_memory_map(v.regions);
  CHECK(!other.lookup(v.syms["alpha"]));
}

extern "C" __attribute__((noinline)) int bs_symbolizer_probe(int x) { return x * 7 + 1; }

TEST_CASE("symbolizer: this test binary and its libc", "[symbolizer]") {
  // The test reads its own maps; the symbolizer only gets the regions.
  std::ifstream maps("/proc/self/maps");
  std::string line, text;
  while (std::getline(maps, line)) text += "map " + line + "\n";
  ProcessView v = parse_output(text);
  REQUIRE(!v.regions.empty());
  Symbolizer s = Symbolizer::from_memory_map(v.regions);
  auto hit = s.lookup(reinterpret_cast<uint64_t>(&getpid));
  REQUIRE(hit);
  CHECK(hit->name == "getpid");
  uint64_t probe = reinterpret_cast<uint64_t>(&bs_symbolizer_probe);
  CHECK(s.describe(probe) == "bs_symbolizer_probe");
  CHECK(s.describe(probe + 1) == "bs_symbolizer_probe+0x1");
  CHECK(s.address_of("bs_symbolizer_probe") == probe);
}

extern "C" {
int bs_symbolizer_data = 5;  // a data symbol of the test program itself, found by name
}
static int bs_symbolizer_local_data = 6;

TEST_CASE("symbolizer: symbol values by name, truth from nm", "[symbolizer]") {
  const Programs& p = programs();
  REQUIRE(p.ok);
  auto values = backend::read_elf_symbol_values(p.nopie);
  // Every defined data, bss, read-only and text symbol nm lists (one definition per name).
  std::map<std::string, std::set<std::pair<uint64_t, bool>>> truth;
  std::istringstream in(run("nm --defined-only " + p.nopie));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, type, name;
    if (!(ls >> addr >> type >> name) || type.size() != 1 || std::string("DdBbRrTt").find(type) == std::string::npos)
      continue;
    truth[name].insert({std::stoull(addr, nullptr, 16), std::isupper(static_cast<unsigned char>(type[0])) != 0});
  }
  REQUIRE(truth.size() > 10);
  for (auto& [name, defs] : truth) {
    if (defs.size() != 1) continue;
    INFO(name);
    auto it = values.find(name);
    REQUIRE(it != values.end());
    CHECK(it->second.value == defs.begin()->first);
    CHECK(it->second.global == defs.begin()->second);
  }
  CHECK(values.count("main"));
  CHECK(backend::read_elf_symbol_values("/nonexistent").empty());
  CHECK(backend::read_elf_symbol_values("/proc/self/status").empty());
}

TEST_CASE("symbolizer: loaded modules and their data symbols in this test binary", "[symbolizer]") {
  std::ifstream maps("/proc/self/maps");
  std::string line, text;
  while (std::getline(maps, line)) text += "map " + line + "\n";
  ProcessView v = parse_output(text);
  auto modules = Symbolizer::loaded_modules(v.regions);
  REQUIRE(modules.size() >= 3);
  auto value_of = [&](const std::string& part, const std::string& name) -> std::optional<uint64_t> {
    for (const auto& m : modules) {
      if (m.file.find(part) == std::string::npos) continue;
      auto values = backend::read_elf_symbol_values(m.file);
      if (auto it = values.find(name); it != values.end()) return it->second.value + m.bias;
    }
    return std::nullopt;
  };
  // Data objects, global and local, of the test program at their run-time addresses.
  CHECK(value_of("unit_backend", "bs_symbolizer_data") == reinterpret_cast<uint64_t>(&bs_symbolizer_data));
  CHECK(value_of("unit_backend", "_ZL24bs_symbolizer_local_data")  // C++ mangles internal names
         == reinterpret_cast<uint64_t>(&bs_symbolizer_local_data));
  // libc's private data that libthread_db looks up.
  void* version = dlsym(RTLD_DEFAULT, "__nptl_version");
  REQUIRE(version);
  CHECK(value_of("libc.so", "__nptl_version") == reinterpret_cast<uint64_t>(version));
  // TLS symbols are offsets, not addresses: left out.
  CHECK(!value_of("libc.so", "errno"));
}
