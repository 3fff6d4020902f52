// Host I/O (vFile) translation: GDB's fileio flags, modes, errno values and stat layout,
// plus the "F..." reply helpers. Pure: the server performs the actual file operations.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string>

namespace protocol {

// GDB fileio open flags (RDONLY 0, WRONLY 1, RDWR 2, APPEND 8, CREAT 0x200, TRUNC 0x400,
// EXCL 0x800) to host O_* flags. Unknown bits are dropped.
int fileio_to_host_open_flags(int fileio_flags);
// GDB fileio mode (S_IFREG/S_IFDIR/permission bits) to host mode_t bits.
int fileio_to_host_mode(int fileio_mode);
// Host errno to GDB fileio errno (EUNKNOWN 9999 for the rest).
int host_to_fileio_errno(int host_errno);
// 64-byte big-endian struct fio_stat.
std::string encode_fio_stat(const struct stat& st);

// "F<hex n>" (n may be negative: "F-1").
std::string file_result(int64_t n);
// "F-1,<hex fileio errno>".
std::string file_error(int host_errno);
// "F<hex n>;" + escaped binary data (pread, readlink, fstat replies).
std::string file_data(int64_t n, std::span<const uint8_t> data);

}  // namespace protocol
