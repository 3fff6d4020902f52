#include "backend/trace/trace_buffer.h"

#include <algorithm>
#include <cstring>

namespace backend::trace {

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i)));
}
uint64_t get(std::span<const uint8_t> in, size_t at, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = bytes; i-- > 0;) v = (v << 8) | in[at + i];
  return v;
}
constexpr size_t kHeader = 6;

}  // namespace

void FrameBuilder::add_registers(std::span<const uint8_t> block) {
  data_.push_back('R');
  data_.insert(data_.end(), block.begin(), block.end());
}

void FrameBuilder::add_memory(uint64_t addr, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    size_t n = std::min<size_t>(bytes.size(), 0xffff);
    data_.push_back('M');
    put<uint64_t>(data_, addr);
    put<uint16_t>(data_, static_cast<uint16_t>(n));
    data_.insert(data_.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    addr += n;
    bytes = bytes.subspan(n);
  }
}

void FrameBuilder::add_variable(uint32_t number, int64_t value) {
  data_.push_back('V');
  put<uint32_t>(data_, number);
  put<uint64_t>(data_, static_cast<uint64_t>(value));
}

std::vector<uint8_t> FrameBuilder::finish() const {
  std::vector<uint8_t> out;
  out.reserve(kHeader + data_.size());
  put<uint16_t>(out, static_cast<uint16_t>(tracepoint_));
  put<uint32_t>(out, static_cast<uint32_t>(data_.size()));
  out.insert(out.end(), data_.begin(), data_.end());
  return out;
}

uint32_t FrameView::tracepoint() const {
  return frame_.size() >= 2 ? static_cast<uint32_t>(get(frame_, 0, 2)) : 0;
}

// Calls f(type, payload) for each block; stops at anything malformed.
template <typename F>
void FrameView::each_block(size_t block_size, F&& f) const {
  size_t at = kHeader;
  while (at < frame_.size()) {
    uint8_t type = frame_[at++];
    size_t len = 0;
    if (type == 'R') len = block_size;
    else if (type == 'M' && at + 10 <= frame_.size()) len = 10 + get(frame_, at + 8, 2);
    else if (type == 'V') len = 12;
    else return;
    if (at + len > frame_.size()) return;
    f(type, frame_.subspan(at, len));
    at += len;
  }
}

std::optional<std::span<const uint8_t>> FrameView::registers(size_t block_size) const {
  std::optional<std::span<const uint8_t>> r;
  each_block(block_size, [&](uint8_t type, std::span<const uint8_t> p) {
    if (type == 'R' && !r) r = p;
  });
  return r;
}

std::vector<MemoryBlock> FrameView::memory(size_t block_size) const {
  std::vector<MemoryBlock> out;
  each_block(block_size, [&](uint8_t type, std::span<const uint8_t> p) {
    if (type == 'M') out.push_back({get(p, 0, 8), p.subspan(10)});
  });
  return out;
}

std::vector<std::pair<uint32_t, int64_t>> FrameView::variables(size_t block_size) const {
  std::vector<std::pair<uint32_t, int64_t>> out;
  each_block(block_size, [&](uint8_t type, std::span<const uint8_t> p) {
    if (type == 'V') out.emplace_back(static_cast<uint32_t>(get(p, 0, 4)), static_cast<int64_t>(get(p, 4, 8)));
  });
  return out;
}

size_t FrameView::read(uint64_t addr, std::span<uint8_t> out, size_t block_size) const {
  for (const auto& b : memory(block_size)) {
    if (addr < b.addr || addr - b.addr >= b.bytes.size()) continue;
    size_t n = std::min<size_t>(out.size(), b.bytes.size() - (addr - b.addr));
    std::memcpy(out.data(), b.bytes.data() + (addr - b.addr), n);
    return n;
  }
  return 0;
}

void TraceBuffer::clear() {
  frames_.clear();
  used_ = 0;
  created_ = 0;
}

bool TraceBuffer::add(std::vector<uint8_t> frame) {
  if (frame.size() > size_) return false;
  if (used_ + frame.size() > size_) {
    if (!circular_) return false;
    while (!frames_.empty() && used_ + frame.size() > size_) {
      used_ -= frames_.front().size();
      frames_.pop_front();
    }
  }
  used_ += frame.size();
  frames_.push_back(std::move(frame));
  ++created_;
  return true;
}

std::vector<uint8_t> TraceBuffer::raw(uint64_t offset, uint64_t len) const {
  std::vector<uint8_t> out;
  uint64_t at = 0;  // offset of the current frame in the whole data
  auto take = [&](std::span<const uint8_t> piece) {
    uint64_t end = at + piece.size();
    if (end > offset && out.size() < len) {
      uint64_t from = offset > at ? offset - at : 0;
      uint64_t n = std::min<uint64_t>(piece.size() - from, len - out.size());
      out.insert(out.end(), piece.begin() + static_cast<ptrdiff_t>(from), piece.begin() + static_cast<ptrdiff_t>(from + n));
    }
    at = end;
  };
  for (const auto& f : frames_) {
    if (out.size() >= len) break;
    take(f);
  }
  return out;
}

}  // namespace backend::trace
