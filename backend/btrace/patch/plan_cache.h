// The block-patching source's warm plan (issue 30): where a recording of a module had to stop
// to explore (the block starts its exploration began from) and the blocks that ran, kept on
// disk between runs and keyed by the module file's build id, so that the next recording of the
// same file explores all of them at once instead of stopping at each one again.
//
// A plan holds only addresses, never code: each block start with the address of the
// control-flow instruction that ends its block, both as offsets from the start of the module's
// executable mapping, and a hash of the block's bytes. The tracer decodes every start again
// from the program's bytes and drops one whose block does not end where the plan says or whose
// bytes hash otherwise (a start moved into an instruction can decode to the same end), so a
// stale or damaged file can cost exploration, never a wrong patch. Files: DIR/<key>.plan, written whole (a temporary file
// renamed over the old one), merged with what is there.
#pragma once

#include <sys/types.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backend::patch {

struct PlanStart {
  uint32_t start = 0, end = 0;  // the block's start, and its control-flow instruction's address
  uint32_t hash = 0;            // block_hash() of its bytes, start to the end of that instruction
  auto operator<=>(const PlanStart&) const = default;
};

struct ModulePlan {
  uint64_t code_bytes = 0;  // the size of the executable mapping the offsets are in
  uint64_t file_offset = 0;  // the file offset that mapping starts at
  std::vector<PlanStart> starts;  // sorted, unique
};

// FNV-1a (32 bits) over a block's bytes.
uint32_t block_hash(std::span<const uint8_t> bytes);

// The file's bytes, and back: "BSPLAN02", u64 code_bytes, u64 file_offset, u32 count, u32 0,
// then count triples of u32 (start, end, hash; little endian). nullopt: not a plan (an older
// format too), truncated, or an offset out of the mapping.
std::vector<uint8_t> encode_plan(const ModulePlan& plan);
std::optional<ModulePlan> parse_plan(std::span<const uint8_t> bytes);

// Where plans live when nothing is said: $XDG_CACHE_HOME/branchstub/plans, else
// $HOME/.cache/branchstub/plans ("" when neither is set).
std::string default_plan_dir();

class PlanCache {
 public:
  static constexpr size_t kMaxStarts = size_t{1} << 22;  // per module; more are not kept

  explicit PlanCache(std::string dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }

  // The key of the file `path` mapped with inode `inode`: "b" + its build id, else "f" + a hash
  // of its device, inode, size and modification time. "" when the file cannot be read or is no
  // longer the one mapped (replaced since: another inode).
  static std::string key_of(const std::string& path, uint64_t inode);

  std::optional<ModulePlan> load(const std::string& key) const;
  // Writes `plan`, merged with the file's plan when `merge` and that is for the same mapping.
  bool save(const std::string& key, const ModulePlan& plan, bool merge = true) const;

 private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

}  // namespace backend::patch
