// What a test build of the server (tests/support/branchstub_test_main.cc) hands the server on
// top of its options: branch data served from files instead of the hardware, a mechanism the
// probe refused forced on. The shipped branchstub hands none of it.
#pragma once

#include <memory>
#include <string>

#include "backend/btrace/lbr/lbr_feed.h"
#include "backend/btrace/trace_feeds.h"

namespace server {

struct ServerHooks {
  std::shared_ptr<backend::TraceFeeds> trace_feeds;  // BTS, PT, the patch ring's size
  // LBR windows from `lbr` instead of the msr_helper device; where the hook's feed could not be
  // made, lbr is null and lbr_unavailable says why. Both empty: the device, as always.
  std::shared_ptr<backend::LbrFeed> lbr;
  std::string lbr_unavailable;
  // stepbranch uses PTRACE_SINGLEBLOCK even where the probe saw BTF ignored, so that the
  // block-step classifier's fallback runs on such hosts.
  bool singleblock = false;
};

}  // namespace server
