// The packet table as a whole: the families' rows joined (protocol/packets.cc) must parse as
// the single table they replaced did, in the same order and with the same capabilities.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "protocol/packets.h"
#include "protocol/packets/packet_row.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

namespace {

struct OldRow {
  std::string_view name;
  bool exact;
  Capability needs;
};

// The rows of the single kTable that protocol/packets.cc held before the families, and the
// rows added since (qExecAndArgs).
const std::vector<OldRow>& old_table() {
  static const std::vector<OldRow> rows = {
      {"qSupported", false, Capability::Base},
      {"vMustReplyEmpty", true, Capability::Base},
      {"QStartNoAckMode", true, Capability::Base},
      {"!", true, Capability::Base},
      {"?", true, Capability::Base},
      {"qC", true, Capability::Base},
      {"qfThreadInfo", true, Capability::Base},
      {"qsThreadInfo", true, Capability::Base},
      {"qAttached", false, Capability::Base},
      {"qOffsets", true, Capability::Base},
      {"qSymbol:", false, Capability::Base},
      {"qExecAndArgs", true, Capability::Base},
      {"QNonStop:", false, Capability::Base},
      {"QPassSignals:", false, Capability::Base},
      {"QProgramSignals:", false, Capability::Base},
      {"QDisableRandomization:", false, Capability::Base},
      {"QStartupWithShell:", false, Capability::Base},
      {"QEnvironmentHexEncoded:", false, Capability::Base},
      {"QEnvironmentUnset:", false, Capability::Base},
      {"QEnvironmentReset", true, Capability::Base},
      {"QSetWorkingDir:", false, Capability::Base},
      {"QCatchSyscalls:", false, Capability::CatchSyscalls},
      {"QThreadEvents:", false, Capability::ThreadEvents},
      {"QThreadOptions;", false, Capability::ThreadOptions},
      {"qRcmd,", false, Capability::Base},
      {"qGetTLSAddr:", false, Capability::Base},
      {"vCont", false, Capability::Base},
      {"vCtrlC", true, Capability::Base},
      {"vStopped", true, Capability::NonStop},
      {"stepbranch", false, Capability::StepBranch},
      {"Qbranchstub:stepbranch-next:", false, Capability::StepBranch},
      {"qbranchstub:stepbranch-last", true, Capability::StepBranch},
      {"bc", true, Capability::Reverse},
      {"bs", true, Capability::Reverse},
      {"vKill;", false, Capability::Base},
      {"vRun;", false, Capability::Base},
      {"vAttach;", false, Capability::Base},
      {"qXfer:", false, Capability::Base},
      {"vFile:", false, Capability::Base},
      {"Qbtrace-conf:", false, Capability::BtraceBts},
      {"Qbtrace:", false, Capability::BtraceBts},
      {"qHostInfo", true, Capability::Base},
      {"qProcessInfo", true, Capability::Base},
      {"qMemoryRegionInfo:", false, Capability::Base},
      {"QThreadSuffixSupported", true, Capability::Base},
      {"QListThreadsInStopReply", true, Capability::Base},
      {"jThreadsInfo", true, Capability::Base},
      {"QEnableErrorStrings", true, Capability::Base},
      {"qWatchpointSupportInfo", false, Capability::Base},
      {"qThreadStopInfo", false, Capability::Base},
      {"qRegisterInfo", false, Capability::Base},
      {"QTinit", true, Capability::Tracepoints},
      {"QTDPsrc:", false, Capability::Tracepoints},
      {"QTDP:", false, Capability::Tracepoints},
      {"QTDV:", false, Capability::Tracepoints},
      {"QTro", false, Capability::Tracepoints},
      {"QTStart", true, Capability::Tracepoints},
      {"QTStop", true, Capability::Tracepoints},
      {"qTStatus", true, Capability::Tracepoints},
      {"qTP:", false, Capability::Tracepoints},
      {"qTV:", false, Capability::Tracepoints},
      {"QTFrame:", false, Capability::Tracepoints},
      {"QTBuffer:", false, Capability::Tracepoints},
      {"QTDisconnected:", false, Capability::Tracepoints},
      {"QTNotes:", false, Capability::Tracepoints},
      {"qTfP", true, Capability::Tracepoints},
      {"qTsP", true, Capability::Tracepoints},
      {"qTfV", true, Capability::Tracepoints},
      {"qTsV", true, Capability::Tracepoints},
      {"qTBuffer:", false, Capability::Tracepoints},
      {"QTEnable:", false, Capability::Tracepoints},
      {"QTDisable:", false, Capability::Tracepoints},
      {"qTMinFTPILen", true, Capability::Tracepoints},
      {"H", false, Capability::Base},
      {"T", false, Capability::Base},
      {"g", false, Capability::Base},
      {"G", false, Capability::Base},
      {"p", false, Capability::Base},
      {"P", false, Capability::Base},
      {"m", false, Capability::Base},
      {"x", false, Capability::Base},
      {"M", false, Capability::Base},
      {"X", false, Capability::Base},
      {"c", false, Capability::Base},
      {"C", false, Capability::Base},
      {"s", false, Capability::Base},
      {"S", false, Capability::Base},
      {"k", true, Capability::Base},
      {"D", false, Capability::Base},
      {"R", false, Capability::Base},
      {"Z", false, Capability::Base},
      {"z", false, Capability::Base},
  };
  return rows;
}

}  // namespace

TEST_CASE("the packet table keeps the rows, order and capabilities of the single table", "[packets]") {
  auto table = packet_table();
  REQUIRE(table.size() == old_table().size());
  for (size_t i = 0; i < table.size(); ++i) {
    INFO("row " << i << ": " << old_table()[i].name);
    CHECK(table[i].name == old_table()[i].name);
    CHECK(table[i].exact == old_table()[i].exact);
    CHECK(table[i].needs == old_table()[i].needs);
  }
}

TEST_CASE("every packet name of the single table parses to the same request type", "[packets]") {
  // One payload per row of the old table, in its order.
  as<QuerySupported>("qSupported:swbreak+");
  as<MustReplyEmpty>("vMustReplyEmpty");
  as<StartNoAckMode>("QStartNoAckMode");
  as<EnableExtendedMode>("!");
  as<QueryHaltReason>("?");
  as<QueryCurrentThread>("qC");
  as<ThreadInfoFirst>("qfThreadInfo");
  as<ThreadInfoNext>("qsThreadInfo");
  as<QueryAttached>("qAttached:1");
  as<QueryOffsets>("qOffsets");
  as<QuerySymbol>("qSymbol::");
  as<TraceStatusQuery>("qTStatus");
  as<SetNonStop>("QNonStop:1");
  as<SetPassSignals>("QPassSignals:e;");
  as<SetProgramSignals>("QProgramSignals:e;");
  as<SetDisableRandomization>("QDisableRandomization:1");
  as<SetStartupWithShell>("QStartupWithShell:1");
  as<SetEnvironment>("QEnvironmentHexEncoded:413d31");
  as<UnsetEnvironment>("QEnvironmentUnset:41");
  as<ResetEnvironment>("QEnvironmentReset");
  as<SetWorkingDir>("QSetWorkingDir:2f");
  as<SetCatchSyscalls>("QCatchSyscalls:1");
  as<SetThreadEvents>("QThreadEvents:1");
  as<SetThreadOptions>("QThreadOptions;0");
  as<Monitor>("qRcmd,68");
  as<GetTlsAddress>("qGetTLSAddr:1,0,0");
  as<VCont>("vCont;c");
  as<VContQuery>("vCont?");
  as<VCtrlC>("vCtrlC");
  as<VStopped>("vStopped");
  as<StepBranch>("stepbranch");
  as<StepBranch>("stepbranch:2");
  as<StepBranchNext>("Qbranchstub:stepbranch-next:1,1");
  as<StepBranchLast>("qbranchstub:stepbranch-last");
  CHECK(as<ReverseResume>("bc").step == false);
  CHECK(as<ReverseResume>("bs").step == true);
  as<Kill>("vKill;1");
  as<VRun>("vRun;2f");
  as<VAttach>("vAttach;1");
  as<XferRead>("qXfer:features:read:target.xml:0,10");
  as<XferWrite>("qXfer:siginfo:write::0:a");
  as<FileClose>("vFile:close:1");
  as<BtraceConf>("Qbtrace-conf:bts:size=0x1000");
  as<BtraceEnable>("Qbtrace:bts");
  as<HostInfo>("qHostInfo");
  as<ProcessInfo>("qProcessInfo");
  as<MemoryRegionInfo>("qMemoryRegionInfo:0");
  as<ThreadSuffixSupported>("QThreadSuffixSupported");
  as<ListThreadsInStopReply>("QListThreadsInStopReply");
  as<ThreadsInfo>("jThreadsInfo");
  as<EnableErrorStrings>("QEnableErrorStrings");
  as<WatchpointSupportInfo>("qWatchpointSupportInfo");
  as<ThreadStopInfo>("qThreadStopInfo1");
  as<RegisterInfo>("qRegisterInfo0");
  as<SetThread>("Hg0");
  as<ThreadAlive>("T1");
  as<ReadRegisters>("g");
  as<WriteRegisters>("G00");
  as<ReadRegister>("p0");
  as<WriteRegister>("P0=00");
  as<ReadMemory>("m0,1");
  as<ReadMemory>("x0,1");
  as<WriteMemory>("M0,1:00");
  as<WriteMemory>("X0,1:a");
  as<LegacyResume>("c");
  as<LegacyResume>("C05");
  as<LegacyResume>("s");
  as<LegacyResume>("S05");
  as<Kill>("k");
  as<Detach>("D");
  as<Restart>("R00");
  as<InsertBreakpoint>("Z0,1,1");
  as<RemoveBreakpoint>("z0,1,1");
  // A default Request is still a qSupported.
  STATIC_REQUIRE(std::is_same_v<std::variant_alternative_t<0, Request>, QuerySupported>);
}

TEST_CASE("no packet row is hidden by an earlier prefix row", "[packets]") {
  auto table = packet_table();
  for (size_t later = 0; later < table.size(); ++later) {
    for (size_t earlier = 0; earlier < later; ++earlier) {
      INFO(table[earlier].name << " before " << table[later].name);
      CHECK_FALSE((!table[earlier].exact && table[later].name.starts_with(table[earlier].name)));
      CHECK_FALSE(table[later].name == table[earlier].name);
    }
  }
}

TEST_CASE("a packet whose capability is missing is unknown", "[packets]") {
  for (const PacketRow& row : packet_table()) {
    if (row.needs == Capability::Base) continue;
    INFO(row.name);
    CHECK(std::holds_alternative<Unknown>(parse_request(row.name, Capabilities{})));
    CHECK(std::holds_alternative<Unknown>(parse_request(row.name, Capabilities::all().set(row.needs, false))));
  }
}
