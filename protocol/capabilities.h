// What the server can do, as the protocol names it. The server derives one set from what the
// backend and the probe report (server/capabilities.cc); the packet table (packets.cc), the
// qSupported rows (qsupported.cc) and the qXfer objects each name the capability they need,
// so a feature is listed exactly when its packets are served, and a packet whose capability is
// missing gets the empty "unsupported" reply.
#pragma once

#include <bitset>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace protocol {

enum class Capability : uint8_t {
  Base,            // what every server serves: registers, memory, resume, breakpoints...
  BtraceBts,       // Qbtrace:bts/off, Qbtrace-conf:bts:size, qXfer:btrace(-conf):read
  BtracePt,        // Qbtrace:pt, Qbtrace-conf:pt:size (Intel PT data)
  CatchSyscalls,   // QCatchSyscalls
  ForkEvents,      // fork stops
  VforkEvents,     // vfork / vforkdone stops
  ExecEvents,      // exec stops with the new image's path
  NoResumed,       // 'N' when every resumed thread has exited
  NonStop,         // QNonStop:1 and the asynchronous stop notifications
  ThreadEvents,    // QThreadEvents: thread creation/exit stops
  ThreadOptions,   // QThreadOptions (GDB 15): per-thread clone and exit events
  StepBranch,      // stepbranch, stepbranch:N (branchstub's)
  Reverse,         // bc, bs: reverse execution (a replay)
  ConditionalBreakpoints,  // Z0/Z1 ;X conditions evaluated in the server
  BreakpointCommands,      // Z0/Z1 ;cmds: run in the server (dprintf-style agent)
  Tracepoints,     // QTinit, QTDP, QTStart, qTStatus, QTFrame...: GDB's tracepoints
  Count
};

std::string_view capability_name(Capability c);

class Capabilities {
 public:
  static constexpr size_t kCount = static_cast<size_t>(Capability::Count);
  // Base alone.
  Capabilities() { set(Capability::Base); }
  // Every capability (parser tests, fuzzing: every packet form is parsed).
  static Capabilities all() {
    Capabilities c;
    c.bits_.set();
    return c;
  }
  bool has(Capability c) const { return bits_.test(static_cast<size_t>(c)); }
  Capabilities& set(Capability c, bool on = true) {
    bits_.set(static_cast<size_t>(c), on);
    return *this;
  }
  bool operator==(const Capabilities&) const = default;

 private:
  std::bitset<kCount> bits_;
};

}  // namespace protocol
