// Host I/O packets: vFile:* (server/handlers/host_io.cc answers them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "protocol/packets/packet_list.h"

namespace protocol {

struct FileSetFs { int pid = 0; };
struct FileOpen { std::string path; int flags = 0; int mode = 0; };
struct FileClose { int fd = -1; };
struct FilePread { int fd = -1; uint64_t count = 0; uint64_t offset = 0; };
struct FilePwrite { int fd = -1; uint64_t offset = 0; std::vector<uint8_t> data; };
struct FileFstat { int fd = -1; };
struct FileUnlink { std::string path; };
struct FileReadlink { std::string path; };
// vFile:stat (GDB 16; follows a symbolic link since gdbserver 17) and vFile:lstat (GDB 17).
struct FileStat { std::string path; bool follow_link = true; };

using HostIoPackets = PacketList<FileSetFs, FileOpen, FileClose, FilePread, FilePwrite, FileFstat, FileUnlink,
                                 FileReadlink, FileStat>;

}  // namespace protocol
