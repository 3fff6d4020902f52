// The trace buffer: collected frames in gdbserver's byte layout, which is also what GDB's
// `tsave` writes into a trace file after its header (qTBuffer serves these bytes as they are):
//   frame: tracepoint number (2 bytes, little-endian), data size (4 bytes), then blocks:
//     'R' + the register block (the whole register file in the target description's order)
//     'M' + address (8) + length (2) + the bytes
//     'V' + variable number (4) + value (8)
// In a file, a frame header whose tracepoint number is 0 ends the data. Frames are numbered from 0, the oldest
// kept first; a circular buffer drops the oldest to make room, a linear one refuses the frame.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace backend::trace {

// One frame being built at a hit.
class FrameBuilder {
 public:
  explicit FrameBuilder(uint32_t tracepoint) : tracepoint_(tracepoint) {}
  void add_registers(std::span<const uint8_t> block);
  void add_memory(uint64_t addr, std::span<const uint8_t> bytes);  // split in 64 KiB - 1 pieces
  void add_variable(uint32_t number, int64_t value);
  void add_raw_blocks(std::span<const uint8_t> blocks) { data_.insert(data_.end(), blocks.begin(), blocks.end()); }
  uint32_t tracepoint() const { return tracepoint_; }
  size_t size() const { return data_.size(); }  // block bytes, without the 6-byte header
  std::vector<uint8_t> finish() const;          // header + blocks

 private:
  uint32_t tracepoint_;
  std::vector<uint8_t> data_;
};

// A stored frame, read back.
struct MemoryBlock {
  uint64_t addr = 0;
  std::span<const uint8_t> bytes;
};
class FrameView {
 public:
  explicit FrameView(std::span<const uint8_t> frame) : frame_(frame) {}
  uint32_t tracepoint() const;
  // The register block, if the frame has one (its size is the register file's).
  std::optional<std::span<const uint8_t>> registers(size_t block_size) const;
  std::vector<MemoryBlock> memory(size_t block_size) const;
  std::vector<std::pair<uint32_t, int64_t>> variables(size_t block_size) const;
  // Bytes of [addr, addr + out.size()) from the first block holding addr, up to that block's
  // end: how many were copied (0: addr not collected).
  size_t read(uint64_t addr, std::span<uint8_t> out, size_t block_size) const;
  std::span<const uint8_t> bytes() const { return frame_; }

 private:
  template <typename F>
  void each_block(size_t block_size, F&& f) const;
  std::span<const uint8_t> frame_;
};

class TraceBuffer {
 public:
  static constexpr uint64_t kDefaultSize = 5 * 1024 * 1024;  // gdbserver's

  void set_size(uint64_t bytes) { size_ = bytes; }
  void set_circular(bool on) { circular_ = on; }
  uint64_t size() const { return size_; }
  bool circular() const { return circular_; }
  uint64_t used() const { return used_; }
  uint64_t free() const { return size_ > used_ ? size_ - used_ : 0; }
  size_t frames() const { return frames_.size(); }
  uint64_t created() const { return created_; }
  void clear();
  // Stores a finished frame: false when a linear buffer has no room (the trace stops, full).
  // A circular buffer drops the oldest frames; a frame bigger than the buffer is refused.
  bool add(std::vector<uint8_t> frame);
  FrameView frame(size_t number) const { return FrameView(frames_.at(number)); }
  // The raw data from byte `offset`, the frames in order (qTBuffer; nothing at the end: GDB's
  // tsave then writes the end marker itself, as with gdbserver's buffer).
  std::vector<uint8_t> raw(uint64_t offset, uint64_t len) const;

 private:
  std::deque<std::vector<uint8_t>> frames_;
  uint64_t size_ = kDefaultSize;
  uint64_t used_ = 0;
  uint64_t created_ = 0;
  bool circular_ = false;
};

}  // namespace backend::trace
