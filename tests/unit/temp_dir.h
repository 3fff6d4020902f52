// A directory under /tmp for one test, removed with everything in it when the test is done
// (tests run on people's machines: nothing is left behind).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace testutil {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const char* prefix = "bs-test") {
    std::string tmpl = std::string("/tmp/") + prefix + "-XXXXXX";
    if (::mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path.empty()) std::filesystem::remove_all(path, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string str() const { return path.string(); }
};

}  // namespace testutil
