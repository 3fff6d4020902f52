// Execution packets: resuming and stopping threads, branchstub's stepbranch, and the life of
// processes (run, attach, kill, detach, restart). server/handlers/execution.cc answers them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/packets/packet_list.h"
#include "protocol/thread_id.h"

namespace protocol {

// A vCont action as the wire spells it (C and S are c and s with a signal); the server turns it
// into the backend's ResumeKind.
enum class VContOp : char { Continue = 'c', Step = 's', RangeStep = 'r', Stop = 't' };
struct ResumeAction {
  VContOp op = VContOp::Continue;
  int gdb_signal = 0;            // C/S signal in GDB numbering, 0 = none
  uint64_t range_start = 0;      // r start (inclusive)
  uint64_t range_end = 0;        // r end (exclusive)
  std::optional<ThreadId> thread;  // nullopt = default action for every other thread
};
struct VContQuery {};                                             // vCont?
struct VCont { std::vector<ResumeAction> actions; };              // vCont;...
struct LegacyResume { ResumeAction action; std::optional<uint64_t> addr; };  // c/C/s/S
struct VCtrlC {};                                                 // vCtrlC
struct VStopped {};                                               // vStopped (non-stop: next queued stop)
struct StepBranch { uint32_t count = 1; };                        // stepbranch[:N]
// Qbranchstub:stepbranch-next:<thread-id>,<N>: the client's next single step of that thread
// runs it to its N-th next taken branch instead (so the client performs, and reports, the
// resume itself). An optional ;bp:<addr> names a breakpoint of the client's that it lifts for
// that step (the one at the pc it steps over): it is put back for the rest of the run, so the
// thread still stops there when it comes back (a loop). qbranchstub:stepbranch-last: what the
// stepbranch that the last stop ended did.
struct StepBranchNext { ThreadId thread; uint32_t count = 1; std::optional<uint64_t> lifted_breakpoint; };
struct StepBranchLast {};
struct ReverseResume { bool step = false; };                      // bc / bs (thread from Hc)
struct Kill { std::optional<int> pid; };                          // k / vKill;pid
struct Detach { std::optional<int> pid; };                        // D / D;pid
struct VRun { std::vector<std::string> argv; };                   // vRun;hex;hex..
struct VAttach { int pid = 0; };                                  // vAttach;pid
struct Restart {};                                                // R<hex> (extended-remote)

using ExecutionPackets = PacketList<VContQuery, VCont, LegacyResume, VCtrlC, VStopped, StepBranch,
                                    StepBranchNext, StepBranchLast, ReverseResume, Kill, Detach, VRun, VAttach, Restart>;

}  // namespace protocol
