#include "protocol/fileio.h"

#include <fcntl.h>

#include <cerrno>

#include "protocol/hex.h"

namespace protocol {
namespace {

// gdbsupport/fileio.h values (the wire ABI, independent of the host).
constexpr int kFioWronly = 0x1, kFioRdwr = 0x2, kFioAppend = 0x8, kFioCreat = 0x200, kFioTrunc = 0x400,
              kFioExcl = 0x800;
constexpr int kFioIfreg = 0100000, kFioIfdir = 040000, kFioIfchr = 020000;
constexpr int kFioUnknown = 9999;

void put_be(std::string& out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

int fileio_to_host_open_flags(int f) {
  int host = 0;
  if (f & kFioRdwr)
    host |= O_RDWR;
  else if (f & kFioWronly)
    host |= O_WRONLY;
  else
    host |= O_RDONLY;
  if (f & kFioAppend) host |= O_APPEND;
  if (f & kFioCreat) host |= O_CREAT;
  if (f & kFioTrunc) host |= O_TRUNC;
  if (f & kFioExcl) host |= O_EXCL;
  return host;
}

int fileio_to_host_mode(int m) {
  int host = m & 07777;
  if (m & kFioIfreg) host |= S_IFREG;
  if (m & kFioIfdir) host |= S_IFDIR;
  if (m & kFioIfchr) host |= S_IFCHR;
  return host;
}

int host_to_fileio_errno(int e) {
  switch (e) {
    case EPERM: return 1;
    case ENOENT: return 2;
    case EINTR: return 4;
    case EBADF: return 9;
    case EACCES: return 13;
    case EFAULT: return 14;
    case EBUSY: return 16;
    case EEXIST: return 17;
    case ENODEV: return 19;
    case ENOTDIR: return 20;
    case EISDIR: return 21;
    case EINVAL: return 22;
    case ENFILE: return 23;
    case EMFILE: return 24;
    case EFBIG: return 27;
    case ENOSPC: return 28;
    case ESPIPE: return 29;
    case EROFS: return 30;
    case ENAMETOOLONG: return 91;
    default: return kFioUnknown;
  }
}

std::string encode_fio_stat(const struct stat& st) {
  uint32_t mode = st.st_mode & 0777;
  if (S_ISREG(st.st_mode)) mode |= kFioIfreg;
  if (S_ISDIR(st.st_mode)) mode |= kFioIfdir;
  if (S_ISCHR(st.st_mode)) mode |= kFioIfchr;
  std::string out;
  out.reserve(64);
  put_be(out, static_cast<uint32_t>(st.st_dev), 4);
  put_be(out, static_cast<uint32_t>(st.st_ino), 4);
  put_be(out, mode, 4);
  put_be(out, static_cast<uint32_t>(st.st_nlink), 4);
  put_be(out, static_cast<uint32_t>(st.st_uid), 4);
  put_be(out, static_cast<uint32_t>(st.st_gid), 4);
  put_be(out, static_cast<uint32_t>(st.st_rdev), 4);
  put_be(out, static_cast<uint64_t>(st.st_size), 8);
  put_be(out, static_cast<uint64_t>(st.st_blksize), 8);
  put_be(out, static_cast<uint64_t>(st.st_blocks), 8);
  put_be(out, static_cast<uint32_t>(st.st_atime), 4);
  put_be(out, static_cast<uint32_t>(st.st_mtime), 4);
  put_be(out, static_cast<uint32_t>(st.st_ctime), 4);
  return out;
}

std::string file_result(int64_t n) {
  if (n < 0) return "F-" + hex_u64(static_cast<uint64_t>(-(n + 1)) + 1);
  return "F" + hex_u64(static_cast<uint64_t>(n));
}

std::string file_error(int host_errno) {
  return "F-1," + hex_u64(static_cast<uint32_t>(host_to_fileio_errno(host_errno)));
}

std::string file_data(int64_t n, std::span<const uint8_t> data) { return file_result(n) + ";" + escape_binary(data); }

}  // namespace protocol
