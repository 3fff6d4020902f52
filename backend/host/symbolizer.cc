#include "backend/host/symbolizer.h"

#include <elf.h>

#include <algorithm>
#include <deque>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "backend/host/elf_file.h"

namespace backend {
namespace {

constexpr uint64_t kPage = 4096;
constexpr std::string_view kDeleted = " (deleted)";
constexpr uint64_t kMaxSizeZeroSpan = 1 << 20;  // bound for size-0 symbols without a section

// An ELF file the symbolizer can place in an address space: an executable or a shared object.
std::optional<ElfFile> open_loadable(const std::string& path) {
  auto f = ElfFile::open(path);
  if (!f || (f->type() != ET_EXEC && f->type() != ET_DYN)) return std::nullopt;
  return f;
}

// The PT_LOAD segment that maps file offset `off` at a page boundary; prefers executable ones.
const ElfSegment* segment_for_offset(const std::vector<ElfSegment>& loads, uint64_t off, bool want_exec) {
  const ElfSegment* best = nullptr;
  for (auto& seg : loads) {
    uint64_t first = seg.offset & ~(kPage - 1);
    if (off < first || off >= seg.offset + std::max<uint64_t>(seg.filesz, 1)) continue;
    if (!best || (want_exec && seg.exec && !best->exec)) best = &seg;
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

int binding_rank(uint8_t bind) {
  switch (bind) {
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

// FUNC, IFUNC and sized NOTYPE symbols of .symtab and .dynsym, then the PLT stubs, which have no
// symbols of their own: named as GDB and objdump do, "puts@plt".
void collect_symbols(const ElfFile& f, std::vector<RawSymbol>& out, std::deque<std::string>& names) {
  const auto& sections = f.sections();
  f.for_each_symbol(ElfSymbols::both, [&](const ElfSymbol& s) {
    bool wanted = s.type == STT_FUNC || s.type == STT_GNU_IFUNC || (s.type == STT_NOTYPE && s.size);
    if (!wanted || s.shndx == SHN_UNDEF || s.name.empty()) return;
    if (s.value == 0 && s.shndx == SHN_ABS) return;
    uint64_t sec_end = 0;
    if (s.shndx < sections.size() && s.shndx < SHN_LORESERVE)
      sec_end = sections[s.shndx].addr + sections[s.shndx].size;
    out.push_back({s.value, s.size, sec_end, s.name, binding_rank(s.bind)});
  });
  for (const ElfPltStub& stub : f.plt_stubs()) {
    names.push_back(std::string(stub.name) + "@plt");
    out.push_back({stub.addr, 16, stub.section_end, names.back(), 0});
  }
}

}  // namespace

std::optional<Symbolizer::Module> Symbolizer::load(const std::string& path, uint64_t bias) {
  auto f = open_loadable(path);
  if (!f) return std::nullopt;
  Module m;
  m.path = path;
  m.short_name = base_name(path);
  m.bias = bias;
  if (!f->loads().empty()) {
    m.lo = UINT64_MAX;
    for (auto& seg : f->loads()) {
      m.lo = std::min(m.lo, seg.vaddr);
      m.hi = std::max(m.hi, seg.vaddr + seg.memsz);
    }
  }

  std::vector<RawSymbol> raw;
  std::deque<std::string> made_names;  // "x@plt": alive until the names are copied below
  collect_symbols(*f, raw, made_names);  // views into *f and made_names, copied below
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
  auto f = open_loadable(path);
  if (!f) return out;
  f->for_each_symbol(ElfSymbols::both, [&](const ElfSymbol& s) {
    // TLS values are offsets in the TLS block, absolute ones are not relocated: no addresses.
    if (s.type == STT_SECTION || s.type == STT_FILE || s.type == STT_TLS) return;
    if (s.shndx == SHN_UNDEF || s.shndx == SHN_ABS || s.name.empty()) return;
    bool global = s.bind != STB_LOCAL;
    auto [it, fresh] = out.try_emplace(std::string(s.name), ElfSymbolValue{s.value, global});
    if (!fresh && global && !it->second.global) it->second = ElfSymbolValue{s.value, global};
  });
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
    auto elf = open_loadable(path);
    if (!elf || elf->loads().empty()) continue;

    // The reference mapping: this one if its file offset is known, else the file's lowest
    // mapping, which maps offset 0 (the first PT_LOAD) in every ordinary loader layout.
    const MemoryRegion* ref = &r;
    if (r.offset == 0)
      for (const MemoryRegion& o : regions)
        if (o.name == r.name && o.start < ref->start) ref = &o;
    uint64_t bias = 0;
    if (elf->type() == ET_DYN) {
      const ElfSegment* seg = segment_for_offset(elf->loads(), ref->offset, ref->exec);
      if (!seg) continue;
      bias = ref->start - ref->offset - (seg->vaddr - seg->offset);
    }
    if (deleted) {  // the path may now hold another file: accept only a matching layout
      bool match = false;
      for (auto& seg : elf->loads()) {
        uint64_t lo = (seg.vaddr & ~(kPage - 1)) + bias;
        uint64_t hi = ((seg.vaddr + seg.memsz + kPage - 1) & ~(kPage - 1)) + bias;
        if (seg.exec && r.start == lo && r.end == hi) match = true;
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
