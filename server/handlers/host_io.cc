// vFile: host I/O requests, served by the session's HostIo.
#include "server/handlers/handlers.h"

namespace server {

Reply handle(Session& s, const FileSetFs& f) { return s.hostio().setfs(f.pid); }
Reply handle(Session& s, const FileOpen& f) { return s.hostio().open(f.path, f.flags, f.mode); }
Reply handle(Session& s, const FileClose& f) { return s.hostio().close(f.fd); }
Reply handle(Session& s, const FilePread& f) { return s.hostio().pread(f.fd, f.count, f.offset); }
Reply handle(Session& s, const FilePwrite& f) { return s.hostio().pwrite(f.fd, f.offset, f.data); }
Reply handle(Session& s, const FileFstat& f) { return s.hostio().fstat(f.fd); }
Reply handle(Session& s, const FileUnlink& f) { return s.hostio().unlink(f.path); }
Reply handle(Session& s, const FileReadlink& f) { return s.hostio().readlink(f.path); }
Reply handle(Session& s, const FileStat& f) { return s.hostio().stat(f.path, f.follow_link); }

}  // namespace server
