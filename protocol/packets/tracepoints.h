// Tracepoint packets (GDB's "Tracepoint Packets"): defining tracepoints and trace state
// variables, starting and stopping the experiment, selecting collected frames, uploading
// definitions and the buffer (server/handlers/tracepoints.cc answers them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/packets/packet_list.h"

namespace protocol {

// One action of a QTDP continuation: R<mask>, M<basereg>,<offset>,<len>, X<len>,<bytecode>.
struct TraceActionSpec {
  enum class Kind { Registers, Memory, Expression };
  Kind kind = Kind::Registers;
  bool stepping = false;              // after an 'S': a while-stepping action
  std::vector<uint8_t> mask;          // Registers: the mask's bytes, most significant first
  int basereg = -1;                   // Memory: -1 = absolute
  uint64_t offset = 0, len = 0;       // Memory
  std::vector<uint8_t> bytecode;      // Expression
  std::string text;                   // the action as sent, without the 'S' (uploaded back)
};

struct TraceInit {};                  // QTinit
// QTDP:<n>:<addr>:<E|D>:<step>:<pass>[:F<size>][:S][:X<len>,<cond>][-]
struct TraceDefine {
  uint32_t number = 0;
  uint64_t addr = 0;
  bool enabled = true;
  uint64_t step_count = 0, pass_count = 0;
  std::optional<uint64_t> fast_size;
  bool is_static = false;
  std::vector<uint8_t> condition;
  bool more = false;                  // actions follow
};
// QTDP:-<n>:<addr>:[S]<action>...[-]
struct TraceDefineActions {
  uint32_t number = 0;
  uint64_t addr = 0;
  std::vector<TraceActionSpec> actions;
  bool more = false;
};
// QTDPsrc:<n>:<addr>:<type>:<start hex>:<len hex>:<hex text>
struct TraceDefineSource {
  uint32_t number = 0;
  uint64_t addr = 0;
  std::string raw;                    // "<type>:<start>:<len>:<hex>" as sent (uploaded back)
};
// QTDV:<n>:<value>:<builtin>:<hex name>
struct TraceDefineVariable {
  uint32_t number = 0;
  int64_t initial = 0;
  bool builtin = false;
  std::string name;
};
struct TraceReadOnlyRegions { std::vector<std::pair<uint64_t, uint64_t>> ranges; };  // QTro:s,e:s,e
struct TraceStart {};                 // QTStart
struct TraceStop {};                  // QTStop
struct TraceStatusQuery {};           // qTStatus
struct TracepointStatusQuery { uint32_t number = 0; uint64_t addr = 0; };   // qTP:<n>:<addr>
struct TraceVariableQuery { uint32_t number = 0; };                         // qTV:<n>
// QTFrame:<n> | pc:<addr> | tdp:<n> | range:<a>:<b> | outside:<a>:<b>; QTFrame:ffffffff = none
struct TraceFrameSelect {
  enum class Kind { Number, Pc, Tracepoint, Range, Outside };
  Kind kind = Kind::Number;
  int64_t number = -1;                // Number: -1 = back to the live program
  uint64_t a = 0, b = 0;
};
struct TraceBufferCircular { bool on = false; };                // QTBuffer:circular:<0|1>
struct TraceBufferSize { std::optional<uint64_t> size; };      // QTBuffer:size:<n|-1>
struct TraceDisconnected { bool on = false; };                  // QTDisconnected:<0|1>
// QTNotes:user:<hex>;notes:<hex>;tstop:<hex>; (any subset)
struct TraceNotes { std::optional<std::string> user, notes, tstop; };
struct TraceUploadPoints { bool first = true; };      // qTfP / qTsP
struct TraceUploadVariables { bool first = true; };   // qTfV / qTsV
struct TraceBufferRead { uint64_t offset = 0, len = 0; };                   // qTBuffer:<off>,<len>
struct TraceEnable { uint32_t number = 0; uint64_t addr = 0; bool enable = true; };  // QTEnable/QTDisable
struct TraceMinFastInsnLen {};        // qTMinFTPILen: the shortest instruction ftrace can replace

using TracepointsPackets = PacketList<
    TraceInit, TraceDefine, TraceDefineActions, TraceDefineSource, TraceDefineVariable, TraceReadOnlyRegions,
    TraceStart, TraceStop, TraceStatusQuery, TracepointStatusQuery, TraceVariableQuery, TraceFrameSelect,
    TraceBufferCircular, TraceBufferSize, TraceDisconnected, TraceNotes, TraceUploadPoints, TraceUploadVariables,
    TraceBufferRead, TraceEnable, TraceMinFastInsnLen>;

}  // namespace protocol
