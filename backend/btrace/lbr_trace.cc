#include "backend/btrace/lbr_trace.h"

#include <set>

namespace backend {

TraceManager::LbrReader make_lbr_reader(std::shared_ptr<LbrDevice> device) {
  auto attached = std::make_shared<std::set<pid_t>>();
  return [device, attached](pid_t tid, uint64_t* sequence) -> std::vector<Branch> {
    *sequence = 0;
    if (!attached->count(tid)) {
      if (!device->attach(tid)) return {};
      attached->insert(tid);
      return {};
    }
    auto snapshot = device->snapshot(tid);
    if (!snapshot) return {};
    *sequence = snapshot->seq;
    std::vector<Branch> oldest_first;
    for (uint32_t i = snapshot->count; i-- > 0;)
      oldest_first.push_back(Branch{snapshot->entries[i].from, snapshot->entries[i].to});
    return oldest_first;
  };
}

}  // namespace backend
