// Parsing the host I/O packets (protocol/packets/host_io.h).
#include <catch2/catch.hpp>

#include "protocol/packets.h"
#include "tests/unit/protocol/packets_test_helpers.h"

using namespace protocol;
using namespace packets_test;

TEST_CASE("vFile", "[packets][host_io]") {
  CHECK(as<FileSetFs>("vFile:setfs:0").pid == 0);
  auto o = as<FileOpen>("vFile:open:6a7573742070726f62696e67,0,1c0");
  CHECK(o.path == "just probing");
  CHECK(o.flags == 0);
  CHECK(o.mode == 0x1c0);
  CHECK(as<FileClose>("vFile:close:6").fd == 6);
  auto pr = as<FilePread>("vFile:pread:6,47ff,0");
  CHECK(pr.fd == 6);
  CHECK(pr.count == 0x47ffu);
  CHECK(pr.offset == 0u);
  auto pw = as<FilePwrite>("vFile:pwrite:6,10,he,lo");
  CHECK(pw.offset == 0x10u);
  CHECK(pw.data == std::vector<uint8_t>{'h', 'e', ',', 'l', 'o'});
  CHECK(as<FileFstat>("vFile:fstat:6").fd == 6);
  CHECK(as<FileUnlink>("vFile:unlink:2f746d70").path == "/tmp");
  CHECK(as<FileReadlink>("vFile:readlink:2f746d70").path == "/tmp");
  CHECK(malformed("vFile:open:zz,0,0"));
  CHECK(malformed("vFile:pread:6,1"));
  CHECK(malformed("vFile:pwrite:6"));
  CHECK(unknown("vFile:chmod:2f"));
}

TEST_CASE("vFile:stat and vFile:lstat (GDB 16/17)", "[packets][host_io]") {
  auto st = as<FileStat>("vFile:stat:2f746d70");
  CHECK(st.path == "/tmp");
  CHECK(st.follow_link);
  auto lst = as<FileStat>("vFile:lstat:2f746d70");
  CHECK(lst.path == "/tmp");
  CHECK_FALSE(lst.follow_link);
  CHECK(malformed("vFile:stat:zz"));
  CHECK(malformed("vFile:lstat:2f,2f"));
}
