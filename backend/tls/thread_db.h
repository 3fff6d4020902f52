// Addresses of thread-local variables (qGetTLSAddr), asked of glibc's own libthread_db as
// gdbserver does (gdbserver/thread-db.cc): the library is dlopen'ed from gdbserver's search
// path and calls back into us through the proc_service interface (ps_pdread, ps_lgetregs,
// ps_pglobal_lookup..., defined in thread_db.cc and exported from the executable by
// proc_service.list). Symbols are looked up in the ELF files the process has mapped, so unlike
// gdbserver no qSymbol round trip with the client is needed, and static programs work too.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/error.h"
#include "backend/process.h"
#include "backend/host/symbolizer.h"

namespace backend {

class ThreadDb {
 public:
  // gdbserver's default (gdb/nat/gdb_thread_db.h): "$sdir" is the system's libthread_db (a
  // plain dlopen of libthread_db.so.1), "$pdir" the directory of the libpthread (or, since
  // glibc 2.34, libc) the program loaded. Other entries are directories. gdbserver 13.1 skips
  // "$pdir" (it keeps no library list); we honour it as GDB does.
  static constexpr std::string_view kDefaultSearchPath = "$sdir:$pdir";
  static constexpr std::string_view kLibraryName = "libthread_db.so.1";

  ThreadDb();
  ~ThreadDb();  // dlcloses the libraries
  ThreadDb(const ThreadDb&) = delete;
  ThreadDb& operator=(const ThreadDb&) = delete;

  // `monitor set libthread-db-search-path [PATH]`: empty = the default. Applies to processes
  // that no library has accepted yet: as in gdbserver, a process keeps the libthread_db that
  // once worked for it.
  void set_search_path(std::string path);
  const std::string& search_path() const { return search_path_; }

  // Address of the thread-local variable at `offset` in the TLS block of the module whose
  // link_map is at `lm`, as thread `tid` of `p` sees it; lm 0 means module 1, the executable's
  // own block, which is how GDB asks for a static program (it knows no link_map there). The
  // process must be stopped. Errors (Error::code):
  //   ENOENT  no libthread_db on the search path loads and accepts this process (not linked
  //           with libpthread/libc yet, version mismatch, unresolvable path);
  //   ESRCH   libthread_db does not know the thread (yet: early in the program's start);
  //   EAGAIN  the thread has no storage for that module yet (TD_TLSDEFER, alias TD_NOTALLOC);
  //   ENOSYS  the library has no td_thr_tls_get_addr / td_thr_tlsbase;
  //   EIO     any other libthread_db failure (the message names the td_err_e).
  Result<uint64_t> tls_address(Process& p, pid_t tid, uint64_t offset, uint64_t lm);

  // The libthread_db paths the search path names for `p`, in order ("$sdir" stays a bare
  // name, for dlopen's own search). For tests and diagnostics.
  std::vector<std::string> candidates(Process& p);

  // For the proc_service callbacks: a name in every module's symbol tables, main program
  // first, a global definition before a local one (as GDB's minimal-symbol lookup does for
  // gdbserver's qSymbol); run-time address.
  std::optional<uint64_t> lookup_symbol(const std::vector<LoadedModule>& modules, const std::string& name);

 private:
  struct Library;
  struct FileSymbols;
  std::vector<std::string> candidates_for(const std::vector<LoadedModule>& modules) const;
  Library* open_library(const std::string& path);
  const FileSymbols& symbols_of(const std::string& file);

  std::string search_path_{kDefaultSearchPath};
  std::map<std::string, std::unique_ptr<Library>> libraries_;      // by the path tried
  std::map<std::string, std::unique_ptr<FileSymbols>> file_symbols_;  // by file, checked by stat
  std::map<pid_t, std::string> accepted_;  // the library that accepted each live process
};

}  // namespace backend
