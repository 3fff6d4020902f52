// Intel PT's optional packets (backend/btrace/perf/pt_features.h): the PMU's sysfs files and the
// config a recording gets, as gdbserver's linux_enable_pt decides it.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "backend/btrace/perf/pt_features.h"

using namespace backend;

namespace {
void write(const std::filesystem::path& p, const char* text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}
}  // namespace

TEST_CASE("pt features: format files name config bits", "[perfpt]") {
  CHECK(pt_config_mask("config:12\n") == uint64_t{1} << 12);
  CHECK(pt_config_mask("config:4-5") == uint64_t{0x30});
  CHECK(pt_config_mask("config:0") == uint64_t{1});
  CHECK_FALSE(pt_config_mask("config1:3"));
  CHECK_FALSE(pt_config_mask("config:"));
  CHECK_FALSE(pt_config_mask("config:64"));
  CHECK_FALSE(pt_config_mask("config:5-4"));
  CHECK_FALSE(pt_config_mask("config:x"));
}

TEST_CASE("pt features: read from the PMU's caps and format files", "[perfpt]") {
  auto dir = std::filesystem::temp_directory_path() / ("bs_ptpmu_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  CHECK_FALSE(read_pt_features(dir.string()).ptwrite);  // no PMU at all
  write(dir / "caps" / "ptwrite", "1\n");
  write(dir / "format" / "ptw", "config:12\n");
  write(dir / "caps" / "event_trace", "0\n");
  write(dir / "format" / "event", "config:31\n");
  PtFeatures f = read_pt_features(dir.string());
  CHECK(f.ptwrite == uint64_t{1} << 12);
  CHECK_FALSE(f.event_tracing);  // caps says 0
  write(dir / "caps" / "event_trace", "1\n");
  CHECK(read_pt_features(dir.string()).event_tracing == uint64_t{1} << 31);
  std::filesystem::remove_all(dir);
}

TEST_CASE("pt features: what a recording gets", "[perfpt]") {
  PtFeatures none;
  PtFeatures both{uint64_t{1} << 12, uint64_t{1} << 31};
  // Nothing asked: nothing on.
  auto c = pt_config({}, both);
  REQUIRE(c);
  CHECK(c->config == 0);
  // PTWRITE: on where the PMU has it, quietly off elsewhere (gdbserver).
  c = pt_config({true, false}, both);
  REQUIRE(c);
  CHECK(c->config == uint64_t{1} << 12);
  CHECK(c->on.ptwrite);
  c = pt_config({true, false}, none);
  REQUIRE(c);
  CHECK(c->config == 0);
  CHECK_FALSE(c->on.ptwrite);
  // Event tracing the PMU lacks fails the enable, in gdbserver's words.
  auto e = pt_config({false, true}, none);
  REQUIRE_FALSE(e);
  CHECK(e.error().message == "Event tracing for record btrace pt is not supported.");
  c = pt_config({true, true}, both);
  REQUIRE(c);
  CHECK(c->config == ((uint64_t{1} << 12) | (uint64_t{1} << 31)));
  CHECK(c->on.event_tracing);
}
