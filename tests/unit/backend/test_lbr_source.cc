// Unit tests of the msr_helper client (backend/btrace/lbr_source) and the shared uapi ABI.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstddef>
#include <string>
#include <type_traits>

#include "backend/btrace/lbr_source.h"
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
