#include "backend/host/symbolizer.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <cstring>
#include <map>
#include <string_view>

#include <fmt/format.h>

namespace backend {
namespace {

constexpr uint64_t kPage = 4096;
constexpr std::string_view kDeleted = " (deleted)";
constexpr uint64_t kMaxSizeZeroSpan = 1 << 20;  // bound for size-0 symbols without a section

// A read-only view of a whole file (mmap), unmapped on destruction.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
      if (p != MAP_FAILED) {
        data_ = static_cast<const uint8_t*>(p);
        size_ = static_cast<size_t>(st.st_size);
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  size_t size() const { return size_; }
  bool in_bounds(uint64_t off, uint64_t len) const {
    return data_ && off <= size_ && len <= size_ - off;
  }
  // Pointer to `count` objects of T at `off`, or nullptr when out of bounds.
  template <typename T>
  const T* at(uint64_t off, uint64_t count = 1) const {
    if (count > size_ / sizeof(T) + 1) return nullptr;
    if (!in_bounds(off, count * sizeof(T))) return nullptr;
    return reinterpret_cast<const T*>(data_ + off);  // ELF structures are naturally aligned
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

const Elf64_Ehdr* elf_header(const MappedFile& f) {
  auto* eh = f.at<Elf64_Ehdr>(0);
  if (!eh || std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
    return nullptr;
  if (eh->e_type != ET_EXEC && eh->e_type != ET_DYN) return nullptr;
  return eh;
}

std::vector<Elf64_Phdr> load_segments(const MappedFile& f, const Elf64_Ehdr& eh) {
  std::vector<Elf64_Phdr> out;
  if (eh.e_phentsize != sizeof(Elf64_Phdr)) return out;
  auto* ph = f.at<Elf64_Phdr>(eh.e_phoff, eh.e_phnum);
  if (!ph) return out;
  for (unsigned i = 0; i < eh.e_phnum; ++i)
    if (ph[i].p_type == PT_LOAD) out.push_back(ph[i]);
  return out;
}

// What from_memory_map needs to know about a file before loading its symbols.
struct ElfLayout {
  uint16_t type = 0;
  std::vector<Elf64_Phdr> loads;
};

std::optional<ElfLayout> read_layout(const std::string& path) {
  MappedFile f(path);
  auto* eh = elf_header(f);
  if (!eh) return std::nullopt;
  ElfLayout layout{eh->e_type, load_segments(f, *eh)};
  if (layout.loads.empty()) return std::nullopt;
  return layout;
}

// The PT_LOAD segment that maps file offset `off` at a page boundary; prefers executable ones.
const Elf64_Phdr* segment_for_offset(const ElfLayout& l, uint64_t off, bool want_exec) {
  const Elf64_Phdr* best = nullptr;
  for (auto& ph : l.loads) {
    uint64_t first = ph.p_offset & ~(kPage - 1);
    if (off < first || off >= ph.p_offset + std::max<uint64_t>(ph.p_filesz, 1)) continue;
    if (!best || (want_exec && (ph.p_flags & PF_X) && !(best->p_flags & PF_X))) best = &ph;
  }
  return best;
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int leading_underscores(std::string_view s) {
  int n = 0;
  while (n < static_cast<int>(s.size()) && s[n] == '_') ++n;
  return n;
}

int binding_rank(unsigned char info) {
  switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

struct RawSymbol {
  uint64_t addr, size, sec_end;
  std::string_view name;
  int rank_bind;
};

// True if a is a better name than b for the same address.
bool better_name(const RawSymbol& a, const RawSymbol& b) {
  int ua = leading_underscores(a.name), ub = leading_underscores(b.name);
  if (ua != ub) return ua < ub;
  if (a.rank_bind != b.rank_bind) return a.rank_bind < b.rank_bind;
  if (a.name.size() != b.name.size()) return a.name.size() < b.name.size();
  return a.name < b.name;
}

// PLT stubs have no symbols of their own; name them as GDB and objdump do: "puts@plt". Entry k
// of .rela.plt belongs to the k-th 16-byte stub of .plt.sec (IBT builds) or, without it, of
// .plt after its 16-byte header.
void collect_plt_symbols(const MappedFile& f, const Elf64_Ehdr& eh, const Elf64_Shdr* sh, uint64_t shnum,
                         std::vector<RawSymbol>& out, std::deque<std::string>& names) {
  if (eh.e_shstrndx >= shnum) return;
  const Elf64_Shdr& shstr = sh[eh.e_shstrndx];
  const char* shnames = f.at<char>(shstr.sh_offset, shstr.sh_size);
  if (!shnames) return;
  auto name_of = [&](const Elf64_Shdr& s) -> std::string_view {
    if (s.sh_name >= shstr.sh_size) return {};
    return std::string_view(shnames + s.sh_name, strnlen(shnames + s.sh_name, shstr.sh_size - s.sh_name));
  };
  const Elf64_Shdr *rela = nullptr, *plt = nullptr, *plt_sec = nullptr;
  for (uint64_t i = 0; i < shnum; ++i) {
    auto n = name_of(sh[i]);
    if (n == ".rela.plt" && sh[i].sh_type == SHT_RELA) rela = &sh[i];
    else if (n == ".plt") plt = &sh[i];
    else if (n == ".plt.sec") plt_sec = &sh[i];
  }
  if (!rela || (!plt && !plt_sec) || rela->sh_entsize != sizeof(Elf64_Rela) || rela->sh_link >= shnum) return;
  const Elf64_Shdr& dynsym = sh[rela->sh_link];
  if (dynsym.sh_entsize != sizeof(Elf64_Sym) || dynsym.sh_link >= shnum) return;
  const Elf64_Shdr& dynstr = sh[dynsym.sh_link];
  uint64_t nrela = rela->sh_size / sizeof(Elf64_Rela), nsyms = dynsym.sh_size / sizeof(Elf64_Sym);
  auto* relas = f.at<Elf64_Rela>(rela->sh_offset, nrela);
  auto* syms = f.at<Elf64_Sym>(dynsym.sh_offset, nsyms);
  const char* strtab = f.at<char>(dynstr.sh_offset, dynstr.sh_size);
  if (!relas || !syms || !strtab) return;
  const Elf64_Shdr& stubs = plt_sec ? *plt_sec : *plt;
  uint64_t first = stubs.sh_addr + (plt_sec ? 0 : 16), end = stubs.sh_addr + stubs.sh_size;
  for (uint64_t k = 0; k < nrela; ++k) {
    uint64_t addr = first + 16 * k, sym = ELF64_R_SYM(relas[k].r_info);
    if (addr + 16 > end) break;
    if (sym == 0 || sym >= nsyms || syms[sym].st_name >= dynstr.sh_size) continue;  // IRELATIVE: no name
    const char* name = strtab + syms[sym].st_name;
    size_t len = strnlen(name, dynstr.sh_size - syms[sym].st_name);
    if (len == 0 || len == dynstr.sh_size - syms[sym].st_name) continue;
    names.push_back(std::string(name, len) + "@plt");
    out.push_back({addr, 16, end, names.back(), 0});
  }
}

void collect_symbols(const MappedFile& f, const Elf64_Ehdr& eh, std::vector<RawSymbol>& out,
                     std::deque<std::string>& names) {
  if (eh.e_shoff == 0 || eh.e_shentsize != sizeof(Elf64_Shdr)) return;
  uint64_t shnum = eh.e_shnum;
  if (shnum == 0) {  // extended numbering: the count lives in section 0
    auto* s0 = f.at<Elf64_Shdr>(eh.e_shoff);
    if (!s0) return;
    shnum = s0->sh_size;
  }
  auto* sh = f.at<Elf64_Shdr>(eh.e_shoff, shnum);
  if (!sh) return;
  for (uint64_t i = 0; i < shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= shnum) continue;
    const Elf64_Shdr& strsec = sh[sh[i].sh_link];
    if (strsec.sh_type != SHT_STRTAB || !f.in_bounds(strsec.sh_offset, strsec.sh_size)) continue;
    const char* strtab = f.at<char>(strsec.sh_offset, strsec.sh_size);
    uint64_t nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
    auto* syms = f.at<Elf64_Sym>(sh[i].sh_offset, nsyms);
    if (!syms || !strtab) continue;
    for (uint64_t k = 1; k < nsyms; ++k) {
      const Elf64_Sym& s = syms[k];
      unsigned type = ELF64_ST_TYPE(s.st_info);
      bool wanted = type == STT_FUNC || type == STT_GNU_IFUNC || (type == STT_NOTYPE && s.st_size);
      if (!wanted || s.st_shndx == SHN_UNDEF || s.st_name >= strsec.sh_size) continue;
      if (s.st_value == 0 && s.st_shndx == SHN_ABS) continue;
      const char* name = strtab + s.st_name;
      size_t len = strnlen(name, strsec.sh_size - s.st_name);
      if (len == 0 || len == strsec.sh_size - s.st_name) continue;  // empty or unterminated
      uint64_t sec_end = 0;
      if (s.st_shndx < shnum && s.st_shndx < SHN_LORESERVE) {
        const Elf64_Shdr& sec = sh[s.st_shndx];
        sec_end = sec.sh_addr + sec.sh_size;
      }
      out.push_back({s.st_value, s.st_size, sec_end, std::string_view(name, len),
                     binding_rank(s.st_info)});
    }
  }
  collect_plt_symbols(f, eh, sh, shnum, out, names);
}

}  // namespace

std::optional<Symbolizer::Module> Symbolizer::load(const std::string& path, uint64_t bias) {
  MappedFile f(path);
  auto* eh = elf_header(f);
  if (!eh) return std::nullopt;
  Module m;
  m.path = path;
  m.short_name = base_name(path);
  m.bias = bias;
  auto loads = load_segments(f, *eh);
  if (!loads.empty()) {
    m.lo = UINT64_MAX;
    for (auto& ph : loads) {
      m.lo = std::min(m.lo, ph.p_vaddr);
      m.hi = std::max(m.hi, ph.p_vaddr + ph.p_memsz);
    }
  }

  std::vector<RawSymbol> raw;
  std::deque<std::string> made_names;  // "x@plt": alive until the names are copied below
  collect_symbols(f, *eh, raw, made_names);
  // Sort by address, then best name first; keep one entry per address (the best name, and the
  // largest known size among aliases).
  std::sort(raw.begin(), raw.end(), [](const RawSymbol& a, const RawSymbol& b) {
    if (a.addr != b.addr) return a.addr < b.addr;
    return better_name(a, b);
  });
  std::map<std::string_view, uint32_t> name_index;
  std::vector<bool> unsized;
  for (size_t i = 0; i < raw.size();) {
    size_t j = i;
    uint64_t size = 0, sec_end = 0;
    for (; j < raw.size() && raw[j].addr == raw[i].addr; ++j) {
      size = std::max(size, raw[j].size);
      sec_end = std::max(sec_end, raw[j].sec_end);
    }
    auto [it, fresh] = name_index.try_emplace(raw[i].name, static_cast<uint32_t>(m.names.size()));
    if (fresh) m.names.emplace_back(raw[i].name);
    uint64_t end = raw[i].addr + size;
    if (size == 0) {  // size 0: up to its section's end (or a fixed bound); trimmed below
      end = sec_end > raw[i].addr ? sec_end : raw[i].addr + kMaxSizeZeroSpan;
      if (m.hi > raw[i].addr) end = std::min(end, m.hi);
    }
    if (end < raw[i].addr) end = UINT64_MAX;  // wrap-around: treat as open-ended
    m.symbols.push_back({raw[i].addr, end, it->second});
    unsized.push_back(size == 0);
    i = j;
  }
  // Size-0 symbols stop at the next symbol.
  for (size_t i = 0; i + 1 < m.symbols.size(); ++i)
    if (unsized[i]) m.symbols[i].end = std::min(m.symbols[i].end, m.symbols[i + 1].addr);
  return m;
}

void Symbolizer::add_module(const std::string& path, uint64_t load_bias) {
  auto m = load(path, load_bias);
  if (!m) return;
  for (auto& existing : modules_)
    if (existing.path == path) {
      existing = std::move(*m);
      return;
    }
  modules_.push_back(std::move(*m));
}

std::unordered_map<std::string, ElfSymbolValue> read_elf_symbol_values(const std::string& path) {
  std::unordered_map<std::string, ElfSymbolValue> out;
  MappedFile f(path);
  auto* eh = elf_header(f);
  if (!eh || eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr)) return out;
  uint64_t shnum = eh->e_shnum;
  if (shnum == 0) {  // extended numbering: the count lives in section 0
    auto* s0 = f.at<Elf64_Shdr>(eh->e_shoff);
    if (!s0) return out;
    shnum = s0->sh_size;
  }
  auto* sh = f.at<Elf64_Shdr>(eh->e_shoff, shnum);
  if (!sh) return out;
  for (uint64_t i = 0; i < shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM) continue;
    if (sh[i].sh_entsize != sizeof(Elf64_Sym) || sh[i].sh_link >= shnum) continue;
    const Elf64_Shdr& strsec = sh[sh[i].sh_link];
    if (strsec.sh_type != SHT_STRTAB) continue;
    const char* strtab = f.at<char>(strsec.sh_offset, strsec.sh_size);
    uint64_t nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
    auto* syms = f.at<Elf64_Sym>(sh[i].sh_offset, nsyms);
    if (!syms || !strtab) continue;
    for (uint64_t k = 1; k < nsyms; ++k) {
      const Elf64_Sym& s = syms[k];
      unsigned type = ELF64_ST_TYPE(s.st_info);
      // TLS values are offsets in the TLS block, absolute ones are not relocated: no addresses.
      if (type == STT_SECTION || type == STT_FILE || type == STT_TLS) continue;
      if (s.st_shndx == SHN_UNDEF || s.st_shndx == SHN_ABS || s.st_name >= strsec.sh_size) continue;
      const char* name = strtab + s.st_name;
      size_t len = strnlen(name, strsec.sh_size - s.st_name);
      if (len == 0 || len == strsec.sh_size - s.st_name) continue;  // empty or unterminated
      bool global = ELF64_ST_BIND(s.st_info) != STB_LOCAL;
      auto [it, fresh] = out.try_emplace(std::string(name, len), ElfSymbolValue{s.st_value, global});
      if (!fresh && global && !it->second.global) it->second = ElfSymbolValue{s.st_value, global};
    }
  }
  return out;
}

std::vector<LoadedModule> Symbolizer::loaded_modules(const std::vector<MemoryRegion>& regions) {
  std::vector<LoadedModule> out;
  std::vector<std::string> done;
  for (const MemoryRegion& r : regions) {
    if (!r.exec || r.name.empty() || r.name[0] != '/') continue;
    if (std::find(done.begin(), done.end(), r.name) != done.end()) continue;
    done.push_back(r.name);

    std::string path = r.name;
    bool deleted = path.size() > kDeleted.size() && path.ends_with(kDeleted);
    if (deleted) path.resize(path.size() - kDeleted.size());
    auto layout = read_layout(path);
    if (!layout) continue;

    // The reference mapping: this one if its file offset is known, else the file's lowest
    // mapping, which maps offset 0 (the first PT_LOAD) in every ordinary loader layout.
    const MemoryRegion* ref = &r;
    if (r.offset == 0)
      for (const MemoryRegion& o : regions)
        if (o.name == r.name && o.start < ref->start) ref = &o;
    uint64_t bias = 0;
    if (layout->type == ET_DYN) {
      const Elf64_Phdr* seg = segment_for_offset(*layout, ref->offset, ref->exec);
      if (!seg) continue;
      bias = ref->start - ref->offset - (seg->p_vaddr - seg->p_offset);
    }
    if (deleted) {  // the path may now hold another file: accept only a matching layout
      bool match = false;
      for (auto& ph : layout->loads) {
        uint64_t lo = (ph.p_vaddr & ~(kPage - 1)) + bias;
        uint64_t hi = ((ph.p_vaddr + ph.p_memsz + kPage - 1) & ~(kPage - 1)) + bias;
        if ((ph.p_flags & PF_X) && r.start == lo && r.end == hi) match = true;
      }
      if (!match) continue;
    }
    out.push_back(LoadedModule{r.name, path, bias});
  }
  return out;
}

Symbolizer Symbolizer::from_memory_map(const std::vector<MemoryRegion>& regions) {
  Symbolizer out;
  for (const LoadedModule& lm : loaded_modules(regions)) {
    auto m = load(lm.file, lm.bias);
    if (!m) continue;
    m->path = lm.name;
    m->short_name = base_name(lm.file);
    out.modules_.push_back(std::move(*m));
  }
  return out;
}

const Symbolizer::Module* Symbolizer::module_for(uint64_t addr) const {
  for (auto& m : modules_)
    if (addr >= m.lo + m.bias && addr < m.hi + m.bias) return &m;
  return nullptr;
}

std::optional<SymbolHit> Symbolizer::lookup(uint64_t addr) const {
  // Modules may overlap only through bad input; the first one with a hit wins.
  for (auto& m : modules_) {
    uint64_t a = addr - m.bias;  // link-time address (wraps harmlessly for foreign addresses)
    auto it = std::upper_bound(m.symbols.begin(), m.symbols.end(), a,
                               [](uint64_t v, const Symbol& s) { return v < s.addr; });
    // The nearest symbol at or below a; a few earlier ones may enclose it (nested symbols).
    for (int tries = 0; it != m.symbols.begin() && tries < 4; ++tries) {
      --it;
      if (a < it->end) return SymbolHit{m.names[it->name], a - it->addr, m.short_name};
    }
  }
  return std::nullopt;
}

std::string Symbolizer::describe(uint64_t addr) const {
  if (auto hit = lookup(addr)) {
    if (hit->offset == 0) return hit->name;
    return fmt::format("{}+{:#x}", hit->name, hit->offset);
  }
  if (auto* m = module_for(addr)) return fmt::format("{}+{:#x}", m->short_name, addr - m->bias);
  return fmt::format("{:#x}", addr);
}

std::optional<uint64_t> Symbolizer::address_of(const std::string& name) const {
  for (auto& m : modules_)
    for (auto& s : m.symbols)
      if (m.names[s.name] == name) return s.addr + m.bias;
  return std::nullopt;
}

std::optional<std::pair<uint64_t, uint64_t>> Symbolizer::range_of(const std::string& name) const {
  for (auto& m : modules_)
    for (auto& s : m.symbols)
      if (m.names[s.name] == name) return std::pair{s.addr + m.bias, s.end + m.bias};
  return std::nullopt;
}

}  // namespace backend
