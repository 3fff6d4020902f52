// One handler per request type; Session::dispatch picks the overload with std::visit.
// Grouped by feature: general.cc, registers_memory.cc, execution.cc, breakpoints.cc, xfer.cc,
// host_io.cc, btrace.cc, lldb.cc, tls.cc, monitor.cc, tracepoints.cc.
#pragma once

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "backend/btrace/branch_tracer.h"
#include "backend/process.h"
#include "protocol/packets.h"
#include "protocol/replies.h"
#include "server/session.h"

namespace server {

using namespace protocol;  // request and reply types; handlers read like the packet table

// general.cc
Reply handle(Session&, const QuerySupported&);
Reply handle(Session&, const MustReplyEmpty&);
Reply handle(Session&, const QueryExecAndArgs&);
Reply handle(Session&, const StartNoAckMode&);
Reply handle(Session&, const EnableExtendedMode&);
Reply handle(Session&, const QueryHaltReason&);
Reply handle(Session&, const SetThread&);
Reply handle(Session&, const QueryCurrentThread&);
Reply handle(Session&, const ThreadAlive&);
Reply handle(Session&, const ThreadInfoFirst&);
Reply handle(Session&, const ThreadInfoNext&);
Reply handle(Session&, const QueryAttached&);
Reply handle(Session&, const QueryOffsets&);
Reply handle(Session&, const QuerySymbol&);
Reply handle(Session&, const SetNonStop&);
Reply handle(Session&, const SetPassSignals&);
Reply handle(Session&, const SetProgramSignals&);
Reply handle(Session&, const SetDisableRandomization&);
Reply handle(Session&, const SetStartupWithShell&);
Reply handle(Session&, const SetEnvironment&);
Reply handle(Session&, const UnsetEnvironment&);
Reply handle(Session&, const ResetEnvironment&);
Reply handle(Session&, const SetWorkingDir&);
Reply handle(Session&, const SetCatchSyscalls&);
Reply handle(Session&, const SetThreadEvents&);
Reply handle(Session&, const SetThreadOptions&);
Reply handle(Session&, const Malformed&);
Reply handle(Session&, const Unknown&);

// tracepoints.cc
Reply handle(Session&, const TraceInit&);
Reply handle(Session&, const TraceDefine&);
Reply handle(Session&, const TraceDefineActions&);
Reply handle(Session&, const TraceDefineSource&);
Reply handle(Session&, const TraceDefineVariable&);
Reply handle(Session&, const TraceReadOnlyRegions&);
Reply handle(Session&, const TraceStart&);
Reply handle(Session&, const TraceStop&);
Reply handle(Session&, const TraceStatusQuery&);
Reply handle(Session&, const TracepointStatusQuery&);
Reply handle(Session&, const TraceVariableQuery&);
Reply handle(Session&, const TraceFrameSelect&);
Reply handle(Session&, const TraceBufferCircular&);
Reply handle(Session&, const TraceBufferSize&);
Reply handle(Session&, const TraceDisconnected&);
Reply handle(Session&, const TraceNotes&);
Reply handle(Session&, const TraceUploadPoints&);
Reply handle(Session&, const TraceUploadVariables&);
Reply handle(Session&, const TraceBufferRead&);
Reply handle(Session&, const TraceEnable&);
Reply handle(Session&, const TraceMinFastInsnLen&);
// The frame tfind selected (nullopt: the live program): what g/p/m read instead.
std::optional<size_t> selected_trace_frame(Session& s);
Reply trace_frame_registers(Session& s, std::optional<int> regno);
Reply trace_frame_memory(Session& s, const ReadMemory& m);
std::optional<std::string> traceframe_info_document(Session& s, Reply& error_out);
std::string tracepoints_text(Session& s);  // monitor tracepoints

// registers_memory.cc
Reply handle(Session&, const ReadRegisters&);
Reply handle(Session&, const WriteRegisters&);
Reply handle(Session&, const ReadRegister&);
Reply handle(Session&, const WriteRegister&);
Reply handle(Session&, const ReadMemory&);
Reply handle(Session&, const WriteMemory&);

// execution.cc
Reply handle(Session&, const VContQuery&);
Reply handle(Session&, const VCont&);
Reply handle(Session&, const LegacyResume&);
Reply handle(Session&, const VCtrlC&);
Reply handle(Session&, const VStopped&);
Reply handle(Session&, const StepBranch&);
Reply handle(Session&, const StepBranchNext&);
Reply handle(Session&, const StepBranchLast&);
Reply handle(Session&, const ReverseResume&);
Reply handle(Session&, const Kill&);
Reply handle(Session&, const Detach&);
Reply handle(Session&, const VRun&);
Reply handle(Session&, const VAttach&);
Reply handle(Session&, const Restart&);

// breakpoints.cc
Reply handle(Session&, const InsertBreakpoint&);
Reply handle(Session&, const RemoveBreakpoint&);

// xfer.cc
Reply handle(Session&, const XferRead&);
Reply handle(Session&, const XferWrite&);

// host_io.cc
Reply handle(Session&, const FileSetFs&);
Reply handle(Session&, const FileOpen&);
Reply handle(Session&, const FileClose&);
Reply handle(Session&, const FilePread&);
Reply handle(Session&, const FilePwrite&);
Reply handle(Session&, const FileFstat&);
Reply handle(Session&, const FileUnlink&);
Reply handle(Session&, const FileReadlink&);
Reply handle(Session&, const FileStat&);

// btrace.cc
Reply handle(Session&, const BtraceEnable&);
Reply handle(Session&, const BtraceConf&);
// qXfer:btrace:read / qXfer:btrace-conf:read documents (nullopt + error reply in `error`).
std::optional<std::string> btrace_document(Session&, const std::string& annex, Reply& error);
std::optional<std::string> btrace_conf_document(Session&, Reply& error);

// lldb.cc
Reply handle(Session&, const HostInfo&);
Reply handle(Session&, const ProcessInfo&);
Reply handle(Session&, const MemoryRegionInfo&);
Reply handle(Session&, const ThreadSuffixSupported&);
Reply handle(Session&, const ListThreadsInStopReply&);
Reply handle(Session&, const ThreadsInfo&);
Reply handle(Session&, const EnableErrorStrings&);
Reply handle(Session&, const WatchpointSupportInfo&);
Reply handle(Session&, const ThreadStopInfo&);
Reply handle(Session&, const RegisterInfo&);

// tls.cc
Reply handle(Session&, const GetTlsAddress&);

// monitor.cc
Reply handle(Session&, const Monitor&);
// Text printed by `monitor stepbranch` once the step finished.
std::string monitor_stepbranch_text(Session&, const backend::StopEvent&);

// The one error reply: the errno and the reason of a backend failure, or of a request the
// handler refuses (the dialect decides how much of it the client gets).
inline reply::Error error_reply(const backend::Error& e, ErrorForm form = ErrorForm::Text) {
  return {e.code, e.message, form};
}
inline reply::Error error_reply(int err, std::string reason, ErrorForm form = ErrorForm::Text) {
  return {err, std::move(reason), form};
}
inline reply::Error no_process() { return error_reply(ESRCH, "No process."); }
inline reply::Error no_thread() { return error_reply(ESRCH, "No such thread."); }

}  // namespace server
