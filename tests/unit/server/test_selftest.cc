#include <catch2/catch.hpp>

#include "server/selftest.h"

using namespace server;

TEST_CASE("the built-in self-checks all pass, and say so in gdbserver's words") {
  const auto& tests = builtin_selftests();
  REQUIRE(tests.size() >= 3);
  auto summary = run_selftests(tests, {});
  INFO(summary.output);
  CHECK(summary.ran == static_cast<int>(tests.size()));
  CHECK(summary.failed == 0);
  CHECK(summary.output.find("Running selftest protocol-round-trip.\n") != std::string::npos);
  CHECK(summary.output.find("Ran " + std::to_string(tests.size()) + " unit tests, 0 failed\n") != std::string::npos);
}

TEST_CASE("a failing check is counted and reported, filters pick tests by substring") {
  std::vector<SelfTest> tests = {
      {"good-one", [] {}},
      {"bad-one", [] { throw SelfTestFailure("expected 1, got 2"); }},
      {"also-good", [] {}},
  };
  auto all = run_selftests(tests, {});
  CHECK(all.ran == 3);
  CHECK(all.failed == 1);
  CHECK(all.output ==
        "Running selftest good-one.\n"
        "Running selftest bad-one.\n"
        "Self test failed: expected 1, got 2\n"
        "Running selftest also-good.\n"
        "Ran 3 unit tests, 1 failed\n");
  auto some = run_selftests(tests, {"good"});
  CHECK(some.ran == 2);
  CHECK(some.failed == 0);
  CHECK(some.output.find("Ran 2 unit tests, 0 failed\n") != std::string::npos);
  auto none = run_selftests(tests, {"nothing-matches"});
  CHECK(none.output == "Ran 0 unit tests, 0 failed\n");
}
