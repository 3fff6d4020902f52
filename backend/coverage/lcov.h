// lcov's tracefile format (geninfo(1), read by genhtml): per source file
//
//   TN:
//   SF:/abs/path/file.c
//   FN:<line>,<function>        FNDA:<executions>,<function>     FNF:<n>  FNH:<n>
//   DA:<line>,<executions>      (every line with code: 0 = not executed)
//   LF:<lines>  LH:<lines hit>
//   end_of_record
//
// Lines come from the DWARF line table of each covered module (or of its separate debug file,
// found by build id); a line's count is the most any of its instructions ran. Functions are the
// module's ELF function symbols, placed on the line of their first instruction.
#pragma once

#include <string>
#include <vector>

#include "backend/coverage/coverage.h"

namespace backend {

// `without_lines` gets the modules with coverage but no line table (no debug information).
std::string format_lcov(const CoverageSnapshot& snapshot, std::vector<std::string>* without_lines = nullptr);

}  // namespace backend
