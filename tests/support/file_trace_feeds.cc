#include "tests/support/file_trace_feeds.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace test_support {

using backend::Error;
using backend::Mapping;
using backend::Result;

namespace {

uint64_t page_size() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

}  // namespace

Result<std::unique_ptr<backend::PerfBtsSource>> open_bts_ring_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{errno, "TEST ring file " + path + ": " + std::strerror(errno)};
  struct stat st{};
  const uint64_t page = page_size();
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < 2 * page) {
    ::close(fd);
    return Error{EINVAL, "TEST ring file " + path + ": needs a header page and at least one data page"};
  }
  auto m = Mapping::map(fd, static_cast<size_t>(st.st_size), PROT_READ);
  ::close(fd);  // the mapping stays
  if (!m) return Error{m.error().code, "TEST ring file " + path + ": mmap: " + std::strerror(m.error().code)};
  return backend::PerfBtsSource::over(std::move(*m), page, 0);
}

Result<std::unique_ptr<backend::PerfPtSource>> open_pt_aux_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{errno, "TEST aux file " + path + ": " + std::strerror(errno)};
  const uint64_t page = page_size();
  struct stat st{};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < page) {
    ::close(fd);
    return Error{EINVAL, "TEST aux file " + path + ": shorter than the user page"};
  }
  auto user = Mapping::map(fd, page, PROT_READ);
  if (!user) {
    ::close(fd);
    return Error{user.error().code, "TEST aux file " + path + ": mmap failed"};
  }
  const auto* header = reinterpret_cast<const perf_event_mmap_page*>(user->data());
  uint64_t off = header->aux_offset, size = header->aux_size;
  if (size == 0 || off % page != 0 || off + size > static_cast<uint64_t>(st.st_size)) {
    ::close(fd);
    return Error{EINVAL, "TEST aux file " + path + ": aux_offset/aux_size do not describe an area inside the file"};
  }
  auto aux = Mapping::map(fd, size, PROT_READ, static_cast<off_t>(off));
  ::close(fd);
  if (!aux) return Error{aux.error().code, "TEST aux file " + path + ": mmap of the AUX area failed"};
  return backend::PerfPtSource::over(std::move(*user), std::move(*aux));
}

std::string FileTraceFeeds::status_line() const {
  if (!serves_bts() && !serves_pt()) return {};
  return "TEST ONLY: BTS/PT data is read from files a test writes, not from the hardware.";
}

}  // namespace test_support
