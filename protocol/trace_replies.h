// Replies to the tracepoint packets (protocol/packets/tracepoints.h), as gdbserver 13 writes
// them (tracepoint.cc cmd_qtstatus, cmd_qtp, cmd_qtv, cmd_qtframe, response_tracepoint...).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/packets/tracepoints.h"

namespace protocol::reply {

// qTStatus: T<running>;<reason>:<tracepoint>;tframes:…;…;notes:<hex>:
struct TraceStatus {
  enum class Reason { NotRun, Running, Stopped, PassCount, BufferFull, Disconnected, Error };
  bool running = false;
  Reason reason = Reason::NotRun;
  uint32_t stop_tracepoint = 0;
  std::string stop_text;          // Stopped: the user's stop notes; Error: the message
  uint64_t frames = 0, created = 0, free = 0, size = 0;
  bool circular = false, disconnected = false;
  uint64_t start_usec = 0, stop_usec = 0;
  std::string user, notes;
};
// qTP: V<hits>:<bytes>
struct TracepointHits { uint64_t hits = 0; uint64_t bytes = 0; };
// qTV: V<value> (a known value) or U (unknown)
struct TraceVariableValue { std::optional<int64_t> value; };
// QTFrame: F<frame>T<tracepoint>, or F-1 when no frame matched
struct TraceFrameFound { std::optional<uint64_t> frame; uint32_t tracepoint = 0; };
// qTfP/qTsP, qTfV/qTsV: one definition line, or "l" when there are no more
struct TraceUpload { std::optional<std::string> line; };
// qTBuffer: the raw buffer bytes in hex, or "l" past the end
struct TraceBufferData { std::vector<uint8_t> bytes; };

std::string encode(const TraceStatus& s);
std::string encode(const TracepointHits& h);
std::string encode(const TraceVariableValue& v);
std::string encode(const TraceFrameFound& f);
std::string encode(const TraceUpload& u);
std::string encode(const TraceBufferData& d);

}  // namespace protocol::reply

namespace protocol {

// A tracepoint's definition (as QTDP brought it; `more` unused), for its upload lines.
struct TracepointUpload : TraceDefine {
  std::vector<std::string> actions, step_actions;  // each as the client sent it
  std::vector<std::string> sources;                // "<type>:<start>:<len>:<hex>" as sent
};
// T…, then A… per action, S… per while-stepping action, Z… per source line.
std::vector<std::string> tracepoint_upload_lines(const TracepointUpload& tp);
// <number>:<initial value>:<builtin>:<hex name>
std::string variable_upload_line(uint32_t number, int64_t initial, bool builtin, const std::string& name);

// qXfer:traceframe-info:read: the memory ranges and variables a frame holds.
struct TraceframeInfo {
  std::vector<std::pair<uint64_t, uint64_t>> memory;  // start, length
  std::vector<uint32_t> variables;
};
std::string traceframe_info_xml(const TraceframeInfo& info);

}  // namespace protocol
