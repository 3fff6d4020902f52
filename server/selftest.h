// `branchstub --selftest[=FILTER]`: built-in self-checks of the protocol layer and the command
// line, run in the installed binary (gdbserver has the same option; GDB's testsuite runs it in
// gdb.server/unittest.exp and waits for "Ran N unit tests, 0 failed").
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
