// Coverage: the recorder, the TraceManager hook, and the writers (drcov, lcov, flame SVG, CFG
// DOT), the DWARF line reader against objdump and the build-id reader against readelf.
#include <catch2/catch.hpp>

#include <elf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "backend/btrace/trace_manager.h"
#include "backend/coverage/call_tree.h"
#include "backend/coverage/coverage.h"
#include "backend/coverage/drcov.h"
#include "backend/coverage/dwarf_line.h"
#include "backend/host/elf_file.h"
#include "backend/coverage/graphs.h"
#include "backend/coverage/lcov.h"
#include "tests/unit/temp_dir.h"

using namespace backend;

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

// Code at kBase for the recorder and the CFG builder:
//   1000: 31 c0        xor eax, eax
//   1002: 85 ff        test edi, edi
//   1004: 74 04        je 100a
//   1006: ff c0        inc eax
//   1008: eb 02        jmp 100c
//   100a: ff c8        dec eax
//   100c: 0f 05        syscall
//   100e: e8 ed ff ff ff  call 1000
//   1013: c3           ret
constexpr uint64_t kBase = 0x1000;
const std::vector<uint8_t> kCode = {0x31, 0xc0, 0x85, 0xff, 0x74, 0x04, 0xff, 0xc0, 0xeb, 0x02,
                                    0xff, 0xc8, 0x0f, 0x05, 0xe8, 0xed, 0xff, 0xff, 0xff, 0xc3};

size_t read_code(uint64_t addr, std::span<uint8_t> out) {
  if (addr < kBase || addr >= kBase + kCode.size()) return 0;
  size_t n = std::min<size_t>(out.size(), kBase + kCode.size() - addr);
  std::memcpy(out.data(), kCode.data() + (addr - kBase), n);
  return n;
}

Result<std::vector<MemoryRegion>> code_map() {
  MemoryRegion r;
  r.start = 0x1000;
  r.end = 0x2000;
  r.exec = r.read = true;
  r.name = "/nonexistent/prog";
  return std::vector<MemoryRegion>{r};
}

struct Seen : BranchSink {
  std::vector<std::string> log;
  void thread_started(pid_t tid, uint64_t pc) override { log.push_back(fmt::format("start {} {:x}", tid, pc)); }
  void branch(pid_t tid, uint64_t from, uint64_t to) override { log.push_back(fmt::format("branch {} {:x} {:x}", tid, from, to)); }
  void thread_ended(pid_t tid, uint64_t pc) override { log.push_back(fmt::format("end {} {:x}", tid, pc)); }
};

}  // namespace

TEST_CASE("coverage: TraceManager feeds the sink, keeps no history for coverage-only threads") {
  uint64_t pc = 0x100;
  TraceManager tm(TraceSource::Software, [&pc](pid_t) { return pc; });
  Seen sink;
  REQUIRE(tm.start_coverage(&sink, {1, 2}).ok());
  CHECK_FALSE(tm.start_coverage(&sink, {1}).ok());
  CHECK(tm.coverage_active());
  CHECK(tm.software_traced(1));
  CHECK_FALSE(tm.enabled(1));  // GDB does not see it as recorded
  tm.record(1, 0x110, 0x200);
  CHECK(tm.history(1, 10).empty());
  // GDB records thread 1 too: history and coverage both.
  REQUIRE(tm.enable(1).ok());
  tm.record(1, 0x210, 0x300);
  CHECK(tm.history(1, 10).size() == 1);
  REQUIRE(tm.disable(1).ok());
  CHECK(tm.software_traced(1));  // still traced for coverage
  tm.thread_created(3, 1);
  tm.thread_stopped(4);  // a thread created while running shows up at a stop
  tm.thread_exited(2);
  pc = 0x340;
  tm.stop_coverage();
  CHECK_FALSE(tm.software_traced(1));
  CHECK_FALSE(tm.coverage_active());
  tm.record(1, 0x350, 0x400);  // nothing after the stop
  CHECK(sink.log == std::vector<std::string>{"start 1 100", "start 2 100", "branch 1 110 200", "branch 1 210 300",
                                             "start 3 100", "start 4 100", "end 2 0", "end 1 340", "end 3 340",
                                             "end 4 340"});
}

TEST_CASE("coverage: a client thread keeps its history when coverage stops") {
  uint64_t pc = 0x100;
  TraceManager tm(TraceSource::Software, [&pc](pid_t) { return pc; });
  REQUIRE(tm.enable(5).ok());
  Seen sink;
  REQUIRE(tm.start_coverage(&sink, {5}).ok());
  tm.record(5, 0x110, 0x200);
  tm.stop_coverage();
  CHECK(tm.enabled(5));
  CHECK(tm.history(5, 10).size() == 1);
  CHECK(tm.history_origin(5) == 0x100);
}

TEST_CASE("coverage: recorder blocks, sizes, instruction counts, exit and open blocks") {
  CoverageRecorder rec(read_code, code_map);
  rec.thread_started(1, 0x1000);
  rec.branch(1, 0x1004, 0x100a);  // je taken
  rec.branch(1, 0x100e, 0x1000);  // call; the syscall at 100c did not move the pc
  rec.branch(1, 0x1008, 0x100c);  // je not taken, jmp taken
  rec.thread_ended(1, 0);         // exited: straight on to the syscall at 100c
  rec.thread_started(2, 0x1002);
  auto snap = rec.snapshot({{2, 0x1006}});  // 2 stopped at 1006: its block so far is [1002, 1006)
  std::map<std::pair<uint64_t, uint32_t>, std::pair<uint32_t, uint64_t>> got;
  for (const auto& b : snap.blocks) got[{b.start, b.size}] = {b.insns, b.count};
  std::map<std::pair<uint64_t, uint32_t>, std::pair<uint32_t, uint64_t>> want = {
      {{0x1000, 6}, {3, 1}},    // xor, test, je
      {{0x100a, 9}, {3, 1}},    // dec, syscall, call
      {{0x1000, 10}, {5, 1}},   // xor, test, je (not taken), inc, jmp
      {{0x100c, 2}, {1, 1}},    // the exit syscall
      {{0x1002, 4}, {2, 1}},    // open block of thread 2
  };
  CHECK(got == want);
  CHECK(snap.branches == 3);
  REQUIRE(snap.edges.size() == 3);
  CHECK(snap.edges[0].from == 0x1004);
  REQUIRE(snap.modules.size() == 1);
  CHECK(snap.modules[0].path == "/nonexistent/prog");
  CHECK(snap.modules[0].base == 0x1000);
  for (const auto& b : snap.blocks) CHECK(b.module == 0);
}

TEST_CASE("coverage: drcov v2 and v3 as drcovlib writes them") {
  CoverageSnapshot s;
  CoverageModule m;
  m.path = "/lib/a, b.so";  // a path with ", " (the last column takes the rest of the line)
  m.base = 0x7f0000000000;
  m.end = 0x7f0000004000;
  m.entry = 0x7f0000001100;
  m.segments = {{0x7f0000000000, 0x7f0000001000, 0, false}, {0x7f0000001000, 0x7f0000003000, 0x1000, true},
                {0x7f0000003000, 0x7f0000004000, 0x3000, false}};
  s.modules.push_back(m);
  s.blocks.push_back({0x7f0000001010, 12, 3, 1, 0});
  s.blocks.push_back({0x7f0000001100, 70000, 9, 1, 0});  // longer than a uint16: two records
  s.blocks.push_back({0x1234, 4, 1, 1, -1});             // outside every module
  size_t skipped = 0;
  std::string v2 = format_drcov(s, 2, &skipped);
  CHECK(skipped == 1);
  std::string header =
      "DRCOV VERSION: 2\nDRCOV FLAVOR: drcov\nModule Table: version 4, count 1\n"
      "Columns: id, containing_id, start, end, entry, offset, path\n"
      "  0,   0, 0x00007f0000000000, 0x00007f0000004000, 0x00007f0000001100, 0000000000000000, /lib/a, b.so\n"
      "BB Table: 3 bbs\n";
  REQUIRE(v2.size() == header.size() + 24);
  CHECK(v2.substr(0, header.size()) == header);
  auto record = [](const std::string& f, size_t at) {
    uint32_t start;
    uint16_t size, mod;
    std::memcpy(&start, f.data() + at, 4);
    std::memcpy(&size, f.data() + at + 4, 2);
    std::memcpy(&mod, f.data() + at + 6, 2);
    return std::tuple{start, size, mod};
  };
  CHECK(record(v2, header.size()) == std::tuple{0x1010u, uint16_t{12}, uint16_t{0}});
  CHECK(record(v2, header.size() + 8) == std::tuple{0x1100u, uint16_t{0xffff}, uint16_t{0}});
  CHECK(record(v2, header.size() + 16) == std::tuple{0x1100u + 0xffff, uint16_t{70000 - 0xffff}, uint16_t{0}});

  std::string v3 = format_drcov(s, 3);
  std::string header3 =
      "DRCOV VERSION: 3\nDRCOV FLAVOR: drcov\nModule Table: version 5, count 3\n"
      "Columns: id, containing_id, start, end, entry, offset, preferred_base, path\n"
      "  0,   0, 0x00007f0000000000, 0x00007f0000001000, 0x00007f0000001100, 0000000000000000, 0x0000000000000000, /lib/a, b.so\n"
      "  1,   0, 0x00007f0000001000, 0x00007f0000003000, 0x00007f0000001100, 0000000000001000, 0x0000000000000000, /lib/a, b.so\n"
      "  2,   0, 0x00007f0000003000, 0x00007f0000004000, 0x00007f0000001100, 0000000000003000, 0x0000000000000000, /lib/a, b.so\n"
      "BB Table: 3 bbs\n";
  REQUIRE(v3.substr(0, header3.size()) == header3);
  CHECK(record(v3, header3.size()) == std::tuple{0x10u, uint16_t{12}, uint16_t{1}});  // segment-relative
}

TEST_CASE("coverage: call tree calls, returns, tail calls, signals and re-rooting") {
  // Functions are 0x100 apart: function_of rounds down.
  CallTree tree([](uint64_t a) { return a & ~uint64_t{0xff}; });
  tree.thread_started(1, 0x210);           // recording starts inside B
  tree.instructions(1, 2);
  tree.branch(1, EdgeKind::Call, 0x300, 0x215);  // B calls C
  tree.instructions(1, 5);
  tree.branch(1, EdgeKind::Jump, 0x400, 0);      // C tail-calls D
  tree.instructions(1, 1);
  tree.branch(1, EdgeKind::Return, 0x215, 0);    // D returns into B
  tree.instructions(1, 1);
  tree.branch(1, EdgeKind::Return, 0x120, 0);    // B returns into A: A becomes B's caller
  tree.instructions(1, 3);
  tree.branch(1, EdgeKind::Async, 0x500, 0x123); // a signal handler E
  tree.instructions(1, 4);
  tree.branch(1, EdgeKind::Return, 0x123, 0);    // sigreturn back to A
  tree.instructions(1, 1);
  std::map<std::string, uint64_t> paths;
  std::function<void(uint32_t, std::string)> walk = [&](uint32_t n, std::string path) {
    const auto& node = tree.nodes()[n];
    if (n != CallTree::kRoot) path += fmt::format("/{:x}", node.function);
    paths[path.empty() ? "/" : path] = tree.total(n);
    for (uint32_t c : node.children)
      if (tree.live(c)) walk(c, path);
  };
  walk(CallTree::kRoot, "");
  std::map<std::string, uint64_t> want = {{"/", 17},      {"/100", 17},     {"/100/200", 9},
                                          {"/100/200/300", 5}, {"/100/200/400", 1}, {"/100/500", 4}};
  CHECK(paths == want);
}

TEST_CASE("coverage: the CFG of a function with counts, and its DOT") {
  CoverageRecorder rec(read_code, code_map);
  rec.thread_started(1, 0x1000);
  rec.branch(1, 0x1004, 0x100a);  // je taken once
  rec.branch(1, 0x100e, 0x1000);
  rec.branch(1, 0x1008, 0x100c);  // then not taken, jmp taken
  rec.thread_ended(1, 0x100e);
  auto cfg = build_cfg("f", 0x1000, 0x1014, read_code, rec.snapshot());
  REQUIRE(cfg.ok());
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  for (const auto& b : cfg->blocks) blocks.emplace_back(b.start, b.count);
  // 1000 (2 times), 1006 (once), 100a (once), 100c..1014: syscall, call, ret (twice: after
  // dec, and after the jmp, where the thread stopped at the call)
  CHECK(blocks == std::vector<std::pair<uint64_t, uint64_t>>{{0x1000, 2}, {0x1006, 1}, {0x100a, 1}, {0x100c, 2}});
  std::set<std::tuple<size_t, size_t, uint64_t, bool>> edges;
  for (const auto& e : cfg->edges) edges.emplace(e.from, e.to, e.count, e.taken);
  std::set<std::tuple<size_t, size_t, uint64_t, bool>> want = {
      {0, 2, 1, true}, {0, 1, 1, false}, {1, 3, 1, true}, {2, 3, 1, false}};
  CHECK(edges == want);
  std::string dot = cfg_dot(*cfg);
  CHECK(dot.find("b_1000 -> b_100a [label=\"1\"") != std::string::npos);
  CHECK(dot.find("label=\"f: 4 of 4 blocks executed\"") != std::string::npos);
  CHECK_FALSE(build_cfg("f", 0x1000, 0x1000, read_code, rec.snapshot()).ok());
}

TEST_CASE("coverage: flame graph boxes: one per call path, widths by instructions") {
  CallTree tree([](uint64_t a) { return a & ~uint64_t{0xff}; });
  tree.thread_started(1, 0x100);
  tree.instructions(1, 10);
  tree.branch(1, EdgeKind::Call, 0x200, 0x105);
  tree.instructions(1, 30);
  tree.branch(1, EdgeKind::Return, 0x105, 0);
  tree.branch(1, EdgeKind::Call, 0x300, 0x107);
  tree.instructions(1, 60);
  std::string svg = flame_graph_svg(tree, [](uint64_t f) { return fmt::format("f<{:x}>", f); }, "T & <x>");
  std::regex frame(R"re(<g class="frame"><title>([^<]*) \((\d+) instructions, [\d.]+%\)</title><rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)")re");
  std::map<std::string, std::pair<uint64_t, double>> boxes;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), frame); it != std::sregex_iterator(); ++it)
    boxes[(*it)[1]] = {std::stoull((*it)[2]), std::stod((*it)[4])};
  REQUIRE(boxes.size() == 4);
  CHECK(boxes["all"].first == 100);
  CHECK(boxes["f&lt;100&gt;"].first == 100);
  CHECK(boxes["f&lt;200&gt;"].first == 30);
  CHECK(boxes["f&lt;300&gt;"].first == 60);
  CHECK(boxes["f&lt;300&gt;"].second == Approx(boxes["all"].second * 0.6).margin(0.01));
  CHECK(svg.find("T &amp; &lt;x&gt;") != std::string::npos);
}

namespace {
// A two-file program (an inline function from a header) compiled with -gdwarf-N, in a
// directory of its own that goes with it.
struct Program {
  testutil::TempDir dir{"bs-dwarf"};
  std::string path;
};
std::unique_ptr<Program> compile_program(int dwarf) {
  auto p = std::make_unique<Program>();
  std::string dir = p->dir.str();
  REQUIRE_FALSE(dir.empty());
  std::ofstream(dir + "/h.h") << "static inline int twice(int v)\n{\n  return v * 2;\n}\n";
  std::ofstream(dir + "/m.c") << "#include \"h.h\"\nint g;\nint f(int x)\n{\n  if (x > 3)\n    g = twice(x);\n"
                                 "  return g;\n}\nint main(void)\n{\n  return f(5);\n}\n";
  run(fmt::format("cd {} && cc -g -gdwarf-{} -O0 -no-pie -Wl,--build-id -o prog m.c 2>&1", dir, dwarf));
  p->path = dir + "/prog";
  return p;
}
}  // namespace

TEST_CASE("coverage: DWARF 4 and 5 line tables equal objdump's decoded lines") {
  for (int dwarf : {4, 5}) {
    auto program = compile_program(dwarf);
    const std::string& prog = program->path;
    auto elf = ElfFile::open(prog);
    REQUIRE(elf);
    LineTable table = read_line_table(*elf);
    REQUIRE_FALSE(table.rows.empty());
    // objdump --dwarf=decodedline: "file line address [view] [x]", "-" for the line of an end.
    std::vector<std::string> theirs, ours;
    std::istringstream in(run("objdump --dwarf=decodedline " + prog));
    std::regex row(R"(^(\S+)\s+(\d+|-)\s+(0x[0-9a-f]+)(\s+\d+)?\s*(x?)\s*$)");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_match(line, m, row)) continue;
      if (m[2] == "-") theirs.push_back(fmt::format("end {}", m[3].str()));
      else theirs.push_back(fmt::format("{} {} {} {}", m[1].str(), m[2].str(), m[3].str(), m[5] == "x" ? "stmt" : ""));
    }
    for (const auto& r : table.rows) {
      std::string file = table.files[r.file];
      std::string base = file.substr(file.rfind('/') + 1);
      CHECK(file[0] == '/');  // joined with the compilation directory
      if (r.end_sequence) ours.push_back(fmt::format("end {:#x}", r.address));
      else ours.push_back(fmt::format("{} {} {:#x} {}", base, r.line, r.address, r.is_stmt ? "stmt" : ""));
    }
    INFO("DWARF " << dwarf);
    CHECK(ours == theirs);
    CHECK(std::find(table.files.begin(), table.files.end(), prog.substr(0, prog.rfind('/')) + "/h.h") != table.files.end());
  }
}

TEST_CASE("coverage: ElfFile's sections and symbol walks are readelf's") {
  auto program = compile_program(5);
  const std::string& prog = program->path;
  auto elf = ElfFile::open(prog);
  REQUIRE(elf);
  CHECK(elf->type() == ET_EXEC);  // -no-pie
  // readelf -S: "[ N] name type ..."; -s: "N: value size type bind vis ndx name".
  std::vector<std::string> theirs, ours;
  std::istringstream sections(run("readelf -SW " + prog));
  std::regex sec_row(R"(^\s*\[\s*\d+\]\s+(\S*)\s+[A-Z_]+\s+[0-9a-f]+\s.*$)");
  for (std::string line; std::getline(sections, line);) {
    std::smatch m;
    if (std::regex_match(line, m, sec_row)) theirs.push_back(m[1].str());
  }
  for (const auto& s : elf->sections()) ours.push_back(s.name);
  REQUIRE(ours.size() > 1);
  CHECK(ours == theirs);

  std::map<std::string, std::pair<uint64_t, uint64_t>> symtab;  // FUNC symbols: value, size
  std::istringstream syms(run("readelf -sW " + prog));
  std::regex sym_row(R"(^\s*\d+:\s+([0-9a-f]+)\s+(\d+)\s+FUNC\s+\S+\s+\S+\s+\d+\s+(\S+)$)");
  for (std::string line; std::getline(syms, line);) {
    std::smatch m;
    if (std::regex_match(line, m, sym_row))
      symtab[m[3].str()] = {std::stoull(m[1].str(), nullptr, 16), std::stoull(m[2].str())};
  }
  REQUIRE(symtab.count("f"));
  std::map<std::string, std::pair<uint64_t, uint64_t>> walked;  // the same from .symtab and .dynsym
  size_t dynamic = 0, both = 0, static_only = 0;
  elf->for_each_symbol(ElfSymbols::both, [&](const ElfSymbol& s) {
    ++both;
    if (s.type == STT_FUNC && s.shndx != SHN_UNDEF) walked[std::string(s.name)] = {s.value, s.size};  // STT_FUNC, defined
  });
  elf->for_each_symbol(ElfSymbols::dynsym, [&](const ElfSymbol&) { ++dynamic; });
  elf->for_each_symbol(ElfSymbols::symtab, [&](const ElfSymbol&) { ++static_only; });
  CHECK(both == dynamic + static_only);
  CHECK(walked == symtab);
  for (const auto& fn : elf->functions()) CHECK(symtab.at(fn.name) == std::pair{fn.value, fn.size});
}

TEST_CASE("coverage: the build id is readelf's, lcov maps covered blocks to lines") {
  auto program = compile_program(5);
  const std::string& prog = program->path;
  auto elf = ElfFile::open(prog);
  REQUIRE(elf);
  std::smatch m;
  std::string notes = run("readelf -n " + prog);
  REQUIRE(std::regex_search(notes, m, std::regex("Build ID: ([0-9a-f]+)")));
  CHECK(elf->build_id() == m[1].str());
  CHECK_FALSE(ElfFile::open("/nonexistent"));
  CHECK_FALSE(ElfFile::open("/proc/self/status"));

  // Coverage of f() entirely (non-PIE: run-time = link-time addresses), twice.
  auto functions = elf->functions();
  auto f = std::find_if(functions.begin(), functions.end(), [](const auto& x) { return x.name == "f"; });
  REQUIRE(f != functions.end());
  CoverageSnapshot s;
  CoverageModule mod;
  mod.path = prog;
  mod.base = elf->lowest_vaddr();
  mod.end = mod.base + 0x10000;
  mod.build_id = elf->build_id();
  s.modules.push_back(mod);
  s.blocks.push_back({f->value, static_cast<uint32_t>(f->size), 10, 2, 0});
  std::string info = format_lcov(s);
  CHECK(info.find("SF:" + prog.substr(0, prog.rfind('/')) + "/m.c\n") != std::string::npos);
  CHECK(info.find("FN:4,f\nFN:10,main\nFNDA:2,f\nFNDA:0,main\nFNF:2\nFNH:1\n") != std::string::npos);
  for (int line : {4, 5, 6, 7, 8}) CHECK(info.find(fmt::format("DA:{},2\n", line)) != std::string::npos);
  CHECK(info.find("DA:11,0\n") != std::string::npos);
  CHECK(info.find("SF:" + prog.substr(0, prog.rfind('/')) + "/h.h\nFN:2,twice\nFNDA:0,twice\n") != std::string::npos);
  run("rm -rf " + prog.substr(0, prog.rfind('/')));
}

TEST_CASE("coverage: malformed .debug_line input ends the unit, never the caller") {
  std::vector<uint8_t> junk = {0x20, 0, 0, 0, 5, 0, 8, 0, 0xff, 0xff, 0xff, 0x7f, 1, 1, 1, 0xfb, 14, 13};
  for (size_t n = 0; n <= junk.size(); ++n) {
    DebugSections s;
    s.line = std::span<const uint8_t>(junk.data(), n);
    (void)parse_line_table(s, {});
  }
  std::vector<uint8_t> random(4096);
  uint32_t x = 12345;
  for (int round = 0; round < 200; ++round) {
    for (auto& b : random) b = static_cast<uint8_t>((x = x * 1103515245 + 12345) >> 16);
    random[0] = static_cast<uint8_t>(round);
    random[1] = random[2] = random[3] = 0;
    random[4] = static_cast<uint8_t>(2 + round % 4);
    DebugSections s;
    s.line = random;
    s.info = random;
    s.abbrev = random;
    (void)parse_line_table(s, comp_dirs_of(s));
  }
  SUCCEED();
}
