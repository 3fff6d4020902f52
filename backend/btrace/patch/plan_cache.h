// The block-patching source's warm plan (issue 30): where a recording of a module had to stop
// to explore (the block starts its exploration began from), kept on disk between runs and keyed
// by the module file's build id, so that the next recording of the same file explores all of
// them at its first stop there instead of stopping at each one again.
//
// A plan holds only addresses, never code: each block start with the address of the
// control-flow instruction that ends its block, both as offsets from the start of the module's
// executable mapping. The tracer decodes every start again from the program's bytes and drops
// one whose block does not end where the plan says, so a stale or damaged file can cost
// exploration, never a wrong patch. Files: DIR/<key>.plan, written whole (a temporary file
// renamed over the old one), merged with what is there.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backend::patch {

struct ModulePlan {
  uint64_t code_bytes = 0;  // the size of the executable mapping the offsets are in
  uint64_t file_offset = 0;  // the file offset that mapping starts at
  std::vector<std::pair<uint32_t, uint32_t>> starts;  // (block start, its block end), sorted, unique
};

// The file's bytes, and back: "BSPLAN01", u64 code_bytes, u64 file_offset, u32 count, u32 0,
// then count pairs of u32 (little endian). nullopt: not a plan, truncated, or an offset out of
// the mapping.
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
