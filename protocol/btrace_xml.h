// GDB branch-trace documents (btrace.dtd, btrace-conf.dtd), BTS block format.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace protocol {

// One block: begin and end are both inclusive instruction addresses (end = the branch
// instruction, or the current PC for the newest block; begin 0 = unknown, delta reads only).
struct BtraceBlockSpec {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The blocks must be newest first. No trailing NUL (gdbserver adds one; GDB does not need it).
std::string btrace_xml(const std::vector<BtraceBlockSpec>& newest_first);
// <bts size=.../> and/or <pt size=.../>; neither = not recording.
std::string btrace_conf_xml(std::optional<uint64_t> bts_size, std::optional<uint64_t> pt_size);

}  // namespace protocol
