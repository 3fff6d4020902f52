#include "protocol/capabilities.h"

namespace protocol {

std::string_view capability_name(Capability c) {
  switch (c) {
    case Capability::Base: return "base";
    case Capability::BtraceBts: return "btrace-bts";
    case Capability::BtracePt: return "btrace-pt";
    case Capability::CatchSyscalls: return "catch-syscalls";
    case Capability::ForkEvents: return "fork-events";
    case Capability::VforkEvents: return "vfork-events";
    case Capability::ExecEvents: return "exec-events";
    case Capability::NoResumed: return "no-resumed";
    case Capability::NonStop: return "non-stop";
    case Capability::ThreadEvents: return "thread-events";
    case Capability::ThreadOptions: return "thread-options";
    case Capability::StepBranch: return "stepbranch";
    case Capability::Reverse: return "reverse";
    case Capability::ConditionalBreakpoints: return "conditional-breakpoints";
    case Capability::BreakpointCommands: return "breakpoint-commands";
    case Capability::Tracepoints: return "tracepoints";
    case Capability::Count: break;
  }
  return "?";
}

}  // namespace protocol
