// Parsing LLDB's packets (protocol/packets/lldb.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("LLDB packets", "[packets][lldb]") {
  as<HostInfo>("qHostInfo");
  as<ProcessInfo>("qProcessInfo");
  CHECK(as<MemoryRegionInfo>("qMemoryRegionInfo:7ffff7fc1000").addr == 0x7ffff7fc1000u);
  CHECK(malformed("qMemoryRegionInfo:"));
  as<ThreadSuffixSupported>("QThreadSuffixSupported");
  as<ListThreadsInStopReply>("QListThreadsInStopReply");
  as<ThreadsInfo>("jThreadsInfo");
  as<EnableErrorStrings>("QEnableErrorStrings");
  as<WatchpointSupportInfo>("qWatchpointSupportInfo");
  as<WatchpointSupportInfo>("qWatchpointSupportInfo:");
  CHECK(as<ThreadStopInfo>("qThreadStopInfo2b").tid == 0x2b);
  CHECK(as<RegisterInfo>("qRegisterInfo1f").regno == 0x1f);
  CHECK(malformed("qRegisterInfo"));
  CHECK(unknown("jThreadExtendedInfo:"));
  CHECK(unknown("qStructuredDataPlugins"));
  CHECK(unknown("qVAttachOrWaitSupported"));
}
