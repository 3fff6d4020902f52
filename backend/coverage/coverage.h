// Basic-block coverage from taken branches (what Process Stalker recorded): a block runs from a
// branch target (or from where tracing of a thread began) to the next taken branch, that
// branch instruction included. Blocks and branches are counted, never kept in order, so memory
// grows with the code that ran, not with how long it ran. Each block is attributed to the
// mapping it lies in when first seen, so a library unloaded later keeps its blocks; modules
// are reported with their load addresses and build ids.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/btrace/branch_tracer.h"
#include "backend/coverage/call_tree.h"
#include "backend/x86/block_cache.h"
#include "backend/memory_region.h"

namespace backend {

struct CoverageModule {
  std::string path;             // as the maps file names it; "[vdso]" for the vDSO
  uint64_t base = 0;            // start of the mapping of file offset 0 (the load address)
  uint64_t end = 0;             // end of its highest mapping
  uint64_t entry = 0;           // e_entry at run time; 0 unknown
  uint64_t preferred_base = 0;  // link-time address of `base` (0 for PIE and libraries)
  uint64_t bias = 0;            // run-time address = link-time address + bias
  std::string build_id;         // lower-case hex; "" unknown
  struct Segment { uint64_t start = 0, end = 0, offset = 0; bool exec = false; };
  std::vector<Segment> segments;  // its mappings in address order
};

struct CoveredBlock {
  uint64_t start = 0;  // run-time address
  uint32_t size = 0;   // bytes
  uint32_t insns = 0;  // instructions
  uint64_t count = 0;  // executions
  int module = -1;     // index into CoverageSnapshot::modules; -1: outside every module
};

struct CoveredEdge {
  uint64_t from = 0, to = 0, count = 0;  // a taken branch: its instruction, its target
};

struct CoverageSnapshot {
  std::vector<CoverageModule> modules;
  std::vector<CoveredBlock> blocks;  // sorted by (start, size); each (start, size) once
  std::vector<CoveredEdge> edges;    // sorted by (from, to)
  uint64_t branches = 0;             // taken branches seen
};

class CoverageRecorder : public BranchSink {
 public:
  using MapReader = std::function<Result<std::vector<MemoryRegion>>()>;
  // read_code: the process's original code bytes; memory_map: its current mappings. Both are
  // only called from the sink's callbacks and snapshot(), until detach().
  CoverageRecorder(CodeReader read_code, MapReader memory_map);
  ~CoverageRecorder() override;

  // BranchSink
  void thread_started(pid_t tid, uint64_t pc) override;
  void branch(pid_t tid, uint64_t from, uint64_t to) override;
  void thread_ended(pid_t tid, uint64_t pc) override;

  // Every block and branch from now on also goes to `tree` (null: none).
  void set_call_tree(CallTree* tree) { tree_ = tree; }
  // The process is gone: no more reads of it (code is read from the mapped files instead).
  void detach();

  // What ran so far; for each (tid, pc) in open_until, tid's unfinished block is added as if it
  // ended right before pc (a save while the threads are stopped and recording goes on).
  CoverageSnapshot snapshot(const std::vector<std::pair<pid_t, uint64_t>>& open_until = {});
  uint64_t branch_count() const { return branches_; }
  size_t block_count() const { return blocks_.size(); }
  size_t open_threads() const { return open_.size(); }

  // Reads code as the recorder does: the process while attached, else the mapped file.
  size_t read_code(uint64_t addr, std::span<uint8_t> out);

 private:
  struct Key {
    uint64_t start, end;  // end: the last instruction's address, or with kExclusive an end
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return std::hash<uint64_t>()(k.start * 0x9E3779B97F4A7C15ull ^ k.end); }
  };
  static constexpr uint64_t kExclusive = uint64_t{1} << 63;
  struct BlockInfo { uint32_t size = 0, insns = 0; uint64_t count = 0; int region = -1; };
  struct EdgeInfo { uint64_t count = 0; EdgeKind kind = EdgeKind::Jump; uint64_t after = 0; };

  BlockInfo describe(const Key& key);
  BlockInfo& count_block(pid_t tid, const Key& key);
  std::optional<uint64_t> exit_end(uint64_t start);  // where a thread that exited stopped
  int region_of(uint64_t addr);
  void refresh_regions();

  CodeReader read_process_;
  MapReader memory_map_;
  BlockCache code_;
  CallTree* tree_ = nullptr;
  std::unordered_map<Key, BlockInfo, KeyHash> blocks_;
  std::unordered_map<Key, EdgeInfo, KeyHash> edges_;
  std::unordered_map<pid_t, uint64_t> open_;  // tid -> start of its unfinished block
  std::vector<MemoryRegion> regions_;          // every mapping seen (append only)
  uint64_t branches_ = 0;
};

}  // namespace backend
