#include "backend/x86/rep_string.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace backend {

namespace {
constexpr uint64_t kDirectionFlag = 0x400;
constexpr uint64_t kChunk = 64 * 1024;  // bytes moved per read/write of a bulk copy or fill
}  // namespace

std::optional<RepString> decode_rep_string(std::span<const uint8_t> code) {
  size_t at = 0;
  bool rep = false, word = false, wide = false;
  for (; at < code.size() && at < 4; ++at) {
    uint8_t b = code[at];
    if (b == 0xf3) rep = true;
    else if (b == 0x66) word = true;
    else break;
  }
  if (!rep || at >= code.size()) return std::nullopt;
  if ((code[at] & 0xf0) == 0x40) {  // REX: only W matters to these
    wide = code[at] & 0x08;
    if (++at >= code.size()) return std::nullopt;
  }
  RepString s;
  switch (code[at]) {
    case 0xa4: s.op = RepString::Op::Movs; s.size = 1; break;
    case 0xa5: s.op = RepString::Op::Movs; s.size = wide ? 8 : word ? 2 : 4; break;
    case 0xaa: s.op = RepString::Op::Stos; s.size = 1; break;
    case 0xab: s.op = RepString::Op::Stos; s.size = wide ? 8 : word ? 2 : 4; break;
    default: return std::nullopt;
  }
  s.len = static_cast<uint8_t>(at + 1);
  return s;
}

user_regs_struct after_iterations(const RepString& s, const user_regs_struct& regs, uint64_t k) {
  user_regs_struct r = regs;
  uint64_t step = k * s.size;
  bool down = regs.eflags & kDirectionFlag;
  r.rcx -= k;
  r.rdi = down ? r.rdi - step : r.rdi + step;
  if (s.op == RepString::Op::Movs) r.rsi = down ? r.rsi - step : r.rsi + step;
  if (r.rcx == 0) r.rip += s.len;
  return r;
}

bool run_iterations(const RepString& s, const user_regs_struct& regs, uint64_t k, const ProgramMemory& mem) {
  uint64_t bytes = k * s.size;
  bool down = regs.eflags & kDirectionFlag;
  if (bytes == 0) return true;
  // Element by element where the order shows: backwards, or a forward copy whose destination
  // starts inside what it has not read yet.
  bool elementwise = down || (s.op == RepString::Op::Movs && regs.rdi > regs.rsi && regs.rdi - regs.rsi < bytes);
  if (elementwise) {
    uint8_t elem[8];
    for (uint64_t i = 0; i < k; ++i) {
      uint64_t off = i * s.size;
      uint64_t dst = down ? regs.rdi - off : regs.rdi + off;
      if (s.op == RepString::Op::Movs) {
        if (!mem.read(down ? regs.rsi - off : regs.rsi + off, std::span<uint8_t>(elem, s.size))) return false;
      } else {
        std::memcpy(elem, &regs.rax, s.size);
      }
      if (!mem.write(dst, std::span<const uint8_t>(elem, s.size))) return false;
    }
    return true;
  }
  std::vector<uint8_t> buf(std::min(bytes, kChunk));
  if (s.op == RepString::Op::Stos)
    for (size_t i = 0; i < buf.size(); i += s.size) std::memcpy(buf.data() + i, &regs.rax, s.size);
  for (uint64_t done = 0; done < bytes;) {
    uint64_t n = std::min(bytes - done, kChunk);
    std::span<uint8_t> part(buf.data(), n);
    if (s.op == RepString::Op::Movs && !mem.read(regs.rsi + done, part)) return false;
    if (!mem.write(regs.rdi + done, part)) return false;
    done += n;
  }
  return true;
}

std::optional<uint64_t> iterations_until(const RepString& s, const user_regs_struct& regs, uint64_t limit,
                                         const std::function<bool(const user_regs_struct&)>& wanted) {
  uint64_t most = std::min<uint64_t>(regs.rcx, limit);
  for (uint64_t k = 1; k <= most; ++k)
    if (wanted(after_iterations(s, regs, k))) return k;
  return std::nullopt;
}

}  // namespace backend
