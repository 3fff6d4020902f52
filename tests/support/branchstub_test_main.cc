// branchstub-testfeeds: the same server as branchstub, with TEST ONLY options that the shipped
// binary does not have (there they are unknown options). The integration tests start it
// (tests/integration/harness.py) when a test passes one of them:
//   --test-bts-ring=FILE        perf BTS read from FILE, laid out as the kernel's ring
//   --test-pt-aux=FILE          Intel PT read from FILE, laid out as the perf user page + AUX area
//   --test-lbr-snapshots=FILE   LBR windows replayed from FILE (replay_lbr_feed.h)
//   --test-patch-ring=BYTES     --btrace-source=patch's ring in the program holds BYTES (a tiny
//                               ring makes the full-ring trap happen in a short test)
//   --test-history-piece=N      a kept history is sealed N branches a piece (small pieces make
//                               a short test seal and read back many)
//   --test-singleblock          stepbranch uses PTRACE_SINGLEBLOCK even where the probe saw BTF
//                               ignored, so that the block-step classifier's fallback runs there
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "server/run_branchstub.h"
#include "tests/support/file_trace_feeds.h"
#include "tests/support/replay_lbr_feed.h"

namespace {

struct TestOptions {
  std::string bts_ring, pt_aux, lbr_snapshots;
  uint64_t patch_ring = 0;
  size_t history_piece = 0;
  bool singleblock = false;
};

bool take(TestOptions& o, const std::string& arg) {
  auto value = [&](const char* prefix, std::string& out) {
    std::string p(prefix);
    if (!arg.starts_with(p)) return false;
    out = arg.substr(p.size());
    return true;
  };
  if (value("--test-bts-ring=", o.bts_ring) || value("--test-pt-aux=", o.pt_aux) ||
      value("--test-lbr-snapshots=", o.lbr_snapshots))
    return true;
  if (arg.starts_with("--test-patch-ring=")) {
    o.patch_ring = std::strtoull(arg.c_str() + 18, nullptr, 0);
    return true;
  }
  if (arg.starts_with("--test-history-piece=")) {
    o.history_piece = std::strtoull(arg.c_str() + 21, nullptr, 0);
    return true;
  }
  if (arg == "--test-singleblock") {
    o.singleblock = true;
    return true;
  }
  return false;
}

server::ServerHooks hooks_for(const TestOptions& o) {
  server::ServerHooks hooks;
  if (!o.bts_ring.empty() || !o.pt_aux.empty() || o.patch_ring || o.history_piece)
    hooks.trace_feeds = std::make_shared<test_support::FileTraceFeeds>(o.bts_ring, o.pt_aux, o.patch_ring, o.history_piece);
  if (!o.lbr_snapshots.empty()) {
    auto feed = test_support::ReplayLbrFeed::load(o.lbr_snapshots);
    if (feed) hooks.lbr = *feed;
    else hooks.lbr_unavailable = feed.error().message;
  }
  hooks.singleblock = o.singleblock;
  if (!o.bts_ring.empty() || !o.pt_aux.empty() || !o.lbr_snapshots.empty())
    std::fputs("TEST ONLY: branch data is replayed from files (--test-*), not recorded by the hardware.\n", stderr);
  return hooks;
}

}  // namespace

int main(int argc, char** argv) {
  TestOptions options;
  server::MainHooks hooks;
  hooks.take_option = [&](const std::string& arg) { return take(options, arg); };
  hooks.server_hooks = [&] { return hooks_for(options); };
  return server::run_branchstub(argc, argv, hooks);
}
