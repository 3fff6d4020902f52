#include "backend/coverage/dwarf_line.h"

#include <cstring>
#include <optional>

#include "backend/host/elf_file.h"

namespace backend {

namespace {

// DWARF constants (DWARF 5 standard, section 7).
enum : uint32_t {
  kFormAddr = 0x01, kFormBlock2 = 0x03, kFormBlock4 = 0x04, kFormData2 = 0x05, kFormData4 = 0x06,
  kFormData8 = 0x07, kFormString = 0x08, kFormBlock = 0x09, kFormBlock1 = 0x0a, kFormData1 = 0x0b,
  kFormFlag = 0x0c, kFormSdata = 0x0d, kFormStrp = 0x0e, kFormUdata = 0x0f, kFormRefAddr = 0x10,
  kFormRef1 = 0x11, kFormRef2 = 0x12, kFormRef4 = 0x13, kFormRef8 = 0x14, kFormRefUdata = 0x15,
  kFormIndirect = 0x16, kFormSecOffset = 0x17, kFormExprloc = 0x18, kFormFlagPresent = 0x19,
  kFormStrx = 0x1a, kFormAddrx = 0x1b, kFormRefSup4 = 0x1c, kFormStrpSup = 0x1d, kFormData16 = 0x1e,
  kFormLineStrp = 0x1f, kFormRefSig8 = 0x20, kFormImplicitConst = 0x21, kFormLoclistx = 0x22,
  kFormRnglistx = 0x23, kFormRefSup8 = 0x24, kFormStrx1 = 0x25, kFormStrx2 = 0x26, kFormStrx3 = 0x27,
  kFormStrx4 = 0x28, kFormAddrx1 = 0x29, kFormAddrx2 = 0x2a, kFormAddrx3 = 0x2b, kFormAddrx4 = 0x2c,
  kFormGnuAddrIndex = 0x1f01, kFormGnuStrIndex = 0x1f02, kFormGnuRefAlt = 0x1f20, kFormGnuStrpAlt = 0x1f21,
};
enum : uint32_t { kAtName = 0x03, kAtStmtList = 0x10, kAtCompDir = 0x1b };
enum : uint32_t { kLnctPath = 1, kLnctDirectoryIndex = 2 };
enum : uint8_t {
  kLnsCopy = 1, kLnsAdvancePc, kLnsAdvanceLine, kLnsSetFile, kLnsSetColumn, kLnsNegateStmt,
  kLnsSetBasicBlock, kLnsConstAddPc, kLnsFixedAdvancePc, kLnsSetPrologueEnd, kLnsSetEpilogueBegin, kLnsSetIsa,
};
enum : uint8_t { kLneEndSequence = 1, kLneSetAddress = 2, kLneDefineFile = 3, kLneSetDiscriminator = 4 };

// Bounds-checked little-endian reads; a read past the end clears ok() and yields zeros.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> data, uint64_t pos = 0) : data_(data), pos_(pos) {
    if (pos > data.size()) ok_ = false;
  }
  bool ok() const { return ok_; }
  uint64_t pos() const { return pos_; }
  bool at_end() const { return pos_ >= data_.size(); }
  void seek(uint64_t pos) {
    if (pos > data_.size()) ok_ = false;
    else pos_ = pos;
  }
  void skip(uint64_t n) { seek(n > data_.size() ? data_.size() + 1 : pos_ + n); }
  uint64_t fixed(unsigned n) {
    if (!ok_ || n > data_.size() - pos_) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i) v |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(fixed(1)); }
  uint16_t u16() { return static_cast<uint16_t>(fixed(2)); }
  uint32_t u32() { return static_cast<uint32_t>(fixed(4)); }
  uint64_t u64() { return fixed(8); }
  uint64_t uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      uint8_t b = u8();
      if (!ok_) return 0;
      if (shift < 64) v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  int64_t sleb() {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
      b = u8();
      if (!ok_) return 0;
      if (shift < 64) v |= int64_t(b & 0x7f) << shift;
      shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40)) v |= -(int64_t{1} << shift);
    return v;
  }
  std::string cstr() {
    if (!ok_) return {};
    const void* nul = std::memchr(data_.data() + pos_, 0, data_.size() - pos_);
    if (!nul) {
      ok_ = false;
      return {};
    }
    size_t len = static_cast<const uint8_t*>(nul) - (data_.data() + pos_);
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), len);
    pos_ += len + 1;
    return s;
  }
  // An initial length: 32-bit, or 0xffffffff then 64-bit (64-bit DWARF). Sets offset_size.
  uint64_t initial_length(unsigned& offset_size) {
    uint64_t len = u32();
    offset_size = 4;
    if (len == 0xffffffff) {
      len = u64();
      offset_size = 8;
    }
    return len;
  }

 private:
  std::span<const uint8_t> data_;
  uint64_t pos_ = 0;
  bool ok_ = true;
};

std::string string_at(std::span<const uint8_t> section, uint64_t offset) {
  if (offset >= section.size()) return {};
  const char* s = reinterpret_cast<const char*>(section.data() + offset);
  return std::string(s, strnlen(s, section.size() - offset));
}

struct FormValue {
  uint64_t number = 0;
  std::optional<std::string> text;
};

// Reads (or skips) one attribute value of `form`.
FormValue read_form(Cursor& c, uint32_t form, unsigned offset_size, unsigned address_size, unsigned version,
                    const DebugSections& s, int64_t implicit = 0) {
  FormValue v;
  switch (form) {
    case kFormAddr: v.number = c.fixed(address_size); break;
    case kFormBlock2: c.skip(c.u16()); break;
    case kFormBlock4: c.skip(c.u32()); break;
    case kFormData2: case kFormRef2: case kFormStrx2: case kFormAddrx2: v.number = c.u16(); break;
    case kFormData4: case kFormRef4: case kFormRefSup4: case kFormStrx4: case kFormAddrx4: v.number = c.u32(); break;
    case kFormData8: case kFormRef8: case kFormRefSig8: case kFormRefSup8: v.number = c.u64(); break;
    case kFormStrx3: case kFormAddrx3: v.number = c.fixed(3); break;
    case kFormData16: c.skip(16); break;
    case kFormString: v.text = c.cstr(); break;
    case kFormBlock: case kFormExprloc: c.skip(c.uleb()); break;
    case kFormBlock1: c.skip(c.u8()); break;
    case kFormData1: case kFormRef1: case kFormFlag: case kFormStrx1: case kFormAddrx1: v.number = c.u8(); break;
    case kFormSdata: v.number = static_cast<uint64_t>(c.sleb()); break;
    case kFormUdata: case kFormRefUdata: case kFormStrx: case kFormAddrx: case kFormLoclistx: case kFormRnglistx:
    case kFormGnuAddrIndex: case kFormGnuStrIndex:
      v.number = c.uleb();
      break;
    case kFormStrp: v.number = c.fixed(offset_size); v.text = string_at(s.str, v.number); break;
    case kFormLineStrp: v.number = c.fixed(offset_size); v.text = string_at(s.line_str, v.number); break;
    case kFormRefAddr: v.number = c.fixed(version <= 2 ? address_size : offset_size); break;
    case kFormSecOffset: case kFormStrpSup: case kFormGnuRefAlt: case kFormGnuStrpAlt: v.number = c.fixed(offset_size); break;
    case kFormFlagPresent: v.number = 1; break;
    case kFormImplicitConst: v.number = static_cast<uint64_t>(implicit); break;
    case kFormIndirect: return read_form(c, static_cast<uint32_t>(c.uleb()), offset_size, address_size, version, s);
    default: c.seek(UINT64_MAX); break;  // unknown form: the unit cannot be read on
  }
  return v;
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (name.empty() || name[0] == '/' || dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// One line-number program: its rows appended to `out`.
void parse_unit(Cursor& c, const DebugSections& s, const std::map<uint64_t, std::string>& comp_dirs, LineTable& out,
                std::map<std::string, uint32_t>& file_ids) {
  uint64_t unit_offset = c.pos();
  unsigned offset_size = 4;
  uint64_t length = c.initial_length(offset_size);
  uint64_t unit_end = c.pos() + length;
  if (!c.ok() || length == 0) return c.seek(UINT64_MAX);
  uint16_t version = c.u16();
  if (version < 2 || version > 5) return c.seek(unit_end);
  unsigned address_size = 8;
  if (version >= 5) {
    address_size = c.u8();
    c.u8();  // segment_selector_size
  }
  uint64_t header_length = c.fixed(offset_size);
  uint64_t program = c.pos() + header_length;
  uint8_t min_insn = c.u8();
  if (version >= 4) c.u8();  // maximum_operations_per_instruction (VLIW only)
  bool default_is_stmt = c.u8() != 0;
  int8_t line_base = static_cast<int8_t>(c.u8());
  uint8_t line_range = c.u8();
  uint8_t opcode_base = c.u8();
  std::vector<uint8_t> opcode_lengths(opcode_base ? opcode_base - 1 : 0);
  for (auto& n : opcode_lengths) n = c.u8();
  if (!c.ok() || line_range == 0 || opcode_base == 0) return c.seek(unit_end);

  std::vector<std::string> dirs;
  std::vector<std::string> files;  // full paths, indexed as the program refers to them
  auto comp_dir = comp_dirs.find(unit_offset);
  if (version >= 5) {
    auto entries = [&](bool directories) {
      uint8_t format_count = c.u8();
      std::vector<std::pair<uint32_t, uint32_t>> format(format_count);
      for (auto& f : format) {
        f.first = static_cast<uint32_t>(c.uleb());
        f.second = static_cast<uint32_t>(c.uleb());
      }
      uint64_t count = c.uleb();
      for (uint64_t i = 0; i < count && c.ok(); ++i) {
        std::string path;
        uint64_t dir = 0;
        for (auto [type, form] : format) {
          FormValue v = read_form(c, form, offset_size, address_size, version, s);
          if (type == kLnctPath && v.text) path = *v.text;
          else if (type == kLnctDirectoryIndex) dir = v.number;
        }
        if (directories) {
          // Directory 0 is the compilation directory; the others may be relative to it.
          dirs.push_back(dirs.empty() ? path : join_path(dirs[0], path));
        } else {
          files.push_back(join_path(dir < dirs.size() ? dirs[dir] : std::string(), path));
        }
      }
    };
    entries(true);
    entries(false);
  } else {
    std::string comp = comp_dir != comp_dirs.end() ? comp_dir->second : std::string();
    dirs.push_back(comp);  // index 0: the compilation directory
    for (std::string d = c.cstr(); c.ok() && !d.empty(); d = c.cstr()) dirs.push_back(join_path(comp, d));
    files.push_back(std::string());  // file numbers start at 1
    for (std::string f = c.cstr(); c.ok() && !f.empty(); f = c.cstr()) {
      uint64_t dir = c.uleb();
      c.uleb();  // mtime
      c.uleb();  // length
      files.push_back(join_path(dir < dirs.size() ? dirs[dir] : std::string(), f));
    }
  }
  if (!c.ok()) return c.seek(unit_end);
  c.seek(program);

  auto file_id = [&](uint64_t index) -> uint32_t {
    std::string path = index < files.size() ? files[index] : std::string("<unknown file>");
    auto [it, fresh] = file_ids.try_emplace(path, static_cast<uint32_t>(out.files.size()));
    if (fresh) out.files.push_back(path);
    return it->second;
  };
  // The state machine (DWARF 5, 6.2.2).
  uint64_t address = 0, file = 1, line = 1, column = 0;
  bool is_stmt = default_is_stmt;
  auto reset = [&] {
    address = 0;
    file = 1;
    line = 1;
    column = 0;
    is_stmt = default_is_stmt;
  };
  auto emit = [&](bool end_sequence) {
    out.rows.push_back(LineRow{address, file_id(file), static_cast<uint32_t>(line), static_cast<uint32_t>(column),
                               is_stmt, end_sequence});
  };
  while (c.ok() && c.pos() < unit_end) {
    uint8_t op = c.u8();
    if (op >= opcode_base) {
      uint8_t adjusted = op - opcode_base;
      address += static_cast<uint64_t>(adjusted / line_range) * min_insn;
      line += static_cast<int64_t>(line_base) + adjusted % line_range;
      emit(false);
      continue;
    }
    switch (op) {
      case 0: {
        uint64_t len = c.uleb();
        uint64_t next = c.pos() + len;
        if (len == 0) break;
        uint8_t sub = c.u8();
        if (sub == kLneEndSequence) {
          emit(true);
          reset();
        } else if (sub == kLneSetAddress) {
          address = c.fixed(static_cast<unsigned>(std::min<uint64_t>(len - 1, 8)));
        } else if (sub == kLneDefineFile) {
          std::string f = c.cstr();
          uint64_t dir = c.uleb();
          files.push_back(join_path(dir < dirs.size() ? dirs[dir] : std::string(), f));
        }
        c.seek(next);  // set_discriminator and unknown ones: skipped
        break;
      }
      case kLnsCopy: emit(false); break;
      case kLnsAdvancePc: address += c.uleb() * min_insn; break;
      case kLnsAdvanceLine: line += c.sleb(); break;
      case kLnsSetFile: file = c.uleb(); break;
      case kLnsSetColumn: column = c.uleb(); break;
      case kLnsNegateStmt: is_stmt = !is_stmt; break;
      case kLnsSetBasicBlock: case kLnsSetPrologueEnd: case kLnsSetEpilogueBegin: break;
      case kLnsConstAddPc: address += static_cast<uint64_t>((255u - opcode_base) / line_range) * min_insn; break;
      case kLnsFixedAdvancePc: address += c.u16(); break;
      default:  // an opcode this reader does not know: skip its operands as the header says
        for (uint8_t i = 0; i < opcode_lengths[op - 1]; ++i) c.uleb();
        break;
    }
  }
  c.seek(unit_end);
}

}  // namespace

std::map<uint64_t, std::string> comp_dirs_of(const DebugSections& s) {
  std::map<uint64_t, std::string> out;
  Cursor c(s.info);
  while (c.ok() && !c.at_end()) {
    unsigned offset_size = 4;
    uint64_t length = c.initial_length(offset_size);
    uint64_t unit_end = c.pos() + length;
    if (!c.ok() || length == 0) break;
    uint16_t version = c.u16();
    uint64_t abbrev_offset = 0;
    unsigned address_size = 8;
    if (version >= 5) {
      uint8_t unit_type = c.u8();
      address_size = c.u8();
      abbrev_offset = c.fixed(offset_size);
      if (unit_type == 4 || unit_type == 5) c.u64();  // skeleton / split_compile: dwo_id
      if (unit_type == 2 || unit_type == 6) {         // type units: signature, type offset
        c.u64();
        c.fixed(offset_size);
      }
    } else if (version >= 2) {
      abbrev_offset = c.fixed(offset_size);
      address_size = c.u8();
    }
    if (version < 2 || version > 5 || !c.ok()) {
      c.seek(unit_end);
      continue;
    }
    uint64_t code = c.uleb();
    // Find the abbreviation of the unit's first DIE.
    Cursor a(s.abbrev, abbrev_offset);
    std::vector<std::tuple<uint32_t, uint32_t, int64_t>> attrs;
    bool found = false;
    while (a.ok() && !a.at_end()) {
      uint64_t acode = a.uleb();
      if (acode == 0) break;
      a.uleb();  // tag
      a.u8();    // children
      std::vector<std::tuple<uint32_t, uint32_t, int64_t>> list;
      while (a.ok()) {
        uint32_t at = static_cast<uint32_t>(a.uleb()), form = static_cast<uint32_t>(a.uleb());
        int64_t implicit = form == kFormImplicitConst ? a.sleb() : 0;
        if (at == 0 && form == 0) break;
        list.emplace_back(at, form, implicit);
      }
      if (acode == code) {
        attrs = std::move(list);
        found = true;
        break;
      }
    }
    if (found) {
      std::optional<uint64_t> stmt_list;
      std::string comp_dir;
      for (auto [at, form, implicit] : attrs) {
        FormValue v = read_form(c, form, offset_size, address_size, version, s, implicit);
        if (!c.ok()) break;
        if (at == kAtStmtList) stmt_list = v.number;
        else if (at == kAtCompDir && v.text) comp_dir = *v.text;
      }
      if (stmt_list && !comp_dir.empty()) out[*stmt_list] = comp_dir;
    }
    Cursor next(s.info);
    next.seek(unit_end);
    if (!next.ok()) break;
    c = next;
  }
  return out;
}

LineTable parse_line_table(const DebugSections& s, const std::map<uint64_t, std::string>& comp_dirs) {
  LineTable out;
  std::map<std::string, uint32_t> file_ids;
  Cursor c(s.line);
  while (c.ok() && !c.at_end()) parse_unit(c, s, comp_dirs, out, file_ids);
  return out;
}

LineTable read_line_table(const ElfFile& elf) {
  DebugSections s{elf.section(".debug_line"), elf.section(".debug_line_str"), elf.section(".debug_str"),
                  elf.section(".debug_info"), elf.section(".debug_abbrev")};
  return parse_line_table(s, comp_dirs_of(s));
}

}  // namespace backend
