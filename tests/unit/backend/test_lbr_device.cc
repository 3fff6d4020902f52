// Unit tests of the msr_helper client (backend/btrace/lbr/lbr_device) and the shared uapi ABI.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backend/btrace/lbr/lbr_device.h"
#include "kmod-helper/include/uapi/msr_helper.h"

// The ABI layout: sizes and offsets are part of the contract with the kernel module.
static_assert(sizeof(msrh_info) == MSRH_INFO_SIZE);
static_assert(sizeof(msrh_lbr_target) == MSRH_LBR_TARGET_SIZE);
static_assert(sizeof(msrh_lbr_entry) == MSRH_LBR_ENTRY_SIZE);
static_assert(sizeof(msrh_lbr_snapshot) == MSRH_LBR_SNAPSHOT_SIZE);
static_assert(sizeof(msrh_rdmsr) == MSRH_RDMSR_SIZE);
static_assert(offsetof(msrh_info, reserved) == 56);
static_assert(offsetof(msrh_lbr_snapshot, seq) == 16);
static_assert(offsetof(msrh_lbr_snapshot, entries) == 56);
static_assert(offsetof(msrh_rdmsr, value) == 8);
static_assert(std::is_standard_layout_v<msrh_lbr_snapshot>);
static_assert(std::is_trivially_copyable_v<msrh_lbr_snapshot>);
static_assert(sizeof(backend::LbrEntry) == sizeof(msrh_lbr_entry));

TEST_CASE("msr_helper ABI constants", "[lbr]") {
  CHECK(MSRH_ABI_VERSION == 1u);
  CHECK(MSRH_LBR_MAX == 32u);
  CHECK(std::string(MSRH_DEVICE_PATH) == backend::LbrDevice::kDefaultPath);
  // The ioctl numbers encode the struct sizes: a layout change changes the number.
  CHECK(_IOC_SIZE(MSRH_IOC_LBR_SNAPSHOT) == MSRH_LBR_SNAPSHOT_SIZE);
  CHECK(_IOC_SIZE(MSRH_IOC_INFO) == MSRH_INFO_SIZE);
  CHECK(_IOC_DIR(MSRH_IOC_LBR_ATTACH) == _IOC_WRITE);
  CHECK(_IOC_DIR(MSRH_IOC_RDMSR) == (_IOC_READ | _IOC_WRITE));
}

TEST_CASE("opening a missing msr_helper device gives a clear error", "[lbr]") {
  auto dev = backend::LbrDevice::open("/nonexistent/msr_helper");
  REQUIRE_FALSE(dev.ok());
  CHECK(dev.error().code == ENOENT);
  CHECK(dev.error().message.find("/nonexistent/msr_helper") != std::string::npos);
  CHECK(dev.error().message.find("No such file or directory") != std::string::npos);
  CHECK(dev.error().message.find("not loaded") != std::string::npos);
}

TEST_CASE("a file that is not the device is refused", "[lbr]") {
  auto dev = backend::LbrDevice::open("/dev/null");
  REQUIRE_FALSE(dev.ok());
  CHECK(dev.error().code == ENOTTY);
}

TEST_CASE("lbr_probe_line without the module", "[lbr]") {
  CHECK(backend::lbr_probe_line("/nonexistent/msr_helper") ==
        "msr_helper: not loaded (/nonexistent/msr_helper: No such file or directory)");
}

// ---- against a loaded module (the QEMU test runs this in the guest with simulate_lbr=1) ----
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

TEST_CASE("LbrDevice against a loaded msr_helper", "[lbr][lbr-device]") {
  auto dev = backend::LbrDevice::open();
  if (!dev.ok()) {
    WARN("SKIP: " << dev.error().message);
    return;
  }
  auto in = dev->info();
  REQUIRE(in.ok());
  CHECK(in->abi_version == MSRH_ABI_VERSION);
  INFO(backend::lbr_probe_line());
  CHECK(backend::lbr_probe_line().rfind("msr_helper: loaded", 0) == 0);

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    raise(SIGSTOP);
    __asm__ volatile("int3");
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFSTOPPED(status));
  CHECK(dev->snapshot(child).error().code == ENOENT);
  REQUIRE(dev->attach(child).ok());
  CHECK(dev->attach(child).error().code == EEXIST);
  REQUIRE(ptrace(PTRACE_CONT, child, nullptr, nullptr) == 0);
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE((WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP));
  user_regs_struct regs{};
  REQUIRE(ptrace(PTRACE_GETREGS, child, nullptr, &regs) == 0);
  auto snap = dev->snapshot(child);
  REQUIRE(snap.ok());
  CHECK(snap->seq > 0);
  CHECK(snap->from_trap);
  CHECK(snap->count > 0);
  if (snap->simulated) CHECK(snap->entries[0].to == regs.rip - 1);
  CHECK(dev->detach(child).ok());
  CHECK(dev->snapshot(child).error().code == ENOENT);
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  auto after = dev->snapshot(child);
  CHECK(after.error().code == ESRCH);
  CHECK(after.error().message.find("no such thread") != std::string::npos);
}
