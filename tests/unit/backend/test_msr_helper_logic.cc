// msr_helper's pure decisions (kmod-helper/msr_helper_logic.h), on CPU models, paging modes and
// register states no test machine has. The module includes the same header.
#include <catch2/catch.hpp>

#include "kmod-helper/msr_helper_logic.h"

TEST_CASE("msr_helper layout: the LBR MSRs of each model family", "[msr-helper]") {
  auto l = msrh_layout_for(0x9e, 5);  // Kaby/Coffee Lake
  CHECK(l.depth == 32);
  CHECK(l.from == 0x680);
  CHECK(l.to == 0x6c0);
  CHECK(l.info == 0xdc0);
  CHECK(msrh_lbr_pt_coexist(&l));
  l = msrh_layout_for(0x3c, 4);  // Haswell: 16 entries, flags in FROM, no LBR_INFO
  CHECK(l.depth == 16);
  CHECK(l.from == 0x680);
  CHECK(l.info == 0);
  CHECK_FALSE(msrh_lbr_pt_coexist(&l));
  l = msrh_layout_for(0x37, 3);  // Silvermont
  CHECK(l.depth == 8);
  CHECK(l.from == 0x40);
  CHECK(l.to == 0x60);
  l = msrh_layout_for(0x17, 1);  // Core 2
  CHECK(l.depth == 4);
  CHECK(l.from == 0x40);
  l = msrh_layout_for(0x5c, 5);  // Goldmont: the Skylake layout
  CHECK(l.depth == 32);
  CHECK(l.info == 0xdc0);
  l = msrh_layout_for(0xee, 5);  // a model not in the tables, format 5: Skylake-like
  CHECK(l.depth == 32);
  l = msrh_layout_for(0xee, 0);
  CHECK(l.depth == 0);
}

TEST_CASE("msr_helper layout: Knights Landing and Knights Mill use the Nehalem MSRs", "[msr-helper]") {
  // (issue 10: they were given the Atom addresses 0x40/0x60)
  for (unsigned model : {0x57u, 0x85u})
    for (unsigned fmt : {0u, 3u, 5u}) {
      auto l = msrh_layout_for(model, fmt);
      INFO("model " << model << " format " << fmt);
      CHECK(l.depth == 8);
      CHECK(l.from == 0x680);
      CHECK(l.to == 0x6c0);
      CHECK(l.info == 0);
    }
}

TEST_CASE("msr_helper canonical addresses with 4- and 5-level paging", "[msr-helper]") {
  CHECK(msrh_canonical(0x00007fffdeadb000ull, 48) == 0x00007fffdeadb000ull);
  CHECK(msrh_canonical(0x0000ffff81000000ull, 48) == 0xffffffff81000000ull);
  // 5-level paging: user space reaches 0x00ff_ffff_ffff_f000; bit 47 is an address bit
  // (issue 10: canonicalising at bit 47 turned such user addresses into kernel ones)
  CHECK(msrh_canonical(0x0000900000001234ull, 57) == 0x0000900000001234ull);
  CHECK(msrh_canonical(0x00fffffffffff000ull, 57) == 0x00fffffffffff000ull);  // top of user space
  CHECK(msrh_canonical(0x0100000000000000ull, 57) == 0xff00000000000000ull);  // bit 56: kernel half
  // format 4 keeps MISPRED/IN_TX/ABORT in FROM bits 63..61: the sign replaces them
  CHECK(msrh_canonical(0xe00055555555a123ull, 48) == 0x000055555555a123ull);
  CHECK(msrh_canonical(0xe00055555555a123ull, 57) == 0x000055555555a123ull);
}

TEST_CASE("msr_helper busy rule: a stale LBR_SELECT is not a user, BTS and PT are", "[msr-helper]") {
  CHECK(msrh_busy(0, 0, 1) == 0u);
  // perf's LBR users and KVM's vLBR turn DEBUGCTL.LBR on
  CHECK(msrh_busy(MSRH_DEBUGCTL_LBR, 0, 1) == MSRH_BUSY_LBR);
  // perf's BTS event (TR|BTS): perf never lets BTS and LBR users share the hardware
  CHECK(msrh_busy(MSRH_DEBUGCTL_TR | MSRH_DEBUGCTL_BTS, 0, 1) == MSRH_BUSY_BTS);
  // PT tracing: a conflict only where perf keeps LBR and PT apart (before Skylake/Goldmont)
  CHECK(msrh_busy(0, MSRH_RTIT_CTL_TRACEEN, 0) == MSRH_BUSY_PT);
  CHECK(msrh_busy(0, MSRH_RTIT_CTL_TRACEEN, 1) == 0u);
  // DEBUGCTL bits that are nobody's LBR (BTF, FREEZE_*) do not count
  CHECK(msrh_busy((1ull << 1) | (1ull << 11), 0, 1) == 0u);
}

TEST_CASE("msr_helper: at switch-out the LBR is still the module's only if nobody reprogrammed it", "[msr-helper]") {
  CHECK(msrh_still_ours(MSRH_LBR_SELECT_USER, MSRH_DEBUGCTL_LBR));
  CHECK(msrh_still_ours(MSRH_LBR_SELECT_USER, 0));                 // a #DB froze it: still ours
  CHECK_FALSE(msrh_still_ours(0x1c4, MSRH_DEBUGCTL_LBR));          // perf's own filter now
  CHECK_FALSE(msrh_still_ours(MSRH_LBR_SELECT_USER, MSRH_DEBUGCTL_LBR | MSRH_DEBUGCTL_BTS));
}
