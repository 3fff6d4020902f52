// `branchstub --selftest[=FILTER]`: a short smoke check of the built binary (framing, one
// request parsed and one reply framed back, the probe run), not the unit tests again (those are
// tests/unit). gdbserver has the same option; GDB's testsuite runs it in
// gdb.server/unittest.exp and waits for "Ran N unit tests, 0 failed".
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace server {

struct SelfTest {
  std::string name;
  std::function<void()> run;  // throws SelfTestFailure (or anything else) when a check fails
};

struct SelfTestFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The checks this binary carries.
const std::vector<SelfTest>& builtin_selftests();

struct SelfTestSummary {
  int ran = 0;
  int failed = 0;
  std::string output;  // gdbserver's lines: "Running selftest NAME.", "Self test failed: WHY",
                       // and last "Ran N unit tests, F failed"
};

// Runs the tests whose name contains one of `filters` (every test when there are none).
SelfTestSummary run_selftests(const std::vector<SelfTest>& tests, const std::vector<std::string>& filters);

}  // namespace server
