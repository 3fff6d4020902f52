// GDB branch-trace documents (btrace.dtd, btrace-conf.dtd), BTS block format.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace protocol {

// One block: begin and end are both inclusive instruction addresses (end = the branch
// instruction, or the current PC for the newest block; begin 0 = unknown, delta reads only).
struct BtraceBlockSpec {
  uint64_t begin = 0;
  uint64_t end = 0;
};

// The CPU in a PT document's <pt-config> (GDB hands it to libipt for its errata).
struct BtracePtCpu {
  std::string vendor;  // only "GenuineIntel" is written (GDB knows no other)
  unsigned family = 0, model = 0, stepping = 0;
};

// The blocks must be newest first. No trailing NUL (gdbserver adds one; GDB does not need it).
std::string btrace_xml(const std::vector<BtraceBlockSpec>& newest_first);
// An Intel PT document (<pt><pt-config><cpu/></pt-config><raw>HEX</raw></pt>), as gdbserver
// writes it: no <cpu> for other vendors, no <raw> when there is no data.
std::string btrace_pt_xml(const BtracePtCpu& cpu, std::span<const uint8_t> raw);
// The optional PT packets a recording has on (Qbtrace-conf:pt:ptwrite, pt:event-tracing).
struct BtracePtOptions {
  bool ptwrite = false;
  bool event_tracing = false;
};
// <bts size=.../> and/or <pt size=... ptwrite=... event-tracing=.../> (the two attributes of
// GDB 15's btrace-conf.dtd; older GDBs ignore them); neither = not recording.
std::string btrace_conf_xml(std::optional<uint64_t> bts_size, std::optional<uint64_t> pt_size,
                            BtracePtOptions pt_options = {});

}  // namespace protocol
