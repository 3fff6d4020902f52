// What coverage needs from an ELF64 file on disk: its type, entry point, PT_LOAD segments, the
// GNU build id (NT_GNU_BUILD_ID note), sections by name (.debug_line and the string sections it
// refers to), and the separate debug file its build id names. Read-only mmap, bounds-checked:
// a truncated or foreign file gives an empty answer, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace backend {

struct ElfSegment {
  uint64_t vaddr = 0, memsz = 0, offset = 0, filesz = 0;
  bool exec = false;
};

struct ElfFunction {
  std::string name;
  uint64_t value = 0, size = 0;  // link-time
};

class ElfFile {
 public:
  // nullopt unless `path` is a readable little-endian ELF64 file.
  static std::optional<ElfFile> open(const std::string& path);
  ElfFile(ElfFile&&) noexcept;
  ElfFile& operator=(ElfFile&&) noexcept;
  ~ElfFile();

  const std::string& path() const { return path_; }
  bool shared() const { return type_ == 3; }  // ET_DYN: loaded at a bias
  uint64_t entry() const { return entry_; }
  const std::vector<ElfSegment>& loads() const { return loads_; }
  uint64_t lowest_vaddr() const;  // link-time address of the first PT_LOAD (page-aligned)
  // Lower-case hex of the NT_GNU_BUILD_ID note, "" when the file has none.
  std::string build_id() const;
  // The contents of the named section (SHT_NOBITS and compressed sections: empty).
  std::span<const uint8_t> section(const std::string& name) const;
  bool has_section(const std::string& name) const;
  // `len` bytes of the image at link-time address `vaddr` (from the PT_LOAD holding it); empty
  // when not entirely inside one segment's file bytes.
  std::span<const uint8_t> at_vaddr(uint64_t vaddr, uint64_t len) const;
  // Defined functions with a size (STT_FUNC, STT_GNU_IFUNC) of .symtab, else .dynsym; one per
  // address (the first name), sorted by address.
  std::vector<ElfFunction> functions() const;

 private:
  ElfFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint16_t type_ = 0;
  uint64_t entry_ = 0;
  std::vector<ElfSegment> loads_;
  struct Section { std::string name; uint32_t type; uint64_t flags, offset, size, addr; uint32_t link; uint64_t entsize; };
  std::vector<Section> sections_;
  std::vector<std::pair<uint64_t, uint64_t>> notes_;  // PT_NOTE (offset, size)
};

// The file holding the debug information for `path`: the file itself when it has .debug_line,
// else /usr/lib/debug/.build-id/xx/yyyy.debug for its build id (Debian's -dbgsym layout), else
// /usr/lib/debug<path>. "" when none is found.
std::string debug_file_for(const std::string& path, const std::string& build_id);

}  // namespace backend
