// The one reader of ELF64 files on disk, for the symbolizer and coverage: type, entry point,
// PT_LOAD segments, sections, symbol tables (.symtab, .dynsym), PLT stubs, the GNU build id
// (NT_GNU_BUILD_ID note), and the separate debug file that build id names. Read-only mmap,
// bounds-checked: a truncated or foreign file gives an empty answer, never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace backend {

struct ElfSegment {
  uint64_t vaddr = 0, memsz = 0, offset = 0, filesz = 0;
  bool exec = false;
};

// A section header, named from the section name table.
struct ElfSection {
  std::string name;  // "" when the file has no readable section name table
  uint32_t type = 0, link = 0;
  uint64_t flags = 0, addr = 0, offset = 0, size = 0, entsize = 0;
};

// An entry of a symbol table; `name` points into the mapped file (valid while the ElfFile is).
struct ElfSymbol {
  std::string_view name;  // may be empty
  uint64_t value = 0, size = 0;
  uint8_t type = 0, bind = 0;  // STT_*, STB_*
  uint16_t shndx = 0;          // SHN_UNDEF, SHN_ABS, ... or an index into sections()
};

// A PLT stub and the dynamic symbol it jumps to (without "@plt"); 16 bytes long.
struct ElfPltStub {
  std::string_view name;
  uint64_t addr = 0;
  uint64_t section_end = 0;  // link-time end of the section holding the stubs
};

struct ElfFunction {
  std::string name;
  uint64_t value = 0, size = 0;  // link-time
};

// Which symbol tables a walk reads.
enum class ElfSymbols { symtab, dynsym, both };

class ElfFile {
 public:
  // nullopt unless `path` is a readable little-endian ELF64 file.
  static std::optional<ElfFile> open(const std::string& path);
  ElfFile(ElfFile&&) noexcept;
  ElfFile& operator=(ElfFile&&) noexcept;
  ~ElfFile();

  const std::string& path() const { return path_; }
  uint16_t type() const { return type_; }     // e_type: ET_EXEC, ET_DYN...
  bool shared() const { return type_ == 3; }  // ET_DYN: loaded at a bias
  uint64_t entry() const { return entry_; }
  const std::vector<ElfSegment>& loads() const { return loads_; }
  uint64_t lowest_vaddr() const;  // link-time address of the first PT_LOAD (page-aligned)
  // Every section header, in file order (empty when the table is missing or out of bounds).
  const std::vector<ElfSection>& sections() const { return sections_; }
  // Lower-case hex of the NT_GNU_BUILD_ID note, "" when the file has none.
  std::string build_id() const;
  // The contents of the named section (SHT_NOBITS and compressed sections: empty).
  std::span<const uint8_t> section(const std::string& name) const;
  bool has_section(const std::string& name) const;
  // `len` bytes of the image at link-time address `vaddr` (from the PT_LOAD holding it); empty
  // when not entirely inside one segment's file bytes.
  std::span<const uint8_t> at_vaddr(uint64_t vaddr, uint64_t len) const;

  // Calls `fn` for every symbol but the null one of the chosen tables, in section then table
  // order. Tables whose entries or string table are out of bounds are skipped, and so are
  // symbols whose name is not a NUL-terminated string inside their string table.
  void for_each_symbol(ElfSymbols which, const std::function<void(const ElfSymbol&)>& fn) const;
  // Defined functions with a size (STT_FUNC, STT_GNU_IFUNC) of .symtab, else .dynsym; one per
  // address (the first name), sorted by address.
  std::vector<ElfFunction> functions() const;
  // The named stubs of .plt.sec (IBT builds) or else .plt, from .rela.plt: entry k belongs to
  // the k-th 16-byte stub (of .plt after its 16-byte header). IRELATIVE slots have no name.
  std::vector<ElfPltStub> plt_stubs() const;

 private:
  ElfFile() = default;
  // The symbols and names of the symbol table in section `index`, bounds-checked.
  struct SymbolTable;
  std::optional<SymbolTable> symbol_table(uint64_t index) const;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint16_t type_ = 0;
  uint64_t entry_ = 0;
  std::vector<ElfSegment> loads_;
  std::vector<ElfSection> sections_;
  std::vector<std::pair<uint64_t, uint64_t>> notes_;  // PT_NOTE and SHT_NOTE (offset, size)
};

// The file holding the debug information for `path`: the file itself when it has .debug_line,
// else /usr/lib/debug/.build-id/xx/yyyy.debug for its build id (Debian's -dbgsym layout), else
// /usr/lib/debug<path>. "" when none is found.
std::string debug_file_for(const std::string& path, const std::string& build_id);

}  // namespace backend
