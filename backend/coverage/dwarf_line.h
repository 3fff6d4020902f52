// A reader for DWARF line-number programs (.debug_line, DWARF versions 2 to 5; gcc 12 emits 5),
// enough to map code addresses to source lines for lcov: every row of every sequence, with its
// file's full path. DWARF 5 names the compilation directory in the line header itself; for
// older versions it comes from the unit's DW_AT_comp_dir in .debug_info. Malformed input ends
// the unit being read, never the caller.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace backend {

class ElfFile;

struct LineRow {
  uint64_t address = 0;  // link-time
  uint32_t file = 0;     // index into LineTable::files
  uint32_t line = 0;
  uint32_t column = 0;
  bool is_stmt = false;
  bool end_sequence = false;  // the address just past the sequence: no code of its own
};

struct LineTable {
  std::vector<std::string> files;  // full paths as the producer wrote them
  std::vector<LineRow> rows;       // in program order, sequence after sequence
};

struct DebugSections {
  std::span<const uint8_t> line, line_str, str, info, abbrev;
};

// comp_dirs: .debug_line offset -> compilation directory (DWARF < 5); see comp_dirs_of().
LineTable parse_line_table(const DebugSections& sections, const std::map<uint64_t, std::string>& comp_dirs);
// DW_AT_stmt_list -> DW_AT_comp_dir of every unit in .debug_info (versions 2 to 5).
std::map<uint64_t, std::string> comp_dirs_of(const DebugSections& sections);
// Both, for an ELF file's sections.
LineTable read_line_table(const ElfFile& elf);

}  // namespace backend
