// Intel PT's optional packets that GDB 15+ can ask for with Qbtrace-conf: PTWRITE
// (pt:ptwrite) and event tracing (pt:event-tracing), and whether this machine's intel_pt PMU has
// them: its sysfs caps/ (ptwrite, event_trace) and format/ (ptw, event) files, read as
// gdbserver's linux_enable_pt does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backend/error.h"

namespace backend {

inline constexpr const char* kPtPmuDir = "/sys/bus/event_source/devices/intel_pt";

struct PtOptions {
  bool ptwrite = false;
  bool event_tracing = false;
};

// The perf_event_attr.config bits a format/ file names ("config:12", "config:4-5"); nullopt
// for another attr field or unreadable text.
std::optional<uint64_t> pt_config_mask(std::string_view format_text);

// The config bits of each feature the PMU has (caps/<name> reads 1); nullopt: not there.
struct PtFeatures {
  std::optional<uint64_t> ptwrite;
  std::optional<uint64_t> event_tracing;
};
PtFeatures read_pt_features(const std::string& pmu_dir = kPtPmuDir);

// What a PT event gets for `requested` on a PMU with `features`: the config bits and the
// options actually on. As gdbserver: PTWRITE the PMU lacks stays off quietly; event tracing it
// lacks fails the enable ("Event tracing for record btrace pt is not supported.").
struct PtConfig {
  uint64_t config = 0;
  PtOptions on;
};
Result<PtConfig> pt_config(const PtOptions& requested, const PtFeatures& features);

}  // namespace backend
