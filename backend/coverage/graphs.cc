#include "backend/coverage/graphs.h"

#include "backend/x86/insn_length.h"

#include <capstone/capstone.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>

#include <fmt/format.h>

extern char** environ;

namespace backend {

namespace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out += c;
    }
  }
  return out;
}

// flamegraph.pl's "hot" palette, but from a hash of the name so a function keeps its colour.
std::string frame_colour(std::string_view name) {
  uint32_t h = 2166136261u;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  int r = 205 + static_cast<int>(h % 50), g = static_cast<int>((h >> 8) % 230), b = static_cast<int>((h >> 16) % 55);
  return fmt::format("rgb({},{},{})", r, g, b);
}

}  // namespace

std::string flame_graph_svg(const CallTree& tree, const std::function<std::string(uint64_t)>& name_of,
                            const std::string& title) {
  constexpr double kWidth = 1200, kPad = 10, kFrame = 17, kTop = 40, kCharWidth = 7.0;
  const auto& nodes = tree.nodes();
  uint64_t total = tree.total(CallTree::kRoot);
  // Depth-first layout: children sorted by name (flame graph convention), widths by
  // instructions including callees.
  struct Box { uint32_t node; int depth; double x, w; std::string name; uint64_t insns; };
  std::vector<Box> boxes;
  int max_depth = 0;
  double scale = total ? (kWidth - 2 * kPad) / static_cast<double>(total) : 0;
  struct Todo { uint32_t node; int depth; double x; };
  std::vector<Todo> todo{{CallTree::kRoot, 0, kPad}};
  while (!todo.empty()) {
    Todo t = todo.back();
    todo.pop_back();
    uint64_t insns = tree.total(t.node);
    std::string name = t.node == CallTree::kRoot ? "all" : name_of(nodes[t.node].function);
    boxes.push_back(Box{t.node, t.depth, t.x, static_cast<double>(insns) * scale, name, insns});
    max_depth = std::max(max_depth, t.depth);
    std::vector<std::pair<std::string, uint32_t>> kids;
    // Boxes under a tenth of a pixel are not drawn (as flamegraph.pl's --minwidth), nor is
    // anything above them; their instructions still count in the boxes below.
    for (uint32_t c : nodes[t.node].children)
      if (tree.live(c) && static_cast<double>(tree.total(c)) * scale >= 0.1) kids.emplace_back(name_of(nodes[c].function), c);
    std::sort(kids.begin(), kids.end());
    double x = t.x;
    std::vector<Todo> next;
    for (auto& [n, c] : kids) {
      next.push_back(Todo{c, t.depth + 1, x});
      x += static_cast<double>(tree.total(c)) * scale;
    }
    for (auto it = next.rbegin(); it != next.rend(); ++it) todo.push_back(*it);
  }
  double height = kTop + (max_depth + 1) * kFrame + 2 * kPad;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "xmlns=\"http://www.w3.org/2000/svg\" font-family=\"Verdana, sans-serif\" font-size=\"12\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#f8f8f0\"/>\n"
      "<text x=\"{2}\" y=\"24\" text-anchor=\"middle\" font-size=\"17\">{3}</text>\n",
      kWidth, height, kWidth / 2, xml_escape(title));
  for (const auto& b : boxes) {
    double y = height - kPad - (b.depth + 1) * kFrame;
    double pct = total ? 100.0 * static_cast<double>(b.insns) / static_cast<double>(total) : 0;
    std::string label;
    size_t fits = b.w > 3 * kCharWidth ? static_cast<size_t>((b.w - 6) / kCharWidth) : 0;
    if (fits >= b.name.size()) label = b.name;
    else if (fits >= 3) label = b.name.substr(0, fits - 2) + "..";
    out += fmt::format(
        "<g class=\"frame\"><title>{} ({} instructions, {:.2f}%)</title>"
        "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\" rx=\"2\" ry=\"2\"/>",
        xml_escape(b.name), b.insns, pct, b.x, y, b.w, kFrame - 1, b.node == CallTree::kRoot ? "rgb(230,230,230)" : frame_colour(b.name));
    if (!label.empty()) out += fmt::format("<text x=\"{:.2f}\" y=\"{:.1f}\">{}</text>", b.x + 3, y + kFrame - 5, xml_escape(label));
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

Result<Cfg> build_cfg(const std::string& name, uint64_t start, uint64_t end, const CodeReader& read,
                      const CoverageSnapshot& coverage) {
  if (end <= start || end - start > (1u << 20)) return Error{EINVAL, fmt::format("Bad function range {:#x}-{:#x}.", start, end)};
  std::vector<uint8_t> code(end - start);
  size_t got = read(start, code);
  if (got == 0) return Error{EIO, fmt::format("Cannot read the code of {} at {:#x}.", name, start)};
  code.resize(got);

  csh cs = 0;
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return Error{ENOSYS, "The capstone disassembler could not be opened."};
  cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
  cs_insn* insn = cs_malloc(cs);
  enum class Kind { Plain, Jump, CondJump, IndirectJump, Call, Return, Stop };
  struct Insn { uint64_t addr; uint32_t len; Kind kind; uint64_t target; std::string text; };
  std::vector<Insn> insns;
  const uint8_t* p = code.data();
  size_t size = code.size();
  uint64_t addr = start;
  while (size > 0) {
    if (!cs_disasm_iter(cs, &p, &size, &addr, insn)) {
      // What capstone 4 lacks (AVX-512 mask/compare forms) is never control flow.
      auto ext = extended_insn_length(std::span<const uint8_t>(p, size));
      if (!ext) break;
      insns.push_back(Insn{addr, ext->len, Kind::Plain, 0, fmt::format("{:x}: (vex/evex, {} bytes)", addr, ext->len)});
      p += ext->len;
      size -= ext->len;
      addr += ext->len;
      continue;
    }
    Insn i{insn->address, insn->size, Kind::Plain, 0, fmt::format("{:x}: {} {}", insn->address, insn->mnemonic, insn->op_str)};
    const cs_x86& x = insn->detail->x86;
    bool imm = x.op_count >= 1 && x.operands[0].type == X86_OP_IMM;
    auto in = [&](int group) { return cs_insn_group(cs, insn, group); };
    if (insn->id == X86_INS_JMP) i.kind = imm ? Kind::Jump : Kind::IndirectJump;
    else if (in(CS_GRP_JUMP)) i.kind = Kind::CondJump;
    else if (in(CS_GRP_CALL)) i.kind = Kind::Call;
    else if (in(CS_GRP_RET) || in(CS_GRP_IRET)) i.kind = Kind::Return;
    else if (insn->id == X86_INS_HLT || insn->id == X86_INS_UD2 || insn->id == X86_INS_INT3) i.kind = Kind::Stop;
    if (imm && (i.kind == Kind::Jump || i.kind == Kind::CondJump)) i.target = static_cast<uint64_t>(x.operands[0].imm);
    insns.push_back(std::move(i));
  }
  cs_free(insn, 1);
  cs_close(&cs);
  if (insns.empty()) return Error{EIO, fmt::format("Cannot decode the code of {} at {:#x}.", name, start)};
  uint64_t decoded_end = insns.back().addr + insns.back().len;
  auto inside = [&](uint64_t a) { return a >= start && a < decoded_end; };

  // Leaders: the entry, branch targets (static and seen), and what follows a block end.
  std::set<uint64_t> leaders{start};
  for (size_t k = 0; k < insns.size(); ++k) {
    const Insn& i = insns[k];
    if (i.target && inside(i.target)) leaders.insert(i.target);
    bool ends = i.kind == Kind::Jump || i.kind == Kind::CondJump || i.kind == Kind::IndirectJump ||
                i.kind == Kind::Return || i.kind == Kind::Stop;
    if (ends && k + 1 < insns.size()) leaders.insert(insns[k + 1].addr);
  }
  std::map<uint64_t, size_t> index_of;  // instruction address -> index
  for (size_t k = 0; k < insns.size(); ++k) index_of[insns[k].addr] = k;
  for (const auto& e : coverage.edges)
    if (index_of.count(e.from) && inside(e.to) && index_of.count(e.to) && insns[index_of[e.from]].kind != Kind::Call)
      leaders.insert(e.to);
  // A leader that is no instruction boundary (data, overlapping code) is dropped.
  for (auto it = leaders.begin(); it != leaders.end();) it = index_of.count(*it) ? std::next(it) : leaders.erase(it);

  // Executions per instruction, from the covered blocks overlapping the function.
  std::vector<uint64_t> executed(insns.size(), 0);
  for (const auto& b : coverage.blocks) {
    uint64_t b_end = b.start + b.size;
    if (b_end <= start || b.start >= decoded_end) continue;
    for (auto it = index_of.lower_bound(b.start); it != index_of.end() && it->first < b_end; ++it)
      executed[it->second] += b.count;
  }

  Cfg cfg;
  cfg.name = name;
  cfg.start = start;
  cfg.end = decoded_end;
  std::map<uint64_t, size_t> block_at;
  for (auto it = leaders.begin(); it != leaders.end(); ++it) {
    auto next = std::next(it);
    uint64_t b_end = next == leaders.end() ? decoded_end : *next;
    CfgBlock b;
    b.start = *it;
    b.end = b_end;
    b.count = executed[index_of[*it]];
    for (size_t k = index_of[*it]; k < insns.size() && insns[k].addr < b_end; ++k) b.lines.push_back(insns[k].text);
    block_at[b.start] = cfg.blocks.size();
    cfg.blocks.push_back(std::move(b));
  }

  // Edges: taken branches (static targets, and what the coverage saw) and fall-throughs.
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> taken;  // (from insn, to) -> count
  for (const auto& e : coverage.edges)
    if (index_of.count(e.from) && inside(e.to)) taken[{e.from, e.to}] += e.count;
  for (size_t bi = 0; bi < cfg.blocks.size(); ++bi) {
    const CfgBlock& b = cfg.blocks[bi];
    size_t last = index_of[b.start];
    while (last + 1 < insns.size() && insns[last + 1].addr < b.end) ++last;
    const Insn& i = insns[last];
    std::map<size_t, uint64_t> out_taken;
    if (i.kind == Kind::Jump || i.kind == Kind::CondJump)
      if (i.target && block_at.count(i.target)) out_taken[block_at[i.target]] += 0;
    uint64_t taken_total = 0;
    if (i.kind != Kind::Call)
      for (auto it = taken.lower_bound({i.addr, 0}); it != taken.end() && it->first.first == i.addr; ++it)
        if (block_at.count(it->first.second)) {
          out_taken[block_at[it->first.second]] += it->second;
          taken_total += it->second;
        }
    for (auto [to, count] : out_taken) cfg.edges.push_back(CfgEdge{bi, to, count, true});
    bool falls = i.kind != Kind::Jump && i.kind != Kind::IndirectJump && i.kind != Kind::Return && i.kind != Kind::Stop;
    if (falls && bi + 1 < cfg.blocks.size() && cfg.blocks[bi + 1].start == i.addr + i.len) {
      uint64_t through = executed[last] >= taken_total ? executed[last] - taken_total : 0;
      cfg.edges.push_back(CfgEdge{bi, bi + 1, through, false});
    }
  }
  return cfg;
}

std::string cfg_dot(const Cfg& cfg) {
  auto dot_escape = [](std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    return out;
  };
  size_t executed = std::count_if(cfg.blocks.begin(), cfg.blocks.end(), [](const CfgBlock& b) { return b.executed(); });
  std::string out = fmt::format("digraph \"{}\" {{\n", dot_escape(cfg.name));
  out += fmt::format(
      "  graph [fontname=\"monospace\", labelloc=t, label=\"{}: {} of {} blocks executed\"];\n"
      "  node [shape=box, fontname=\"monospace\", fontsize=10, style=filled];\n"
      "  edge [fontname=\"monospace\", fontsize=10];\n",
      dot_escape(cfg.name), executed, cfg.blocks.size());
  for (const auto& b : cfg.blocks) {
    std::string label = b.executed() ? fmt::format("{:#x}: executed {} time{}\\l", b.start, b.count, b.count == 1 ? "" : "s")
                                     : fmt::format("{:#x}: not executed\\l", b.start);
    for (const auto& l : b.lines) label += dot_escape(l) + "\\l";
    out += fmt::format("  b_{:x} [label=\"{}\", fillcolor=\"{}\", color=\"{}\"];\n", b.start, label,
                       b.executed() ? "#c8e6c9" : "#eeeeee", b.executed() ? "#2e7d32" : "#9e9e9e");
  }
  for (const auto& e : cfg.edges) {
    const auto& from = cfg.blocks[e.from];
    const auto& to = cfg.blocks[e.to];
    std::string style = e.count ? fmt::format("color=\"{}\", penwidth=2", e.taken ? "#2e7d32" : "#1565c0")
                                : "color=\"#9e9e9e\", style=dashed";
    out += fmt::format("  b_{:x} -> b_{:x} [label=\"{}\", {}];\n", from.start, to.start, e.count, style);
  }
  out += "}\n";
  return out;
}

Result<void> render_dot(const std::string& dot, const std::string& svg_path) {
  char dot_path[] = "/tmp/branchstub-cfg-XXXXXX";
  int fd = ::mkstemp(dot_path);
  if (fd < 0) return errno_error("mkstemp");
  bool written = ::write(fd, dot.data(), dot.size()) == static_cast<ssize_t>(dot.size());
  ::close(fd);
  if (!written) {
    ::unlink(dot_path);
    return Error{EIO, "Cannot write the DOT file."};
  }
  std::string out_arg = "-o" + svg_path;
  const char* argv[] = {"dot", "-Tsvg", out_arg.c_str(), dot_path, nullptr};
  // The server blocks SIGCHLD and friends (signalfd): dot gets a clean mask.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, "dot", nullptr, &attr, const_cast<char* const*>(argv), environ);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    ::unlink(dot_path);
    return Error{rc, "Cannot run Graphviz's dot (is the graphviz package installed?)."};
  }
  int status = 0;
  // This child only: the process engine waits for its own threads by id.
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  ::unlink(dot_path);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error{EIO, fmt::format("dot -Tsvg failed (status {}).", WIFEXITED(status) ? WEXITSTATUS(status) : -1)};
  return {};
}

}  // namespace backend
