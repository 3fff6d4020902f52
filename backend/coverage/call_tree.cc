#include "backend/coverage/call_tree.h"

#include <algorithm>

namespace backend {

namespace {
// (parent, function) packed into one key: node ids stay far below 2^32 and the function
// address is mixed in; collisions are told apart by checking the node found.
uint64_t key_of(uint32_t parent, uint64_t function) {
  return (function * 0x9E3779B97F4A7C15ull) ^ (uint64_t{parent} << 1) ^ (uint64_t{parent} << 33);
}
}  // namespace

CallTree::CallTree(FunctionOf function_of) : function_of_(std::move(function_of)) { nodes_.push_back(Node{}); }

uint32_t CallTree::resolve(uint32_t node) const {
  while (nodes_[node].merged_into != UINT32_MAX) node = nodes_[node].merged_into;
  return node;
}

uint32_t CallTree::child(uint32_t parent, uint64_t function) {
  parent = resolve(parent);
  uint64_t key = key_of(parent, function);
  if (auto it = index_.find(key); it != index_.end()) {
    uint32_t n = resolve(it->second);
    if (nodes_[n].parent == parent && nodes_[n].function == function) return n;
  }
  // Not indexed (or a hash collision): look through the children themselves.
  for (uint32_t c : nodes_[parent].children)
    if (live(c) && nodes_[c].function == function) return index_[key] = c;
  uint32_t id = static_cast<uint32_t>(nodes_.size());
  Node n;
  n.function = function;
  n.parent = parent;
  nodes_.push_back(std::move(n));
  nodes_[parent].children.push_back(id);
  index_[key] = id;
  return id;
}

void CallTree::thread_started(pid_t tid, uint64_t pc) {
  uint32_t n = child(kRoot, function_of_(pc));
  ++nodes_[n].calls;
  stacks_[tid] = {Frame{n, 0}};
}

void CallTree::instructions(pid_t tid, uint64_t n) {
  auto it = stacks_.find(tid);
  if (it == stacks_.end() || it->second.empty()) return;
  nodes_[resolve(it->second.back().node)].self += n;
}

void CallTree::merge(uint32_t from, uint32_t into) {
  if (from == into) return;
  nodes_[into].self += nodes_[from].self;
  nodes_[into].calls += nodes_[from].calls;
  auto children = std::move(nodes_[from].children);
  nodes_[from].children.clear();
  nodes_[from].merged_into = into;
  for (uint32_t c : children) {
    if (!live(c)) continue;
    uint32_t same = UINT32_MAX;
    for (uint32_t d : nodes_[into].children)
      if (live(d) && nodes_[d].function == nodes_[c].function) same = d;
    if (same != UINT32_MAX) {
      merge(c, same);
    } else {
      nodes_[c].parent = into;
      nodes_[into].children.push_back(c);
      index_[key_of(into, nodes_[c].function)] = c;
    }
  }
}

void CallTree::reroot(std::vector<Frame>& stack, uint64_t function) {
  uint32_t bottom = resolve(stack.front().node);
  uint32_t parent = nodes_[bottom].parent;
  if (parent != kRoot) {
    // Another thread already found this frame's caller.
    if (nodes_[parent].function == function) stack = {Frame{parent, 0}};
    else stack = {Frame{child(kRoot, function), 0}};
    return;
  }
  uint32_t caller = child(kRoot, function);
  stack = {Frame{caller, 0}};
  if (caller == bottom) return;
  auto& siblings = nodes_[kRoot].children;
  siblings.erase(std::remove(siblings.begin(), siblings.end(), bottom), siblings.end());
  index_.erase(key_of(kRoot, nodes_[bottom].function));
  uint32_t same = UINT32_MAX;
  for (uint32_t d : nodes_[caller].children)
    if (live(d) && nodes_[d].function == nodes_[bottom].function) same = d;
  if (same != UINT32_MAX) {
    merge(bottom, same);
  } else {
    nodes_[bottom].parent = caller;
    nodes_[caller].children.push_back(bottom);
    index_[key_of(caller, nodes_[bottom].function)] = bottom;
  }
}

void CallTree::branch(pid_t tid, EdgeKind kind, uint64_t to, uint64_t after) {
  auto& stack = stacks_[tid];
  if (stack.empty()) return thread_started(tid, to);
  if (kind == EdgeKind::Call || kind == EdgeKind::Async) {
    uint32_t n = child(stack.back().node, function_of_(to));
    ++nodes_[n].calls;
    stack.push_back(Frame{n, after});
    return;
  }
  uint64_t function = function_of_(to);
  if (kind == EdgeKind::Return) {
    for (size_t i = stack.size(); i-- > 1;)
      if (stack[i].return_to == to) {
        stack.resize(i);
        return;
      }
    if (stack.size() == 1 && nodes_[resolve(stack.back().node)].function != function) return reroot(stack, function);
  }
  // A jump (or a return that matches no frame) into another function: a tail call.
  uint32_t top = resolve(stack.back().node);
  if (nodes_[top].function == function) return;
  uint32_t n = child(nodes_[top].parent, function);
  ++nodes_[n].calls;
  stack.back().node = n;
}

void CallTree::thread_ended(pid_t tid) { stacks_.erase(tid); }

uint64_t CallTree::total(uint32_t node) const {
  uint64_t sum = 0;
  std::vector<uint32_t> todo{node};
  while (!todo.empty()) {
    uint32_t n = todo.back();
    todo.pop_back();
    sum += nodes_[n].self;
    for (uint32_t c : nodes_[n].children)
      if (live(c)) todo.push_back(c);
  }
  return sum;
}

}  // namespace backend
