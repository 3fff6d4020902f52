// Address -> "function+offset" for ELF64 files (executables, shared libraries), read with
// ElfFile. Used for logs and diagnostics; never throws, never fails loudly: a file that cannot
// be read or parsed just contributes no symbols.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/memory_region.h"

namespace backend {

struct SymbolHit {
  std::string name;     // symbol name ("main", "getpid")
  uint64_t offset = 0;  // addr - symbol start
  std::string module;   // file name without directories ("libc.so.6")
};

// An ELF file mapped in a process. Runtime address = link-time address + bias.
struct LoadedModule {
  std::string name;   // as the maps file names it (may end in " (deleted)")
  std::string file;   // the path to read it from
  uint64_t bias = 0;
};

// A symbol's link-time value; `global` for GLOBAL and WEAK bindings.
struct ElfSymbolValue {
  uint64_t value = 0;
  bool global = false;
};

// Every defined symbol of the file's .symtab and .dynsym with an address (objects, functions,
// untyped; not TLS, section, file or absolute ones), by name; a global definition wins over a
// local one of the same name. For lookups by name (libthread_db's ps_pglobal_lookup), which
// need data symbols the Symbolizer leaves out. Empty for unreadable or non-ELF64 files.
std::unordered_map<std::string, ElfSymbolValue> read_elf_symbol_values(const std::string& path);

class Symbolizer {
 public:
  // Reads .symtab and .dynsym of the ELF file at `path` (FUNC, IFUNC, and NOTYPE symbols with a
  // size); runtime address = symbol value + load_bias. Unreadable or non-ELF64 files are
  // skipped (the module is still not added). Adding the same path twice replaces the first.
  void add_module(const std::string& path, uint64_t load_bias);

  // One module per distinct file-backed executable mapping (names starting with '/'; pseudo
  // mappings like [vdso] are skipped). Load bias: 0 for ET_EXEC; for ET_DYN, computed from the
  // mapping's start and file offset (MemoryRegion::offset) and the matching PT_LOAD segment.
  // When the offsets are unknown (all 0), the lowest mapping of that file is taken as offset 0.
  // " (deleted)" files are read from their old path only if the file there still matches the
  // mapping's layout.
  static Symbolizer from_memory_map(const std::vector<MemoryRegion>& regions);
  // The files from_memory_map reads, with those load biases, in the order of the map.
  static std::vector<LoadedModule> loaded_modules(const std::vector<MemoryRegion>& regions);

  // The symbol containing addr. Size-0 symbols extend to the next symbol (at most to the end of
  // their section). Among aliases the plainest name wins (getpid over __getpid).
  std::optional<SymbolHit> lookup(uint64_t addr) const;

  // "func+0x12", "func" (offset 0), "module+0x1234" (inside a module's loaded segments but no
  // symbol: 0x1234 is the link-time address, addr - load bias, as objdump shows), or "0x...".
  std::string describe(uint64_t addr) const;

  // Runtime address of the first symbol named `name` (any module); for tests and diagnostics.
  std::optional<uint64_t> address_of(const std::string& name) const;
  // [start, end) of the first symbol named `name` (run-time addresses).
  std::optional<std::pair<uint64_t, uint64_t>> range_of(const std::string& name) const;

  size_t module_count() const { return modules_.size(); }

 private:
  struct Symbol {
    uint64_t addr = 0;  // link-time value (add the module's bias)
    uint64_t end = 0;   // exclusive, link-time
    uint32_t name = 0;  // index into Module::names
  };
  struct Module {
    std::string path;
    std::string short_name;
    uint64_t bias = 0;
    uint64_t lo = 0, hi = 0;            // link-time extent of PT_LOAD segments
    std::vector<Symbol> symbols;        // sorted by addr, one per address
    std::vector<std::string> names;
  };
  static std::optional<Module> load(const std::string& path, uint64_t bias);
  const Module* module_for(uint64_t addr) const;

  std::vector<Module> modules_;
};

}  // namespace backend
