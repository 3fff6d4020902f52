// BlockCache: capstone-based block decoding for the software tracer and stepbranch.
//
// Hot path: the common instructions of a block are measured without capstone
// (common_insn_length); the rest is scanned with capstone's detail mode off (only instruction
// ids and sizes are needed to find the end of a block); detail is switched on for the single
// control-flow instruction that ends the block, to read its operand.
#include "backend/x86/block_cache.h"

#include "backend/x86/insn_length.h"
#include "backend/x86/nondeterministic.h"

#include <capstone/capstone.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace backend {

namespace {

// A block longer than this is cut (its last instruction is reported as a Trap end, which the
// caller single-steps); keeps a pathological straight-line region from costing unbounded time.
constexpr uint32_t kMaxBlockInsns = 4096;
constexpr size_t kMaxInsnLen = 15;
constexpr size_t kChunk = 512;  // bytes read from the inferior at a time

enum class IdClass { NotFlow, Jump, CondJump, Call, Return, Loop, Syscall, Trap };

IdClass classify_id(unsigned id) {
  switch (id) {
    case X86_INS_JMP: return IdClass::Jump;  // rel or r/m; split by operand later
    case X86_INS_CALL: return IdClass::Call;
    case X86_INS_RET: return IdClass::Return;
    case X86_INS_JAE: case X86_INS_JA: case X86_INS_JBE: case X86_INS_JB:
    case X86_INS_JE: case X86_INS_JGE: case X86_INS_JG: case X86_INS_JLE:
    case X86_INS_JL: case X86_INS_JNE: case X86_INS_JNO: case X86_INS_JNP:
    case X86_INS_JNS: case X86_INS_JO: case X86_INS_JP: case X86_INS_JS:
      return IdClass::CondJump;
    case X86_INS_LOOP: case X86_INS_LOOPE: case X86_INS_LOOPNE:
    case X86_INS_JRCXZ: case X86_INS_JECXZ: case X86_INS_JCXZ:
      return IdClass::Loop;
    case X86_INS_SYSCALL: return IdClass::Syscall;
    // Everything that traps, faults on purpose, or transfers control in a way we do not follow.
    case X86_INS_INT: case X86_INS_INT1: case X86_INS_INT3: case X86_INS_INTO:
    case X86_INS_UD0: case X86_INS_UD2: case X86_INS_UD2B: case X86_INS_HLT:
    case X86_INS_IRET: case X86_INS_IRETD: case X86_INS_IRETQ:
    case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_SYSRET:
    case X86_INS_LJMP: case X86_INS_LCALL: case X86_INS_RETF: case X86_INS_RETFQ:
    case X86_INS_XBEGIN: case X86_INS_XABORT: case X86_INS_VMCALL: case X86_INS_BOUND:
      return IdClass::Trap;
    default: return IdClass::NotFlow;
  }
}

}  // namespace

struct BlockCache::Impl {
  CodeReader reader;
  csh handle = 0;
  cs_insn* insn = nullptr;  // allocated with detail space; detail filled only when switched on
  std::unordered_map<uint64_t, Block> blocks;
  std::map<uint64_t, uint64_t> index;  // block start -> end (exclusive), for invalidate()
  uint64_t max_span = 0;               // longest block in bytes ever cached

  // Code window read from the inferior: buf holds bytes [buf_addr, buf_addr + buf.size()).
  std::vector<uint8_t> buf;
  uint64_t buf_addr = 0;
  bool buf_at_end = false;  // the reader returned short: nothing readable past the window
  bool detail_on = false;   // capstone's detail wanted (a control-flow instruction's operand)
  bool stop_at_nondeterministic = false;

  explicit Impl(CodeReader r) : reader(std::move(r)) {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle) != CS_ERR_OK) {
      handle = 0;
      return;
    }
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
    insn = cs_malloc(handle);
    cs_option(handle, CS_OPT_DETAIL, CS_OPT_OFF);
  }
  ~Impl() {
    if (insn) cs_free(insn, 1);
    if (handle) cs_close(&handle);
  }

  // Makes sure at least kMaxInsnLen bytes from addr are in the window (or all that is readable).
  void ensure(uint64_t addr) {
    uint64_t have_end = buf_addr + buf.size();
    if (!buf.empty() && addr >= buf_addr && addr <= have_end &&
        (have_end - addr >= kMaxInsnLen || buf_at_end))
      return;
    if (buf.empty() || addr < buf_addr || addr > have_end) {
      buf.clear();
      buf_addr = addr;
      buf_at_end = false;
    } else {
      // Keep the tail from addr on and append the next chunk.
      buf.erase(buf.begin(), buf.begin() + static_cast<ptrdiff_t>(addr - buf_addr));
      buf_addr = addr;
    }
    while (!buf_at_end && buf.size() < kMaxInsnLen) {
      size_t old = buf.size();
      // Read up to the end of the page first, so a readable page followed by an unmapped one
      // still gives all of its bytes even if the reader is not page-aware itself.
      uint64_t at = buf_addr + old;
      size_t want = kChunk - static_cast<size_t>(at % kChunk);
      if (want < kMaxInsnLen) want += kChunk;
      buf.resize(old + want);
      size_t got = reader(at, std::span<uint8_t>(buf.data() + old, want));
      if (got > want) got = want;
      buf.resize(old + got);
      if (got < want) buf_at_end = true;
    }
  }

  // Decodes one instruction at addr into `insn`; false if unreadable or undecodable.
  bool decode(uint64_t addr) {
    ensure(addr);
    if (addr < buf_addr || addr >= buf_addr + buf.size()) return false;
    const uint8_t* code = buf.data() + (addr - buf_addr);
    size_t size = buf.size() - (addr - buf_addr);
    uint64_t address = addr;
    // Most instructions of a block are common forms whose length alone matters: no capstone.
    if (!detail_on) {
      if (auto len = common_insn_length(std::span<const uint8_t>(code, size))) {
        insn->id = X86_INS_INVALID;
        insn->address = addr;
        insn->size = len->len;
        std::memcpy(insn->bytes, code, len->len);
        return true;
      }
    }
    if (cs_disasm_iter(handle, &code, &size, &address, insn)) return true;
    // What capstone 4 lacks (AVX-512 mask/compare forms, rdpkru): never control flow, so its
    // length makes it an ordinary instruction of the block (id INVALID = not flow).
    auto ext = extended_insn_length(std::span<const uint8_t>(code, size));
    if (!ext) return false;
    insn->id = X86_INS_INVALID;
    insn->address = addr;
    insn->size = ext->len;
    std::memcpy(insn->bytes, code, ext->len);
    return true;
  }

  // A jcc/jmp/call with a relative target or a ret at addr, decoded without capstone.
  std::optional<FlowInsn> simple_flow(uint64_t addr) {
    ensure(addr);
    if (addr < buf_addr || addr >= buf_addr + buf.size()) return std::nullopt;
    const size_t off = addr - buf_addr;
    auto br = simple_branch(std::span<const uint8_t>(buf.data() + off, buf.size() - off));
    if (!br) return std::nullopt;
    FlowInsn f;
    f.addr = addr;
    f.len = br->len;
    std::memcpy(f.bytes, buf.data() + off, br->len);
    switch (br->kind) {
      case X86Branch::Kind::CondJump: f.kind = FlowKind::CondJump; break;
      case X86Branch::Kind::Jump: f.kind = FlowKind::Jump; break;
      case X86Branch::Kind::Call: f.kind = FlowKind::Call; break;
      case X86Branch::Kind::Return: f.kind = FlowKind::Return; break;
    }
    if (br->kind != X86Branch::Kind::Return) f.direct_target = addr + br->len + static_cast<int64_t>(br->rel);
    return f;
  }

  // Fills a FlowInsn for the instruction decoded in `insn` with class c (re-decodes with detail
  // for jmp/call to split rel from r/m forms and read the target).
  FlowInsn make_flow(uint64_t addr, IdClass c) {
    FlowInsn f;
    f.addr = addr;
    f.len = static_cast<uint8_t>(insn->size);
    std::memcpy(f.bytes, insn->bytes, std::min<size_t>(insn->size, sizeof f.bytes));
    bool needs_operand = c == IdClass::Jump || c == IdClass::Call || c == IdClass::CondJump ||
                         c == IdClass::Loop;
    if (needs_operand) {
      cs_option(handle, CS_OPT_DETAIL, CS_OPT_ON);
      detail_on = true;
      bool ok = decode(addr);
      detail_on = false;
      cs_option(handle, CS_OPT_DETAIL, CS_OPT_OFF);
      const cs_x86* x = ok ? &insn->detail->x86 : nullptr;
      if (x && x->op_count >= 1 && x->operands[0].type == X86_OP_IMM) {
        f.direct_target = static_cast<uint64_t>(x->operands[0].imm);
      } else if (x && (c == IdClass::Jump || c == IdClass::Call)) {
        f.kind = c == IdClass::Jump ? FlowKind::IndirectJump : FlowKind::IndirectCall;
        return f;
      } else {
        f.kind = FlowKind::Trap;  // a form we cannot classify
        return f;
      }
    }
    switch (c) {
      case IdClass::Jump: f.kind = FlowKind::Jump; break;
      case IdClass::CondJump: f.kind = FlowKind::CondJump; break;
      case IdClass::Call: f.kind = FlowKind::Call; break;
      case IdClass::Return: f.kind = FlowKind::Return; break;
      case IdClass::Loop: f.kind = FlowKind::Loop; break;
      case IdClass::Syscall: f.kind = FlowKind::Syscall; break;
      default: f.kind = FlowKind::Trap; break;
    }
    return f;
  }

  Result<Block> decode_block(uint64_t pc) {
    if (!handle || !insn) return Error{ENOSYS, "The capstone disassembler could not be opened."};
    Block b;
    b.start = pc;
    uint64_t addr = pc;
    // The last kTailBytes instruction starts (each instruction is at least a byte long).
    uint64_t recent[Block::kTailBytes] = {};
    auto tail_of = [&](uint64_t end, uint32_t count) {
      for (uint32_t back = 0; back < std::min<uint64_t>(count, Block::kTailBytes); ++back) {
        uint64_t at = recent[(count - 1 - back) % Block::kTailBytes];
        if (end - at >= Block::kTailBytes) return at;
      }
      return pc;
    };
    for (uint32_t n = 1;; ++n) {
      recent[(n - 1) % Block::kTailBytes] = addr;
      if (auto f = simple_flow(addr)) {  // the usual block end, without capstone
        b.tail_start = tail_of(addr + f->len, n);
        b.end = *f;
        b.insn_count = n;
        return b;
      }
      if (!decode(addr)) {
        if (addr == pc && (buf.empty() || addr >= buf_addr + buf.size()))
          return Error{EIO, fmt::format("Cannot read code at 0x{:x}.", addr)};
        // Undecodable or unreadable bytes end the block as a Trap of unknown length (len 0):
        // the caller single-steps it and lets the CPU decide.
        b.end = FlowInsn{};
        b.end.addr = addr;
        b.end.kind = FlowKind::Trap;
        b.insn_count = n;
        b.tail_start = tail_of(addr, n);
        return b;
      }
      IdClass c = classify_id(insn->id);
      if (c == IdClass::NotFlow && stop_at_nondeterministic &&
          nondeterministic_insn(std::span<const uint8_t>(insn->bytes, insn->size)))
        c = IdClass::Trap;
      if (c != IdClass::NotFlow || n == kMaxBlockInsns) {
        b.tail_start = tail_of(addr + insn->size, n);
        b.end = make_flow(addr, c == IdClass::NotFlow ? IdClass::Trap : c);
        b.insn_count = n;
        return b;
      }
      addr += insn->size;
    }
  }
};

BlockCache::BlockCache(CodeReader reader) : impl_(std::make_unique<Impl>(std::move(reader))) {}
BlockCache::~BlockCache() = default;

Result<Block> BlockCache::block_at(uint64_t pc) {
  if (auto it = impl_->blocks.find(pc); it != impl_->blocks.end()) return it->second;
  // The code window may be stale after an invalidate(); always start a fresh read.
  impl_->buf.clear();
  auto block = impl_->decode_block(pc);
  if (!block) return block;
  uint64_t end = block->end.addr + std::max<uint64_t>(block->end.len, 1);
  impl_->index[pc] = end;
  impl_->max_span = std::max(impl_->max_span, end - pc);
  impl_->blocks.emplace(pc, *block);
  return block;
}

Result<std::pair<uint8_t, std::optional<FlowInsn>>> BlockCache::insn_at(uint64_t pc) {
  if (!impl_->handle || !impl_->insn)
    return Error{ENOSYS, "The capstone disassembler could not be opened."};
  impl_->buf.clear();
  if (!impl_->decode(pc)) {
    if (impl_->buf.empty()) return Error{EIO, fmt::format("Cannot read code at 0x{:x}.", pc)};
    return Error{EILSEQ, fmt::format("Cannot decode the instruction at 0x{:x}.", pc)};
  }
  if (auto f = impl_->simple_flow(pc)) return std::pair<uint8_t, std::optional<FlowInsn>>{f->len, f};
  auto len = static_cast<uint8_t>(impl_->insn->size);
  IdClass c = classify_id(impl_->insn->id);
  if (c == IdClass::NotFlow && impl_->stop_at_nondeterministic &&
      nondeterministic_insn(std::span<const uint8_t>(impl_->insn->bytes, impl_->insn->size)))
    c = IdClass::Trap;
  std::optional<FlowInsn> flow;
  if (c != IdClass::NotFlow) flow = impl_->make_flow(pc, c);
  return std::pair<uint8_t, std::optional<FlowInsn>>{len, flow};
}

void BlockCache::invalidate(uint64_t addr, uint64_t len) {
  if (len == 0) return;
  uint64_t last = addr + len;  // exclusive
  if (last < addr) last = UINT64_MAX;
  // Any block overlapping [addr, last) starts within max_span bytes before addr or inside.
  uint64_t from = addr > impl_->max_span ? addr - impl_->max_span : 0;
  for (auto it = impl_->index.lower_bound(from); it != impl_->index.end() && it->first < last;) {
    if (it->second > addr) {
      impl_->blocks.erase(it->first);
      it = impl_->index.erase(it);
    } else {
      ++it;
    }
  }
  impl_->buf.clear();
}

const CodeReader& BlockCache::reader() const { return impl_->reader; }

void BlockCache::set_stop_at_nondeterministic(bool on) {
  impl_->stop_at_nondeterministic = on;
  clear();
}

void BlockCache::clear() {
  impl_->blocks.clear();
  impl_->index.clear();
  impl_->max_span = 0;
  impl_->buf.clear();
}

size_t BlockCache::size() const { return impl_->blocks.size(); }

}  // namespace backend
