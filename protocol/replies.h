// Typed replies: what the server answers, as values (protocol::Reply), and the one encoder that
// turns a reply into its payload in the client's dialect. Handlers build values; only
// encode() writes wire text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/capabilities.h"
#include "protocol/dialect.h"
#include "protocol/lldb_replies.h"
#include "protocol/stop_reply.h"
#include "protocol/trace_replies.h"

namespace protocol {

// How much of an error the client takes: GDB shows the text after "E."; LLDB takes "Exx" with
// the errno, plus ";hex(text)" once it asked for error strings (QEnableErrorStrings).
//   Text:  the reason, as far as the client takes it.
//   Code:  a packet GDB read only numeric codes from before error-message (m, x, qRcmd):
//          "Exx" for GDB, "E.text" once it offered error-message+ (GDB 16+).
//   Fixed: "Exx" in every dialect (gdbserver's fixed answers, e.g. a qXfer offset past the end).
enum class ErrorForm { Text, Code, Fixed };

namespace reply {

// Nothing is sent now: a resume's stop reply follows when the inferior stops (or, for R,
// nothing ever follows).
struct NoReply {};
struct Ok {};            // "OK"
struct Unsupported {};   // the empty reply: not understood, or not served
struct Error {
  int err = 0;           // errno
  std::string text;      // the reason
  ErrorForm form = ErrorForm::Text;
};
// Non-stop: 'N', every resumed thread is gone.
struct NoResumed {};

// Bytes as hex (m).
struct Hex { std::vector<uint8_t> bytes; };
// The bytes an `x` read got, binary and '}'-escaped. GDB (16+) wants a 'b' before them (an
// empty read is "b"); LLDB takes them bare, and its probe "x0,0" (nothing read) wants "OK".
struct BinaryMemory { std::vector<uint8_t> bytes; };
// g and p: register contents in hex, in the order given; a register the thread has no value
// for goes out as 'x's (two per byte of its size).
struct RegisterValue {
  std::vector<uint8_t> bytes;  // little-endian; only the size counts when unavailable
  bool available = true;
};
struct Registers { std::vector<RegisterValue> values; };
// A number in hex, no leading zeros (qGetTLSAddr's address, a qXfer write's byte count).
struct HexNumber { uint64_t value = 0; };

// qSupported: every feature the server can serve (and the dialect turned on).
struct Features { Capabilities server; };
// vCont?: the actions vCont takes.
struct ResumeActions {};
// qC: "QC" and the thread.
struct CurrentThread { int pid = 0; int tid = 0; };
// qfThreadInfo: "m" and the threads; ThreadListEnd ("l") ends the list.
struct ThreadRef { int pid = 0; int tid = 0; };
struct ThreadList { std::vector<ThreadRef> threads; };
struct ThreadListEnd {};
// qAttached: "1" attached to an existing process, "0" launched by the server.
struct Attached { bool attached = false; };

// qExecAndArgs (GDB 18): the program and arguments the server runs (the command line's, or the
// last vRun's); none: "U".
struct ExecAndArgs {
  std::vector<std::string> argv;  // empty: none
};

// qXfer read: [offset, offset+length) of a document, from xfer_reply(): "m" with more to
// come, "l" for the last chunk.
struct XferChunk {
  std::string data;
  bool last = false;
};
// qRcmd output, sent before the command's final reply: "O" + hex(text).
struct ConsoleOutput { std::string text; };

// vFile replies: "F<result>", "F-1,<fileio errno>", "F<size>;<escaped data>".
struct FileResult { int64_t result = 0; };
struct FileError { int host_errno = 0; };  // translated to GDB's fileio errno
struct FileData { std::vector<uint8_t> bytes; };

// qbranchstub:stepbranch-last: what the stepbranch that the last stop ended did, in the
// stop reply's words ("none": the last stop did not end a stepbranch).
struct StepBranchSummary {
  bool none = true;
  int pid = 0;
  int tid = 0;
  uint64_t branch_from = 0, branch_to = 0;  // both 0: no branch (it stopped before one)
  std::string mechanism;
};

// A reply encoded when it happened, sent as it is: a queued non-stop stop (vStopped).
struct Encoded { std::string payload; };

}  // namespace reply

using Reply = std::variant<reply::NoReply, reply::Ok, reply::Unsupported, reply::Error, StopReply, ExitReply,
                           ThreadExitReply, reply::NoResumed, reply::Hex, reply::BinaryMemory, reply::Registers,
                           reply::HexNumber, reply::Features, reply::ResumeActions, reply::CurrentThread,
                           reply::ThreadList, reply::ThreadListEnd, reply::Attached, reply::ExecAndArgs, reply::XferChunk,
                           reply::ConsoleOutput, reply::FileResult, reply::FileError, reply::FileData,
                           reply::StepBranchSummary, reply::HostInfo, reply::ProcessInfo, reply::MemoryRegion,
                           reply::WatchpointSlots, reply::ThreadsInfo, reply::TraceStatus, reply::TracepointHits,
                           reply::TraceVariableValue, reply::TraceFrameFound, reply::TraceUpload,
                           reply::TraceBufferData, reply::Encoded>;

// The payload of `reply` in the client's dialect (empty for NoReply: nothing is sent).
std::string encode(const Reply& reply, const Dialect& dialect);
inline bool sends_nothing(const Reply& reply) { return std::holds_alternative<reply::NoReply>(reply); }

// The error reply's text (reply::Error's encoding).
std::string error_reply(const Dialect& dialect, int err, std::string_view text, ErrorForm form = ErrorForm::Text);
// "Exx" with no dialect at hand.
std::string error_code(int err);

// qXfer read of [offset, offset+length) of a complete document: the chunk, or E01 past the end.
Reply xfer_reply(std::string_view document, uint64_t offset, uint64_t length);
// Its payload: "m..." or "l..." (escaped), or "E01".
std::string xfer_chunk(std::string_view document, uint64_t offset, uint64_t length);
// The arguments after argv[0] as one string, each escaped for a POSIX shell as gdbserver joins
// them (construct_inferior_arguments): a backslash before each special character, '' for an
// empty argument, a newline inside quotes.
std::string shell_argument_string(const std::vector<std::string>& argv);
// qRcmd output packet: "O" + hex(text).
std::string console_output(std::string_view text);

}  // namespace protocol
