// Pictures of what ran: a flame graph of a call tree (SVG written directly, as flamegraph.pl
// draws them: one box per call path, width = instructions, the root at the bottom), and the
// control-flow graph of one function with its executed blocks and edge counts (Graphviz DOT,
// rendered to SVG by `dot -Tsvg`).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/coverage/call_tree.h"
#include "backend/coverage/coverage.h"
#include "backend/x86/block_cache.h"
#include "backend/error.h"

namespace backend {

// name_of(function start) labels the boxes; the root box is "all". Boxes narrower than a tenth
// of a pixel are left out (their instructions stay in their callers' widths).
std::string flame_graph_svg(const CallTree& tree, const std::function<std::string(uint64_t)>& name_of,
                            const std::string& title);

// A function's static basic blocks (split at branch targets and after jumps, returns and
// traps; calls do not end a block) with execution counts from coverage.
struct CfgBlock {
  uint64_t start = 0, end = 0;       // [start, end)
  std::vector<std::string> lines;    // "addr: mnemonic operands"
  uint64_t count = 0;                // executions of its first instruction
  bool executed() const { return count > 0; }
};
struct CfgEdge {
  size_t from = 0, to = 0;  // block indexes
  uint64_t count = 0;
  bool taken = false;        // a taken branch (else the fall-through)
};
struct Cfg {
  std::string name;
  uint64_t start = 0, end = 0;
  std::vector<CfgBlock> blocks;
  std::vector<CfgEdge> edges;
};

// Decodes [start, end) through `read` and lays the coverage over it. Branch targets seen in the
// coverage (an indirect jump's, through a switch table) count as block starts too.
Result<Cfg> build_cfg(const std::string& name, uint64_t start, uint64_t end, const CodeReader& read,
                      const CoverageSnapshot& coverage);
std::string cfg_dot(const Cfg& cfg);
// Runs `dot -Tsvg` on the DOT text, writing svg_path.
Result<void> render_dot(const std::string& dot, const std::string& svg_path);

}  // namespace backend
