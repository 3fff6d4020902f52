#include "backend/host/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace backend {

namespace {

template <typename T>
const T* object_at(const uint8_t* data, size_t size, uint64_t off, uint64_t count = 1) {
  if (count == 0 || count > size / sizeof(T) || off > size || count * sizeof(T) > size - off) return nullptr;
  return reinterpret_cast<const T*>(data + off);
}

}  // namespace

ElfFile::ElfFile(ElfFile&& o) noexcept { *this = std::move(o); }

ElfFile& ElfFile::operator=(ElfFile&& o) noexcept {
  if (this == &o) return *this;
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  path_ = std::move(o.path_);
  data_ = std::exchange(o.data_, nullptr);
  size_ = std::exchange(o.size_, 0);
  type_ = o.type_;
  entry_ = o.entry_;
  loads_ = std::move(o.loads_);
  sections_ = std::move(o.sections_);
  notes_ = std::move(o.notes_);
  return *this;
}

ElfFile::~ElfFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::optional<ElfFile> ElfFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  void* map = MAP_FAILED;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= static_cast<off_t>(sizeof(Elf64_Ehdr)))
    map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return std::nullopt;
  ElfFile f;
  f.path_ = path;
  f.data_ = static_cast<const uint8_t*>(map);
  f.size_ = static_cast<size_t>(st.st_size);

  auto* eh = object_at<Elf64_Ehdr>(f.data_, f.size_, 0);
  if (!eh || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_ident[EI_DATA] != ELFDATA2LSB)
    return std::nullopt;  // f unmaps on the way out
  f.type_ = eh->e_type;
  f.entry_ = eh->e_entry;
  if (eh->e_phentsize == sizeof(Elf64_Phdr) && eh->e_phnum)
    if (auto* ph = object_at<Elf64_Phdr>(f.data_, f.size_, eh->e_phoff, eh->e_phnum))
      for (unsigned i = 0; i < eh->e_phnum; ++i) {
        if (ph[i].p_type == PT_LOAD)
          f.loads_.push_back({ph[i].p_vaddr, ph[i].p_memsz, ph[i].p_offset, ph[i].p_filesz, (ph[i].p_flags & PF_X) != 0});
        else if (ph[i].p_type == PT_NOTE)
          f.notes_.emplace_back(ph[i].p_offset, ph[i].p_filesz);
      }
  if (eh->e_shoff && eh->e_shentsize == sizeof(Elf64_Shdr)) {
    uint64_t shnum = eh->e_shnum;
    if (shnum == 0)  // extended numbering: the count lives in section 0
      if (auto* s0 = object_at<Elf64_Shdr>(f.data_, f.size_, eh->e_shoff)) shnum = s0->sh_size;
    auto* sh = shnum ? object_at<Elf64_Shdr>(f.data_, f.size_, eh->e_shoff, shnum) : nullptr;
    uint64_t strndx = eh->e_shstrndx == SHN_XINDEX && sh ? sh[0].sh_link : eh->e_shstrndx;
    // Sections without a readable name table stay unnamed: their types still find the symbols.
    const char* strtab = nullptr;
    uint64_t strsize = 0;
    if (sh && strndx < shnum) {
      strsize = sh[strndx].sh_size;
      strtab = object_at<char>(f.data_, f.size_, sh[strndx].sh_offset, strsize);
    }
    for (uint64_t i = 0; sh && i < shnum; ++i) {
      std::string name;
      if (strtab && sh[i].sh_name < strsize)
        name.assign(strtab + sh[i].sh_name, strnlen(strtab + sh[i].sh_name, strsize - sh[i].sh_name));
      f.sections_.push_back({name, sh[i].sh_type, sh[i].sh_link, sh[i].sh_flags, sh[i].sh_addr, sh[i].sh_offset,
                             sh[i].sh_size, sh[i].sh_entsize});
      // Separate debug files keep the note as a section only.
      if (sh[i].sh_type == SHT_NOTE) f.notes_.emplace_back(sh[i].sh_offset, sh[i].sh_size);
    }
  }
  return f;
}

uint64_t ElfFile::lowest_vaddr() const {
  uint64_t lo = UINT64_MAX;
  for (const auto& s : loads_) lo = std::min(lo, s.vaddr & ~uint64_t{0xfff});
  return lo == UINT64_MAX ? 0 : lo;
}

std::string ElfFile::build_id() const {
  for (auto [off, size] : notes_) {
    uint64_t pos = off, end = off + size;
    if (end < off || end > size_) continue;
    // Elf64_Nhdr: namesz, descsz, type; name and desc each padded to 4 bytes.
    while (pos + sizeof(Elf64_Nhdr) <= end) {
      auto* n = reinterpret_cast<const Elf64_Nhdr*>(data_ + pos);
      uint64_t name_at = pos + sizeof(Elf64_Nhdr);
      uint64_t desc_at = name_at + ((uint64_t{n->n_namesz} + 3) & ~uint64_t{3});
      uint64_t next = desc_at + ((uint64_t{n->n_descsz} + 3) & ~uint64_t{3});
      if (next > end || desc_at + n->n_descsz > end) break;
      if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(data_ + name_at, "GNU", 4) == 0) {
        std::string hex;
        for (uint32_t i = 0; i < n->n_descsz; ++i) hex += fmt::format("{:02x}", data_[desc_at + i]);
        return hex;
      }
      pos = next;
    }
  }
  return {};
}

std::span<const uint8_t> ElfFile::section(const std::string& name) const {
  for (const auto& s : sections_) {
    if (s.name != name) continue;
    if (s.type == SHT_NOBITS || (s.flags & SHF_COMPRESSED)) return {};
    if (s.offset > size_ || s.size > size_ - s.offset) return {};
    return {data_ + s.offset, static_cast<size_t>(s.size)};
  }
  return {};
}

bool ElfFile::has_section(const std::string& name) const { return !section(name).empty(); }

std::span<const uint8_t> ElfFile::at_vaddr(uint64_t vaddr, uint64_t len) const {
  for (const auto& s : loads_) {
    if (vaddr < s.vaddr || vaddr - s.vaddr > s.filesz || len > s.filesz - (vaddr - s.vaddr)) continue;
    uint64_t off = s.offset + (vaddr - s.vaddr);
    if (off > size_ || len > size_ - off) return {};
    return {data_ + off, static_cast<size_t>(len)};
  }
  return {};
}

struct ElfFile::SymbolTable {
  const Elf64_Sym* syms;
  uint64_t count;
  const char* names;
  uint64_t names_size;

  // A symbol's name: nullopt when it is not NUL-terminated inside the string table.
  std::optional<std::string_view> name(const Elf64_Sym& s) const {
    if (s.st_name >= names_size) return std::nullopt;
    size_t len = strnlen(names + s.st_name, names_size - s.st_name);
    if (len == names_size - s.st_name) return std::nullopt;
    return std::string_view(names + s.st_name, len);
  }
};

std::optional<ElfFile::SymbolTable> ElfFile::symbol_table(uint64_t index) const {
  if (index >= sections_.size()) return std::nullopt;
  const ElfSection& sec = sections_[index];
  if (sec.entsize != sizeof(Elf64_Sym) || sec.link >= sections_.size()) return std::nullopt;
  const ElfSection& strs = sections_[sec.link];
  if (strs.type != SHT_STRTAB) return std::nullopt;
  uint64_t count = sec.size / sizeof(Elf64_Sym);
  auto* syms = object_at<Elf64_Sym>(data_, size_, sec.offset, count);
  const char* names = object_at<char>(data_, size_, strs.offset, strs.size);
  if (!syms || !names) return std::nullopt;
  return SymbolTable{syms, count, names, strs.size};
}

void ElfFile::for_each_symbol(ElfSymbols which, const std::function<void(const ElfSymbol&)>& fn) const {
  for (uint64_t i = 0; i < sections_.size(); ++i) {
    uint32_t type = sections_[i].type;
    bool wanted = which == ElfSymbols::symtab   ? type == SHT_SYMTAB
                  : which == ElfSymbols::dynsym ? type == SHT_DYNSYM
                                                : type == SHT_SYMTAB || type == SHT_DYNSYM;
    if (!wanted) continue;
    auto table = symbol_table(i);
    if (!table) continue;
    for (uint64_t k = 1; k < table->count; ++k) {
      const Elf64_Sym& s = table->syms[k];
      auto name = table->name(s);
      if (!name) continue;
      fn(ElfSymbol{*name, s.st_value, s.st_size, static_cast<uint8_t>(ELF64_ST_TYPE(s.st_info)),
                   static_cast<uint8_t>(ELF64_ST_BIND(s.st_info)), s.st_shndx});
    }
  }
}

std::vector<ElfFunction> ElfFile::functions() const {
  std::vector<ElfFunction> out;
  for (ElfSymbols which : {ElfSymbols::symtab, ElfSymbols::dynsym}) {
    for_each_symbol(which, [&](const ElfSymbol& s) {
      if ((s.type != STT_FUNC && s.type != STT_GNU_IFUNC) || s.shndx == SHN_UNDEF || s.size == 0) return;
      out.push_back({std::string(s.name), s.value, s.size});
    });
    if (!out.empty()) break;  // .symtab has everything .dynsym has
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value < b.value; });
  out.erase(std::unique(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value == b.value; }), out.end());
  return out;
}

std::vector<ElfPltStub> ElfFile::plt_stubs() const {
  std::vector<ElfPltStub> out;
  const ElfSection *rela = nullptr, *plt = nullptr, *plt_sec = nullptr;
  for (const auto& s : sections_) {
    if (s.name == ".rela.plt" && s.type == SHT_RELA) rela = &s;
    else if (s.name == ".plt") plt = &s;
    else if (s.name == ".plt.sec") plt_sec = &s;
  }
  if (!rela || (!plt && !plt_sec) || rela->entsize != sizeof(Elf64_Rela)) return out;
  auto dynsym = symbol_table(rela->link);
  uint64_t nrela = rela->size / sizeof(Elf64_Rela);
  auto* relas = object_at<Elf64_Rela>(data_, size_, rela->offset, nrela);
  if (!dynsym || !relas) return out;
  const ElfSection& stubs = plt_sec ? *plt_sec : *plt;
  uint64_t first = stubs.addr + (plt_sec ? 0 : 16), end = stubs.addr + stubs.size;
  for (uint64_t k = 0; k < nrela; ++k) {
    uint64_t addr = first + 16 * k, sym = ELF64_R_SYM(relas[k].r_info);
    if (addr + 16 > end) break;
    if (sym == 0 || sym >= dynsym->count) continue;  // IRELATIVE: no name
    auto name = dynsym->name(dynsym->syms[sym]);
    if (!name || name->empty()) continue;
    out.push_back({*name, addr, end});
  }
  return out;
}

std::string debug_file_for(const std::string& path, const std::string& build_id) {
  if (auto f = ElfFile::open(path); f && f->has_section(".debug_line")) return path;
  std::vector<std::string> candidates;
  if (build_id.size() > 2)
    candidates.push_back(fmt::format("/usr/lib/debug/.build-id/{}/{}.debug", build_id.substr(0, 2), build_id.substr(2)));
  if (!path.empty() && path[0] == '/') candidates.push_back("/usr/lib/debug" + path);
  for (const auto& c : candidates)
    if (auto f = ElfFile::open(c); f && f->has_section(".debug_line")) return c;
  return {};
}

}  // namespace backend
