#include "backend/btrace/lbr/lbr_device.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "kmod-helper/include/uapi/msr_helper.h"

namespace backend {

static_assert(sizeof(msrh_info) == MSRH_INFO_SIZE);
static_assert(sizeof(msrh_lbr_target) == MSRH_LBR_TARGET_SIZE);
static_assert(sizeof(msrh_lbr_entry) == MSRH_LBR_ENTRY_SIZE);
static_assert(sizeof(msrh_lbr_snapshot) == MSRH_LBR_SNAPSHOT_SIZE);
static_assert(sizeof(msrh_rdmsr) == MSRH_RDMSR_SIZE);
static_assert(sizeof(LbrSnapshot{}.entries) / sizeof(LbrEntry) == MSRH_LBR_MAX);

namespace {

std::string errno_hint(int code) {
  switch (code) {
    case ENOENT:
      return " (module not loaded, or it refused to load: see `dmesg | grep msr_helper`)";
    case EACCES:
    case EPERM:
      return " (needs root / CAP_SYS_RAWIO)";
    case ENOTTY:
      return " (not an msr_helper device, or an incompatible module version)";
    default:
      return "";
  }
}

Error op_error(const char* what, pid_t tid, int code) {
  std::string msg = std::string("msr_helper ") + what + " thread " + std::to_string(tid) + ": " +
                    std::strerror(code);
  switch (code) {
    case EPERM:
      msg += " (only the thread's current ptracer may do this)";
      break;
    case ESRCH:
      msg += " (no such thread, or it exited)";
      break;
    case ENOENT:
      msg += " (thread not attached through this device handle)";
      break;
    case EBUSY:
      msg += " (another user, e.g. perf or a hypervisor, owns the LBR)";
      break;
    case EEXIST:
      msg += " (already attached)";
      break;
    default:
      break;
  }
  return Error{code, msg};
}

int xioctl(int fd, unsigned long req, void* arg) {
  int rc;
  do {
    rc = ::ioctl(fd, req, arg);
  } while (rc < 0 && errno == EINTR);
  return rc < 0 ? errno : 0;
}

}  // namespace

Result<LbrDevice> LbrDevice::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int code = errno;
    return Error{code, path + ": " + std::strerror(code) + errno_hint(code)};
  }
  LbrDevice dev(fd);
  // Check the ABI before handing the device out.
  msrh_info in{};
  in.size = sizeof(in);
  if (int code = xioctl(fd, MSRH_IOC_INFO, &in)) {
    return Error{code, path + ": INFO failed: " + std::strerror(code) + errno_hint(code)};
  }
  if (in.abi_version != MSRH_ABI_VERSION) {
    return Error{EPROTO, path + ": msr_helper ABI version " + std::to_string(in.abi_version) +
                             ", this program speaks " + std::to_string(MSRH_ABI_VERSION)};
  }
  return dev;
}

LbrDevice::LbrDevice(LbrDevice&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

LbrDevice& LbrDevice::operator=(LbrDevice&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

LbrDevice::~LbrDevice() {
  if (fd_ >= 0) ::close(fd_);
}

Result<LbrInfo> LbrDevice::info() {
  msrh_info in{};
  in.size = sizeof(in);
  if (int code = xioctl(fd_, MSRH_IOC_INFO, &in)) return errno_error("msr_helper INFO", code);
  LbrInfo out;
  out.abi_version = in.abi_version;
  out.vendor = in.vendor;
  out.family = in.family;
  out.model = in.model;
  out.stepping = in.stepping;
  out.format = in.lbr_format;
  out.depth = in.lbr_depth;
  out.features = in.features;
  out.live_targets = in.live_targets;
  out.live_objects = in.live_objects;
  out.simulated = (in.features & MSRH_FEAT_SIMULATED) != 0;
  out.lbr_works = (in.features & MSRH_FEAT_LBR) != 0;
  return out;
}

Result<void> LbrDevice::attach(pid_t tid) {
  msrh_lbr_target t{};
  t.size = sizeof(t);
  t.pid = tid;
  if (int code = xioctl(fd_, MSRH_IOC_LBR_ATTACH, &t)) return op_error("attach", tid, code);
  return {};
}

Result<void> LbrDevice::detach(pid_t tid) {
  msrh_lbr_target t{};
  t.size = sizeof(t);
  t.pid = tid;
  if (int code = xioctl(fd_, MSRH_IOC_LBR_DETACH, &t)) return op_error("detach", tid, code);
  return {};
}

Result<LbrSnapshot> LbrDevice::snapshot(pid_t tid) {
  msrh_lbr_snapshot s{};
  s.size = sizeof(s);
  s.pid = tid;
  if (int code = xioctl(fd_, MSRH_IOC_LBR_SNAPSHOT, &s)) return op_error("snapshot", tid, code);
  LbrSnapshot out;
  out.seq = s.seq;
  out.ip = s.ip;
  out.flags = s.flags;
  out.cpu = s.cpu;
  out.from_trap = (s.flags & (MSRH_SNAP_INT3 | MSRH_SNAP_DEBUG)) != 0;
  out.simulated = (s.flags & MSRH_SNAP_SIMULATED) != 0;
  out.count = s.count < MSRH_LBR_MAX ? s.count : MSRH_LBR_MAX;
  for (uint32_t i = 0; i < out.count; ++i) {
    out.entries[i] = LbrEntry{s.entries[i].from, s.entries[i].to, s.entries[i].info};
  }
  return out;
}

std::string lbr_probe_line(const std::string& path) {
  auto dev = LbrDevice::open(path);
  if (!dev) {
    if (dev.error().code == ENOENT) {
      return "msr_helper: not loaded (" + path + ": " + std::strerror(ENOENT) + ")";
    }
    return "msr_helper: not usable (" + dev.error().message + ")";
  }
  auto in = dev->info();
  if (!in) return "msr_helper: not usable (" + in.error().message + ")";
  if (in->simulated) return "msr_helper: loaded with simulate_lbr (TEST ONLY)";
  return "msr_helper: loaded, LBR depth " + std::to_string(in->depth) + " format " +
         std::to_string(in->format);
}

}  // namespace backend
