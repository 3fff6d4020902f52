#include "server/process_table.h"

#include <algorithm>

namespace server {

void ProcessTable::add(std::unique_ptr<backend::Process> p) {
  pid_t pid = p->pid();
  entries_[pid] = Entry{std::move(p), false, 0, next_order_++};
}

void ProcessTable::add_fork_child(std::unique_ptr<backend::Process> p, pid_t parent) {
  pid_t pid = p->pid();
  entries_[pid] = Entry{std::move(p), true, parent, next_order_++};
}

backend::Process* ProcessTable::find(pid_t pid) {
  auto it = entries_.find(pid);
  return it == entries_.end() ? nullptr : it->second.process.get();
}

backend::Process* ProcessTable::primary() {
  const Entry* best = nullptr;
  for (const auto& [pid, e] : entries_)
    if (!e.held && (!best || e.order < best->order)) best = &e;
  return best ? best->process.get() : nullptr;
}

std::vector<backend::Process*> ProcessTable::debugged() {
  std::vector<const Entry*> list;
  for (const auto& [pid, e] : entries_)
    if (!e.held) list.push_back(&e);
  std::sort(list.begin(), list.end(), [](const Entry* a, const Entry* b) { return a->order < b->order; });
  std::vector<backend::Process*> out;
  for (const Entry* e : list) out.push_back(e->process.get());
  return out;
}

std::vector<pid_t> ProcessTable::held() const {
  std::vector<pid_t> out;
  for (const auto& [pid, e] : entries_)
    if (e.held) out.push_back(pid);
  return out;
}

bool ProcessTable::is_fork_child(pid_t pid) const {
  auto it = entries_.find(pid);
  return it != entries_.end() && it->second.parent != 0;
}

bool ProcessTable::name(pid_t pid) {
  auto it = entries_.find(pid);
  if (it == entries_.end()) return false;
  it->second.held = false;
  return true;
}

void ProcessTable::name_children_of(pid_t parent) {
  for (auto& [pid, e] : entries_)
    if (e.held && e.parent == parent) e.held = false;
}

std::unique_ptr<backend::Process> ProcessTable::remove(pid_t pid) {
  auto it = entries_.find(pid);
  if (it == entries_.end()) return nullptr;
  auto p = std::move(it->second.process);
  entries_.erase(it);
  return p;
}

std::vector<backend::Process*> ProcessTable::all() {
  auto out = debugged();
  for (auto& [pid, e] : entries_)
    if (e.held) out.push_back(e.process.get());
  return out;
}

}  // namespace server
