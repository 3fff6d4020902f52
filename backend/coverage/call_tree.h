// A call tree built while branches stream by, for flame graphs (width = instructions): no
// history is kept, only one node per distinct call path. Each thread keeps a stack of frames;
// a call pushes one (remembering its return address), a return pops back to the frame whose
// return address it lands on, a jump into another function (tail call, PLT stub to its target)
// replaces the top frame, and an asynchronous transfer (signal delivery) pushes like a call.
// A return past the bottom frame (recording began inside a callee) puts the function it lands
// in under the root and the old bottom frame under it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

namespace backend {

enum class EdgeKind : uint8_t { Call, Return, Jump, Async };

class CallTree {
 public:
  // The start of the function holding addr (addr itself when no symbol covers it).
  using FunctionOf = std::function<uint64_t(uint64_t addr)>;
  static constexpr uint32_t kRoot = 0;

  struct Node {
    uint64_t function = 0;  // 0 for the root
    uint32_t parent = kRoot;
    uint64_t self = 0;      // instructions executed in this frame itself
    uint64_t calls = 0;     // times the frame was entered
    std::vector<uint32_t> children;
    uint32_t merged_into = UINT32_MAX;  // re-rooting merged it into another node
  };

  explicit CallTree(FunctionOf function_of);

  void thread_started(pid_t tid, uint64_t pc);
  void instructions(pid_t tid, uint64_t n);  // executed in tid's current frame
  // A taken branch of tid; `after` = the address after the branch instruction (a call's return
  // address).
  void branch(pid_t tid, EdgeKind kind, uint64_t to, uint64_t after);
  void thread_ended(pid_t tid);

  const std::vector<Node>& nodes() const { return nodes_; }
  // Instructions of the node and everything under it.
  uint64_t total(uint32_t node) const;
  bool live(uint32_t node) const { return nodes_[node].merged_into == UINT32_MAX; }

 private:
  struct Frame { uint32_t node; uint64_t return_to; };
  uint32_t child(uint32_t parent, uint64_t function);
  uint32_t resolve(uint32_t node) const;
  void merge(uint32_t from, uint32_t into);
  void reroot(std::vector<Frame>& stack, uint64_t function);

  FunctionOf function_of_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> index_;  // hash(parent, function) -> node
  std::unordered_map<pid_t, std::vector<Frame>> stacks_;
};

}  // namespace backend
