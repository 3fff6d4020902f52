// AccessDecoder: capstone decodes an instruction once into a Recipe (a few address terms, see
// access_recipe.h); every later call at the same address only compares the bytes and evaluates
// the terms with the registers. run_ahead walks the same recipes with the register model of
// insn_effects.h. Semantics and the reasons behind each rule: docs/watch-emulation.md.
#include "backend/x86/access_decoder.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <unordered_map>

#include "backend/x86/access_recipe.h"
#include "backend/x86/address_term.h"
#include "backend/x86/insn_effects.h"

namespace backend {

using namespace access;

namespace {

// Recipes kept before the cache is dropped wholesale; bounds memory for code that never loops.
constexpr size_t kMaxCached = size_t{1} << 16;

}  // namespace

struct AccessDecoder::Impl {
  csh handle = 0;
  cs_insn* insn = nullptr;
  std::unordered_map<uint64_t, Recipe> cache;
  AccessDecoderStats stats;
  CpuQuirks quirks;

  explicit Impl(CpuQuirks q) : quirks(q) {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) {
      handle = 0;
      return;
    }
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    insn = cs_malloc(handle);
  }
  ~Impl() {
    if (insn) cs_free(insn, 1);
    if (handle) cs_close(&handle);
  }

  // The recipe for the instruction at `addr`, from the cache when its bytes still match;
  // nullptr when the bytes do not decode.
  const Recipe* recipe(uint64_t addr, std::span<const uint8_t> code) {
    if (auto it = cache.find(addr); it != cache.end()) {
      const Recipe& c = it->second;
      if (code.size() >= c.len && std::memcmp(c.bytes, code.data(), c.len) == 0) {
        ++stats.cache_hits;
        return &c;
      }
      cache.erase(it);
    }
    if (!handle || !insn) return nullptr;
    ++stats.decodes;
    const uint8_t* p = code.data();
    size_t n = std::min(code.size(), kMaxInsnLen);
    uint64_t at = addr;
    if (n == 0 || !cs_disasm_iter(handle, &p, &n, &at, insn) || insn->size == 0 ||
        insn->size > kMaxInsnLen)
      return nullptr;
    Recipe r;
    r.len = static_cast<uint8_t>(insn->size);
    std::memcpy(r.bytes, insn->bytes, r.len);
    build(handle, *insn, quirks, r);
    build_effects(*insn, r.fx);
    if (cache.size() >= kMaxCached) cache.clear();
    return &cache.insert_or_assign(addr, r).first->second;
  }

  // --- run_ahead --------------------------------------------------------------------------------

  // Code window for one walk: bytes [win_addr, win_addr + win_len) as read; win_short: the
  // reader returned less than asked, nothing is readable past the window.
  static constexpr size_t kChunk = 256;
  std::array<uint8_t, 2 * kChunk> win{};
  uint64_t win_addr = 0;
  size_t win_len = 0;
  bool win_short = false;

  // Writes of walked instructions that may land on code the walk decoded later (self-modifying
  // code); checked once the walk has ended. Kept between calls so its storage is reused.
  struct CodeWrite {
    uint32_t index;   // the writer's position in the walk
    uint64_t writer;  // its address
    uint64_t next;    // the address after it
    uint64_t from, to;
  };
  std::vector<CodeWrite> code_writes;

  // At least kMaxInsnLen bytes at pc, or all that is readable.
  std::span<const uint8_t> code_at(uint64_t pc, const CodeBytesReader& read) {
    if (pc >= win_addr && pc - win_addr <= win_len) {
      size_t off = pc - win_addr;
      if (win_len - off >= kMaxInsnLen || win_short) return {win.data() + off, win_len - off};
    }
    // Up to a chunk boundary, so a readable page followed by an unreadable one still gives all
    // of its bytes with a reader that is not page-aware.
    size_t want = kChunk - pc % kChunk;
    if (want < kMaxInsnLen) want += kChunk;
    size_t got = read ? read(pc, std::span<uint8_t>(win.data(), want)) : 0;
    win_addr = pc;
    win_len = std::min(got, want);
    win_short = win_len < want;
    return {win.data(), win_len};
  }
};

AccessDecoder::AccessDecoder(CpuQuirks quirks) : impl_(std::make_unique<Impl>(quirks)) {}
AccessDecoder::~AccessDecoder() = default;

InsnAccesses AccessDecoder::decode(std::span<const uint8_t> code, const user_regs_struct& regs) {
  InsnAccesses out;
  decode(code, regs, out);
  return out;
}

void AccessDecoder::decode(std::span<const uint8_t> code, const user_regs_struct& regs,
                           InsnAccesses& out) {
  out.accesses.clear();
  out.exact = true;
  out.len = 0;
  const Recipe* r = impl_->recipe(regs.rip, code);
  if (!r) {
    out.exact = false;
    return;
  }
  out.len = r->len;
  out.exact = r->exact;
  if (!r->exact) return;
  if (r->rep_width) {
    uint64_t count = regs.rcx;
    if (r->rep_width == 4) count &= 0xffffffffu;
    if (count == 0) return;  // rep with a zero count touches nothing
  }
  for (uint8_t i = 0; i < r->count; ++i) {
    const AccessRecipe& a = r->acc[i];
    out.accesses.push_back(MemAccess{evaluate(a.at, regs), a.size, a.read, a.write});
  }
}

RunAhead AccessDecoder::run_ahead(const user_regs_struct& regs, const CodeBytesReader& read,
                                  const std::function<bool(const MemAccess&)>& touches, uint32_t max_insns,
                                  std::vector<RunAheadStep>* trace) {
  Impl& m = *impl_;
  m.win_addr = 0;
  m.win_len = 0;
  m.win_short = false;
  m.code_writes.clear();
  if (trace) trace->clear();
  // Writes at or above the instruction after the writer and below this bound may land on code
  // the walk decodes later (a walk spans at most max_insns + 1 instructions of 15 bytes).
  const uint64_t code_bound = regs.rip + (static_cast<uint64_t>(max_insns) + 1) * kMaxInsnLen;

  RunAhead res;
  uint64_t stop_len = kMaxInsnLen;  // bytes of stop the thread may fetch (all 15 when unknown)
  user_regs_struct cur = regs;
  uint16_t known = 0xffff;
  uint64_t pc = regs.rip;
  for (;; ++res.insns) {
    if (res.insns >= max_insns) {
      res.why = RunAhead::Why::Limit;
      stop_len = kMaxInsnLen;
      break;
    }
    cur.rip = pc;
    RunAheadStep* step = nullptr;
    if (trace) {
      step = &trace->emplace_back();
      step->addr = pc;
      step->known = known;
      step->regs = cur;
    }
    const Recipe* r = m.recipe(pc, m.code_at(pc, read));
    if (!r) {
      res.why = RunAhead::Why::Undecodable;
      break;
    }
    const Effects& e = r->fx;
    stop_len = r->len;
    if (e.flow == Flow::Branch) {
      res.why = RunAhead::Why::ControlFlow;
      break;
    }
    // rep string instructions run all their iterations when continued; decode() describes one.
    if (e.flow == Flow::Unusual || !r->exact || r->rep_width) {
      res.why = RunAhead::Why::Unknown;
      break;
    }
    bool computable = true;
    for (uint8_t i = 0; i < r->count; ++i) computable &= term_known(r->acc[i].at, known);
    if (!computable) {
      res.why = RunAhead::Why::Unknown;
      break;
    }
    bool touched = false;
    const uint64_t next = pc + r->len;
    for (uint8_t i = 0; i < r->count; ++i) {
      const AccessRecipe& a = r->acc[i];
      MemAccess ma{evaluate(a.at, cur), a.size, a.read, a.write};
      if (step) step->accesses.push_back(ma);
      if (touches && touches(ma)) touched = true;
      uint64_t end = ma.addr + ma.size;
      if (ma.write && (end > next || end < ma.addr) && ma.addr < code_bound)
        m.code_writes.push_back({res.insns, pc, next, ma.addr, end < ma.addr ? UINT64_MAX : end});
    }
    if (step) step->computed = true;
    if (touched) {
      res.why = RunAhead::Why::Touches;
      break;
    }
    apply(e, cur, known);
    pc = next;
  }
  res.stop = pc;

  // Self-modifying code: a walked write that reaches code from the instruction after the writer
  // up to the end of stop (where the caller's breakpoint goes) means the walk decoded stale
  // bytes after it. Stop at the first such writer, so it runs checked.
  for (const Impl::CodeWrite& w : m.code_writes) {
    if (w.index >= res.insns) continue;
    if (w.from < res.stop + stop_len && w.to > w.next) {
      res.stop = w.writer;
      res.insns = w.index;
      res.why = RunAhead::Why::Unknown;
    }
  }
  if (trace && trace->size() > res.insns + 1) trace->resize(res.insns + 1);
  return res;
}

void AccessDecoder::invalidate(uint64_t addr, uint64_t len) {
  if (len == 0) return;
  auto& cache = impl_->cache;
  uint64_t end = addr + len < addr ? UINT64_MAX : addr + len;
  // An instruction starting up to kMaxInsnLen-1 bytes before addr may cover it.
  uint64_t from = addr >= kMaxInsnLen - 1 ? addr - (kMaxInsnLen - 1) : 0;
  auto overlaps = [&](uint64_t start, const Recipe& r) { return start < end && start + r.len > addr; };
  if (end - from <= 4 * cache.size()) {
    for (uint64_t a = from; a < end; ++a)
      if (auto it = cache.find(a); it != cache.end() && overlaps(a, it->second)) cache.erase(it);
  } else {
    for (auto it = cache.begin(); it != cache.end();)
      it = overlaps(it->first, it->second) ? cache.erase(it) : std::next(it);
  }
}

void AccessDecoder::clear() { impl_->cache.clear(); }

AccessDecoderStats AccessDecoder::stats() const {
  AccessDecoderStats s = impl_->stats;
  s.cached = impl_->cache.size();
  return s;
}

}  // namespace backend
