#include "backend/coverage/coverage.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "backend/host/elf_file.h"

namespace backend {

namespace {

constexpr uint64_t kMaxBlockBytes = 1 << 20;  // a block is decoded this far at most
constexpr std::string_view kDeleted = " (deleted)";

EdgeKind edge_kind(const std::optional<FlowInsn>& insn) {
  if (!insn) return EdgeKind::Async;  // no control-flow instruction there: a signal
  switch (insn->kind) {
    case FlowKind::Call:
    case FlowKind::IndirectCall: return EdgeKind::Call;
    case FlowKind::Return:
    case FlowKind::Syscall: return EdgeKind::Return;  // rt_sigreturn back to the interrupted code
    default: return EdgeKind::Jump;
  }
}

std::string file_of(const std::string& name) {
  if (name.size() > kDeleted.size() && name.ends_with(kDeleted)) return name.substr(0, name.size() - kDeleted.size());
  return name;
}

bool is_module_name(const std::string& name) { return (!name.empty() && name[0] == '/') || name == "[vdso]"; }

}  // namespace

CoverageRecorder::CoverageRecorder(CodeReader read_code, MapReader memory_map)
    : read_process_(std::move(read_code)), memory_map_(std::move(memory_map)),
      code_([this](uint64_t addr, std::span<uint8_t> out) { return this->read_code(addr, out); }) {
  refresh_regions();
}

CoverageRecorder::~CoverageRecorder() = default;

void CoverageRecorder::detach() {
  read_process_ = nullptr;
  memory_map_ = nullptr;
}

size_t CoverageRecorder::read_code(uint64_t addr, std::span<uint8_t> out) {
  if (read_process_) {
    size_t n = read_process_(addr, out);
    if (n > 0) return n;
  }
  // The process is gone (or the page unreadable): the file mapped there holds the same bytes.
  for (const auto& r : regions_) {
    if (addr < r.start || addr >= r.end || r.name.empty() || r.name[0] != '/') continue;
    int fd = ::open(file_of(r.name).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t want = static_cast<size_t>(std::min<uint64_t>(out.size(), r.end - addr));
    ssize_t got = ::pread(fd, out.data(), want, static_cast<off_t>(r.offset + (addr - r.start)));
    ::close(fd);
    return got > 0 ? static_cast<size_t>(got) : 0;
  }
  return 0;
}

void CoverageRecorder::refresh_regions() {
  if (!memory_map_) return;
  auto map = memory_map_();
  if (!map) return;
  for (const auto& r : *map) {
    if (!r.exec && !is_module_name(r.name)) continue;
    bool known = std::any_of(regions_.begin(), regions_.end(), [&](const MemoryRegion& k) {
      return k.start == r.start && k.end == r.end && k.name == r.name && k.offset == r.offset && k.exec == r.exec;
    });
    if (!known) regions_.push_back(r);
  }
}

int CoverageRecorder::region_of(uint64_t addr) {
  // The newest mapping wins: a later library may reuse an unloaded one's addresses.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = regions_.size(); i-- > 0;)
      if (regions_[i].exec && addr >= regions_[i].start && addr < regions_[i].end) return static_cast<int>(i);
    if (pass == 0) refresh_regions();
  }
  return -1;
}

CoverageRecorder::BlockInfo CoverageRecorder::describe(const Key& key) {
  BlockInfo info;
  info.region = region_of(key.start);
  bool exclusive = key.end & kExclusive;
  uint64_t end = key.end & ~kExclusive;
  if (end < key.start || end - key.start > kMaxBlockBytes) return info;
  // Walk the straight-line pieces: a block goes on through branches not taken.
  uint64_t addr = key.start;
  uint32_t insns = 0;
  while (addr <= end) {
    auto b = code_.block_at(addr);
    if (!b) break;
    if (!exclusive && b->end.addr == end) {
      info.insns = insns + b->insn_count;
      info.size = static_cast<uint32_t>(b->end.addr + std::max<uint8_t>(b->end.len, 1) - key.start);
      return info;
    }
    if (b->end.addr >= end || b->end.len == 0) {
      // The end lies in this piece: count the instructions before it one by one.
      uint64_t a = addr;
      while (a < end) {
        auto one = code_.insn_at(a);
        if (!one || one->first == 0) break;
        ++insns;
        a += one->first;
      }
      if (exclusive) {
        info.insns = insns;
        info.size = static_cast<uint32_t>(end - key.start);
        return info;
      }
      if (a == end) {  // `end` is an instruction of this piece (a branch taken mid-piece: a signal)
        auto last = code_.insn_at(end);
        info.insns = insns + 1;
        info.size = static_cast<uint32_t>(end + (last ? last->first : 1) - key.start);
        return info;
      }
      break;
    }
    insns += b->insn_count;
    addr = b->end.addr + b->end.len;
  }
  // Could not follow the code from start to end: keep the extent.
  uint64_t last_len = 1;
  if (!exclusive)
    if (auto l = code_.insn_at(end); l && l->first) last_len = l->first;
  info.size = static_cast<uint32_t>(end - key.start + (exclusive ? 0 : last_len));
  info.insns = std::max<uint32_t>(insns, 1);
  return info;
}

CoverageRecorder::BlockInfo& CoverageRecorder::count_block(pid_t tid, const Key& key) {
  auto it = blocks_.find(key);
  if (it == blocks_.end()) it = blocks_.emplace(key, describe(key)).first;
  ++it->second.count;
  if (tree_) tree_->instructions(tid, it->second.insns);
  return it->second;
}

void CoverageRecorder::thread_started(pid_t tid, uint64_t pc) {
  if (pc) open_[tid] = pc;
  else open_.erase(tid);
  if (tree_ && pc) tree_->thread_started(tid, pc);
}

void CoverageRecorder::branch(pid_t tid, uint64_t from, uint64_t to) {
  ++branches_;
  auto open = open_.find(tid);
  if (open != open_.end()) {
    if (open->second && from >= open->second) count_block(tid, Key{open->second, from});
    open->second = to;
  } else {
    open_.emplace(tid, to);  // a thread the recorder was not told about: from here on
  }
  auto it = edges_.find(Key{from, to});
  if (it == edges_.end()) {
    EdgeInfo e;
    auto insn = code_.insn_at(from);
    e.kind = insn ? edge_kind(insn->second) : EdgeKind::Jump;
    e.after = from + (insn ? insn->first : 0);
    it = edges_.emplace(Key{from, to}, e).first;
  }
  ++it->second.count;
  if (tree_) tree_->branch(tid, it->second.kind, to, it->second.after);
}

std::optional<uint64_t> CoverageRecorder::exit_end(uint64_t start) {
  // After its last taken branch the thread ran straight on, past branches not taken, to the
  // syscall that ended it (exit, exit_group) or to the instruction it died on.
  uint64_t addr = start;
  for (int pieces = 0; pieces < 4096; ++pieces) {
    auto b = code_.block_at(addr);
    if (!b) return std::nullopt;
    if (b->end.kind != FlowKind::CondJump || b->end.len == 0) return b->end.addr;
    addr = b->end.addr + b->end.len;
  }
  return std::nullopt;
}

void CoverageRecorder::thread_ended(pid_t tid, uint64_t pc) {
  auto open = open_.find(tid);
  if (open == open_.end()) return;
  uint64_t start = open->second;
  open_.erase(open);
  if (!start) return;
  if (pc) {
    if (pc > start) count_block(tid, Key{start, pc | kExclusive});
  } else if (auto last = exit_end(start)) {
    count_block(tid, Key{start, *last});
  }
  if (tree_) tree_->thread_ended(tid);
}

CoverageSnapshot CoverageRecorder::snapshot(const std::vector<std::pair<pid_t, uint64_t>>& open_until) {
  CoverageSnapshot out;
  out.branches = branches_;

  // Modules: the file-backed mappings grouped per load; the mapping of file offset 0 starts one.
  std::vector<int> module_of_region(regions_.size(), -1);
  std::vector<size_t> order(regions_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (regions_[a].name != regions_[b].name) return regions_[a].name < regions_[b].name;
    return regions_[a].start < regions_[b].start;
  });
  for (size_t k = 0; k < order.size(); ++k) {
    const MemoryRegion& r = regions_[order[k]];
    if (!is_module_name(r.name)) continue;
    bool first_of_name = k == 0 || regions_[order[k - 1]].name != r.name;
    if (first_of_name || r.offset == 0) {
      CoverageModule m;
      m.path = r.name;
      m.base = r.start;
      out.modules.push_back(std::move(m));
    }
    int id = static_cast<int>(out.modules.size() - 1);
    module_of_region[order[k]] = id;
    auto& m = out.modules[id];
    m.segments.push_back({r.start, r.end, r.offset, r.exec});
    m.end = std::max(m.end, r.end);
  }
  // A mapping seen before and after an mprotect split appears twice: keep non-overlapping ones.
  for (auto& m : out.modules) {
    std::sort(m.segments.begin(), m.segments.end(),
              [](const auto& a, const auto& b) { return a.start != b.start ? a.start < b.start : a.end > b.end; });
    std::vector<CoverageModule::Segment> kept;
    for (const auto& seg : m.segments) {
      if (!kept.empty() && seg.start < kept.back().end) {
        kept.back().exec = kept.back().exec || seg.exec;
        continue;
      }
      kept.push_back(seg);
    }
    m.segments = std::move(kept);
  }
  // Only modules with executable code are reported.
  std::vector<int> renumber(out.modules.size(), -1);
  std::vector<CoverageModule> kept;
  for (size_t i = 0; i < out.modules.size(); ++i) {
    auto& m = out.modules[i];
    if (std::none_of(m.segments.begin(), m.segments.end(), [](const auto& s) { return s.exec; })) continue;
    if (auto elf = ElfFile::open(file_of(m.path))) {
      m.build_id = elf->build_id();
      m.preferred_base = elf->shared() ? elf->lowest_vaddr() : m.base;
      uint64_t bias = elf->shared() ? m.base - elf->lowest_vaddr() : 0;
      m.bias = bias;
      m.entry = elf->entry() ? elf->entry() + bias : 0;
    }
    renumber[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(m));
  }
  out.modules = std::move(kept);

  std::map<std::pair<uint64_t, uint32_t>, CoveredBlock> merged;
  auto add = [&](uint64_t start, const BlockInfo& info, uint64_t count) {
    if (info.size == 0) return;
    auto& b = merged[{start, info.size}];
    b.start = start;
    b.size = info.size;
    b.insns = info.insns;
    b.count += count;
    int region = info.region;
    b.module = region >= 0 && static_cast<size_t>(region) < module_of_region.size() && module_of_region[region] >= 0
                   ? renumber[module_of_region[region]]
                   : -1;
  };
  for (const auto& [key, info] : blocks_) add(key.start, info, info.count);
  for (auto [tid, pc] : open_until) {
    auto it = open_.find(tid);
    if (it == open_.end() || !it->second || pc <= it->second) continue;
    add(it->second, describe(Key{it->second, pc | kExclusive}), 1);
  }
  for (auto& [k, b] : merged) out.blocks.push_back(b);
  for (const auto& [key, e] : edges_) out.edges.push_back(CoveredEdge{key.start, key.end, e.count});
  std::sort(out.edges.begin(), out.edges.end(),
            [](const auto& a, const auto& b) { return a.from != b.from ? a.from < b.from : a.to < b.to; });
  return out;
}

}  // namespace backend
