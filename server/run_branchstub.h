// The whole of branchstub's main(): parse the command line, then the self-checks, the probe,
// or the server. The test build of the server (tests/support/branchstub_test_main.cc) runs the
// same function with options of its own added through MainHooks.
#pragma once

#include <functional>
#include <string>

#include "server/server_hooks.h"

namespace server {

struct MainHooks {
  // Offered every option before COMM first: true when it is one of the hook's (then taken).
  std::function<bool(const std::string& arg)> take_option;
  // Called once the command line is parsed, just before the server is made: what it is given.
  std::function<ServerHooks()> server_hooks;
};

int run_branchstub(int argc, const char* const* argv, const MainHooks& hooks = {});

}  // namespace server
