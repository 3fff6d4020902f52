#include "backend/host/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
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
    if (shnum == 0)
      if (auto* s0 = object_at<Elf64_Shdr>(f.data_, f.size_, eh->e_shoff)) shnum = s0->sh_size;
    auto* sh = shnum ? object_at<Elf64_Shdr>(f.data_, f.size_, eh->e_shoff, shnum) : nullptr;
    uint64_t strndx = eh->e_shstrndx == SHN_XINDEX && sh ? sh[0].sh_link : eh->e_shstrndx;
    if (sh && strndx < shnum) {
      const Elf64_Shdr& names = sh[strndx];
      const char* strtab = object_at<char>(f.data_, f.size_, names.sh_offset, names.sh_size);
      for (uint64_t i = 0; strtab && i < shnum; ++i) {
        std::string name;
        if (sh[i].sh_name < names.sh_size)
          name.assign(strtab + sh[i].sh_name, strnlen(strtab + sh[i].sh_name, names.sh_size - sh[i].sh_name));
        f.sections_.push_back({name, sh[i].sh_type, sh[i].sh_flags, sh[i].sh_offset, sh[i].sh_size, sh[i].sh_addr,
                               sh[i].sh_link, sh[i].sh_entsize});
        // Separate debug files keep the note as a section only.
        if (sh[i].sh_type == SHT_NOTE) f.notes_.emplace_back(sh[i].sh_offset, sh[i].sh_size);
      }
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

std::vector<ElfFunction> ElfFile::functions() const {
  std::vector<ElfFunction> out;
  for (uint32_t want : {uint32_t{SHT_SYMTAB}, uint32_t{SHT_DYNSYM}}) {
    for (const auto& sec : sections_) {
      if (sec.type != want || sec.entsize != sizeof(Elf64_Sym) || sec.link >= sections_.size()) continue;
      const Section& strs = sections_[sec.link];
      auto* syms = object_at<Elf64_Sym>(data_, size_, sec.offset, sec.size / sizeof(Elf64_Sym));
      const char* names = object_at<char>(data_, size_, strs.offset, strs.size);
      if (!syms || !names) continue;
      for (uint64_t k = 1; k < sec.size / sizeof(Elf64_Sym); ++k) {
        const Elf64_Sym& s = syms[k];
        unsigned type = ELF64_ST_TYPE(s.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_size == 0 ||
            s.st_name >= strs.size)
          continue;
        out.push_back({std::string(names + s.st_name, strnlen(names + s.st_name, strs.size - s.st_name)), s.st_value,
                       s.st_size});
      }
    }
    if (!out.empty()) break;  // .symtab has everything .dynsym has
  }
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value < b.value; });
  out.erase(std::unique(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.value == b.value; }), out.end());
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
