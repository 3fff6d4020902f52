#include "server/capabilities.h"

namespace server {

protocol::Capabilities derive_capabilities(const backend::Features& f) {
  using protocol::Capability;
  protocol::Capabilities c;
  c.set(Capability::BtraceBts, f.branch_trace);
  c.set(Capability::BtracePt, f.intel_pt);
  c.set(Capability::CatchSyscalls, f.catch_syscalls);
  c.set(Capability::ForkEvents, f.fork_events);
  c.set(Capability::VforkEvents, f.fork_events);
  c.set(Capability::ExecEvents, f.exec_events);
  c.set(Capability::NoResumed, f.no_resumed);
  c.set(Capability::NonStop, f.non_stop);
  c.set(Capability::ThreadEvents, f.thread_events);
  c.set(Capability::ThreadOptions, f.thread_options);
  c.set(Capability::StepBranch, f.stepbranch);
  c.set(Capability::Reverse, f.reverse);
  c.set(Capability::Tracepoints, f.tracepoints);
  c.set(Capability::ConditionalBreakpoints, f.breakpoint_conditions);
  // Commands come in the same Z packets as conditions: no commands without conditions.
  c.set(Capability::BreakpointCommands, f.breakpoint_commands && f.breakpoint_conditions);
  return c;
}

}  // namespace server
