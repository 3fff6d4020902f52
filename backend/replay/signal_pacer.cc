#include "backend/replay/signal_pacer.h"

namespace backend::replay {

SignalPacer::Action SignalPacer::arrived(siginfo_t* si, bool ours, bool in_user_code, int64_t cpu_ns) {
  int sig = si->si_signo;
  if (ours) {
    auto it = held_.find(sig);
    if (it == held_.end()) return Action::Drop;
    *si = it->second;
    held_.erase(it);
    raised_.erase(sig);
    last_delivery_ = cpu_ns;
    return Action::Deliver;
  }
  bool too_soon = cpu_ns - last_delivery_ < kMinRunNs;
  if (sig < SIGRTMIN && in_user_code && too_soon) {
    if (held_.emplace(sig, *si).second) ++holds_;  // one of its kind already held: merged into it
    raised_.erase(sig);  // this may be its raise, merged by the kernel: raised again when due
    return Action::Hold;
  }
  // Delivered now: one of its kind still held is merged into this one (its raise, if sent, drops).
  if (held_.erase(sig)) raised_.erase(sig);
  last_delivery_ = cpu_ns;
  return Action::Deliver;
}

std::vector<int> SignalPacer::due(int64_t cpu_ns, bool sleeping) {
  std::vector<int> out;
  if (!sleeping && cpu_ns - last_delivery_ < kMinRunNs) return out;
  for (const auto& [sig, si] : held_)
    if (raised_.insert(sig).second) out.push_back(sig);
  return out;
}

}  // namespace backend::replay
