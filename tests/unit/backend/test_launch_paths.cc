// The paths a launch starts from: gdbserver's program-name rule and GDB's tilde expansion.
#include <catch2/catch.hpp>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <string>

#include "backend/ptrace/launch.h"

using namespace backend;

namespace {
// Runs the test from a fresh directory, back to the old one afterwards.
struct InTempDir {
  std::string old, dir;
  InTempDir() {
    char buf[PATH_MAX];
    old = ::getcwd(buf, sizeof buf) ? buf : "/";
    char templ[] = "/tmp/bs-launch-paths-XXXXXX";
    dir = ::mkdtemp(templ);
    REQUIRE(::chdir(dir.c_str()) == 0);
  }
  ~InTempDir() {
    (void)!::chdir(old.c_str());
    std::system(("rm -rf '" + dir + "'").c_str());
  }
};
}  // namespace

TEST_CASE("a bare program name that is a file here is made absolute, others are left alone") {
  InTempDir here;
  std::ofstream("prog") << "#!/bin/sh\n";
  ::mkdir("subdir", 0755);
  CHECK(program_path("prog") == here.dir + "/prog");
  CHECK(program_path("subdir") == "subdir");        // a directory is not a program
  CHECK(program_path("no-such-prog") == "no-such-prog");  // looked up in PATH later
  CHECK(program_path("./prog") == "./prog");        // has a '/': as given
  CHECK(program_path("/bin/true") == "/bin/true");
  CHECK(program_path("") == "");
}

TEST_CASE("launch paths: ~ and ~user expand to home directories") {
  const char* saved = std::getenv("HOME");
  std::string saved_home = saved ? saved : "";
  ::setenv("HOME", "/home/expanded", 1);
  CHECK(*expand_tilde("~") == "/home/expanded");
  CHECK(*expand_tilde("~/") == "/home/expanded/");
  CHECK(*expand_tilde("~/a/b") == "/home/expanded/a/b");
  CHECK(*expand_tilde("/abs/~x") == "/abs/~x");
  CHECK(*expand_tilde("rel") == "rel");
  CHECK(*expand_tilde("") == "");
  const passwd* root = ::getpwuid(0);
  REQUIRE(root);
  CHECK(*expand_tilde(std::string("~") + root->pw_name + "/x") == std::string(root->pw_dir) + "/x");
  auto unknown = expand_tilde("~no-such-user-bs/x");
  REQUIRE_FALSE(unknown);
  CHECK(unknown.error().message == "Could not find a match for '~no-such-user-bs'.");
  if (saved) ::setenv("HOME", saved_home.c_str(), 1);
  else ::unsetenv("HOME");
}
