// TEST ONLY (branchstub-testfeeds --test-lbr-snapshots=FILE): LBR windows read from a file and
// handed out at the stops whose pc matches, in order, through the server's LbrFeed injection
// point, so that the real stitching runs on what the msr_helper module would have given.
// The file:
//   depth N
//   snap IP [taken=N] FROM:TO FROM:TO ...   (hex; entries newest first, as the module gives
//                                            them; taken= the counter's total, decimal)
#pragma once

#include <sys/types.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backend/btrace/lbr/lbr_feed.h"
#include "backend/error.h"

namespace test_support {

class ReplayLbrFeed final : public backend::LbrFeed {
 public:
  static backend::Result<std::shared_ptr<ReplayLbrFeed>> load(const std::string& path);
  backend::Result<void> arm(pid_t tid) override;
  void release(pid_t tid) override { armed_.erase(tid); }
  bool armed(pid_t tid) const override { return armed_.count(tid) != 0; }
  backend::Result<backend::LbrWindow> window(pid_t tid, uint64_t pc) override;
  std::string name() const override { return "TEST replay of " + path_; }

 private:
  std::string path_;
  std::vector<backend::LbrWindow> snapshots_;
  size_t next_ = 0;     // the next snapshot not handed out
  size_t current_ = 0;  // snapshots handed out so far
  std::set<pid_t> armed_;
};

}  // namespace test_support
