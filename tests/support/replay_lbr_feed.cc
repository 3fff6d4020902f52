#include "tests/support/replay_lbr_feed.h"

#include <cerrno>
#include <fstream>
#include <sstream>

namespace test_support {

using backend::Branch;
using backend::Error;
using backend::LbrWindow;
using backend::Result;

Result<std::shared_ptr<ReplayLbrFeed>> ReplayLbrFeed::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{ENOENT, "TEST LBR snapshot file " + path + ": cannot be read"};
  auto feed = std::shared_ptr<ReplayLbrFeed>(new ReplayLbrFeed());
  feed->path_ = path;
  uint32_t depth = 0;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream words(line);
    std::string kind;
    if (!(words >> kind) || kind[0] == '#') continue;
    auto bad = [&] { return Error{EINVAL, "TEST LBR snapshot file " + path + ":" + std::to_string(n) + ": bad line"}; };
    if (kind == "depth") {
      if (!(words >> depth) || depth == 0) return bad();
      continue;
    }
    if (kind != "snap") return bad();
    LbrWindow w;
    std::string ip;
    if (!(words >> ip)) return bad();
    w.ip = std::stoull(ip, nullptr, 16);
    w.depth = depth;
    w.simulated = true;
    w.from_trap = true;  // the replayed stops are breakpoint stops
    std::vector<Branch> newest_first;
    for (std::string e; words >> e;) {
      if (e.rfind("taken=", 0) == 0) {
        w.taken_total = std::stoull(e.substr(6));
        continue;
      }
      size_t colon = e.find(':');
      if (colon == std::string::npos) return bad();
      newest_first.push_back(Branch{std::stoull(e.substr(0, colon), nullptr, 16), std::stoull(e.substr(colon + 1), nullptr, 16)});
    }
    if (depth && newest_first.size() > depth) return bad();
    w.oldest_first.assign(newest_first.rbegin(), newest_first.rend());
    feed->snapshots_.push_back(std::move(w));
  }
  return feed;
}

Result<void> ReplayLbrFeed::arm(pid_t tid) {
  armed_.insert(tid);
  return {};
}

Result<LbrWindow> ReplayLbrFeed::window(pid_t tid, uint64_t pc) {
  if (!armed_.count(tid)) return Error{ENOENT, "not armed"};
  // The next snapshot belongs to the next stop at its ip; other stops (GDB's step over a
  // breakpoint) bring nothing new, like a stop that took no branch.
  if (next_ < snapshots_.size() && snapshots_[next_].ip == pc) current_ = ++next_;
  if (current_ == 0) return LbrWindow{};
  LbrWindow w = snapshots_[current_ - 1];
  w.sequence = current_;
  return w;
}

}  // namespace test_support
