// Userspace client of the msr_helper kernel module (kmod-helper/): LBR snapshots taken at a
// traced thread's stop.  The module is optional; open() says clearly why it is not usable.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>

#include "backend/error.h"

namespace backend {

struct LbrEntry {
  uint64_t from = 0;
  uint64_t to = 0;
  uint64_t info = 0;  // LBR_INFO layout (bit 63 mispredicted); 0 when the CPU has none
};

struct LbrInfo {
  uint32_t abi_version = 0;
  uint32_t vendor = 0;  // MSRH_VENDOR_*
  uint32_t family = 0, model = 0, stepping = 0;
  uint32_t format = 0;  // LBR format (PERF_CAPABILITIES[5:0])
  uint32_t depth = 0;   // entries in the LBR stack
  uint32_t features = 0;
  uint32_t live_targets = 0, live_objects = 0;
  bool simulated = false;  // simulate_lbr=1: TEST ONLY, entries are synthetic
  bool lbr_works = false;  // the module's load-time probe saw DEBUGCTL.LBR stick
};

struct LbrSnapshot {
  uint64_t seq = 0;  // increases with every snapshot; 0 = none since attach
  uint64_t ip = 0;   // the thread's user ip when it was taken
  uint32_t flags = 0;
  uint32_t cpu = 0;
  bool from_trap = false;  // taken in the int3/#DB trap path (else at switch-out)
  bool simulated = false;
  uint32_t count = 0;
  std::array<LbrEntry, 32> entries{};  // [0] is the newest branch
};

class LbrDevice {
 public:
  static constexpr const char* kDefaultPath = "/dev/msr_helper";

  static Result<LbrDevice> open(const std::string& path = kDefaultPath);

  LbrDevice(LbrDevice&& other) noexcept;
  LbrDevice& operator=(LbrDevice&& other) noexcept;
  LbrDevice(const LbrDevice&) = delete;
  LbrDevice& operator=(const LbrDevice&) = delete;
  ~LbrDevice();

  Result<LbrInfo> info();
  // `tid` must be a thread this process ptraces (from the thread that attached).
  Result<void> attach(pid_t tid);
  Result<void> detach(pid_t tid);
  Result<LbrSnapshot> snapshot(pid_t tid);

  int fd() const { return fd_; }

 private:
  explicit LbrDevice(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// One line for `--probe`, e.g.
//   "msr_helper: not loaded (/dev/msr_helper: No such file or directory)"
//   "msr_helper: loaded, LBR depth 32 format 5"
//   "msr_helper: loaded with simulate_lbr (TEST ONLY)"
std::string lbr_probe_line(const std::string& path = LbrDevice::kDefaultPath);

}  // namespace backend
