#include "backend/tls/thread_db.h"

#include <dlfcn.h>
#include <proc_service.h>
#include <signal.h>
#include <sys/reg.h>
#include <sys/stat.h>
#include <sys/user.h>
#include <thread_db.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <type_traits>

#include <fmt/format.h>

// libthread_db's view of the process it inspects (proc_service.h leaves the type to us). It
// lives on the stack of one ThreadDb::tls_address call and carries everything the callbacks
// need: no global state.
struct ps_prochandle {
  backend::ThreadDb* db = nullptr;
  backend::Process* process = nullptr;
  std::vector<backend::LoadedModule> modules;  // main program first
};

namespace backend {

struct ThreadDb::Library {
  void* handle = nullptr;
  decltype(&td_ta_new) ta_new = nullptr;
  decltype(&td_ta_delete) ta_delete = nullptr;
  decltype(&td_ta_map_lwp2thr) map_lwp2thr = nullptr;
  decltype(&td_thr_get_info) thr_get_info = nullptr;
  decltype(&td_thr_tls_get_addr) tls_get_addr = nullptr;  // optional, as for gdbserver
  decltype(&td_thr_tlsbase) tlsbase = nullptr;            // optional
  ~Library() {
    if (handle) ::dlclose(handle);
  }
};

struct ThreadDb::FileSymbols {
  dev_t dev = 0;
  ino_t ino = 0;
  timespec mtime{};
  off_t size = 0;
  std::unordered_map<std::string, ElfSymbolValue> symbols;
};

namespace {

std::string td_error_name(td_err_e err) {
  switch (err) {
    case TD_ERR: return "generic error";
    case TD_NOTHR: return "no thread to satisfy query";
    case TD_NOLWP: return "no LWP to satisfy query";
    case TD_BADPH: return "invalid process handle";
    case TD_BADTH: return "invalid thread handle";
    case TD_BADTA: return "invalid thread agent";
    case TD_NOCAPAB: return "capability not available";
    case TD_DBERR: return "debugger service failed";
    case TD_NOAPLIC: return "operation not applicable";
    case TD_NOLIBTHREAD: return "application not linked with libthread";
    case TD_VERSION: return "version mismatch between libthread_db and libpthread";
    case TD_NOTLS: return "no thread-local storage in that module";
    case TD_TLSDEFER: return "thread-local storage not allocated yet (TD_TLSDEFER)";  // = TD_NOTALLOC
    default: return fmt::format("libthread_db error {}", static_cast<int>(err));
  }
}

Error td_error(const char* call, td_err_e err) {
  int code = err == TD_TLSDEFER ? EAGAIN
             : (err == TD_NOTHR || err == TD_NOLWP)    ? ESRCH
                                                        : EIO;
  return Error{code, fmt::format("{}: {}", call, td_error_name(err))};
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> split_path(const std::string& path) {
  // As gdbserver (dirnames_to_char_ptr_vec): ':' separates, empty entries are kept.
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t colon = path.find(':', start);
    out.push_back(path.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

// The directory of the thread library the program loaded, for "$pdir": libpthread if there is
// one (glibc before 2.34), else libc, where glibc 2.34 moved it.
std::optional<std::string> thread_library_dir(const std::vector<LoadedModule>& modules) {
  for (const char* prefix : {"libpthread.so", "libpthread-", "libc.so", "libc-"})
    for (const auto& m : modules)
      if (base_name(m.file).starts_with(prefix)) {
        auto slash = m.file.rfind('/');
        return slash == 0 ? std::string("/") : m.file.substr(0, slash);
      }
  return std::nullopt;
}

// The process's ELF files, its main program first (where GDB's lookup starts too).
std::vector<LoadedModule> modules_of(Process& p) {
  std::vector<LoadedModule> out;
  auto map = p.memory_map();
  if (!map) return out;
  out = Symbolizer::loaded_modules(*map);
  if (auto exe = p.exe_path()) {
    auto it = std::find_if(out.begin(), out.end(), [&](const LoadedModule& m) { return m.name == *exe; });
    if (it != out.end()) std::rotate(out.begin(), it, it + 1);
  }
  return out;
}

}  // namespace

ThreadDb::ThreadDb() = default;
ThreadDb::~ThreadDb() = default;

void ThreadDb::set_search_path(std::string path) {
  search_path_ = path.empty() ? std::string(kDefaultSearchPath) : std::move(path);
}

ThreadDb::Library* ThreadDb::open_library(const std::string& path) {
  if (auto it = libraries_.find(path); it != libraries_.end()) return it->second.get();
  // RTLD_NOW: an unresolvable ps_* callback shows here, not in the middle of a lookup.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW);
  if (!handle) return nullptr;  // not cached: the file may appear later
  auto lib = std::make_unique<Library>();
  lib->handle = handle;
  auto sym = [&](auto& fn, const char* name) { fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name)); };
  sym(lib->ta_new, "td_ta_new");
  sym(lib->ta_delete, "td_ta_delete");
  sym(lib->map_lwp2thr, "td_ta_map_lwp2thr");
  sym(lib->thr_get_info, "td_thr_get_info");
  sym(lib->tls_get_addr, "td_thr_tls_get_addr");
  sym(lib->tlsbase, "td_thr_tlsbase");
  if (!lib->ta_new || !lib->ta_delete || !lib->map_lwp2thr || !lib->thr_get_info) return nullptr;  // dlcloses
  return libraries_.emplace(path, std::move(lib)).first->second.get();
}

std::vector<std::string> ThreadDb::candidates(Process& p) { return candidates_for(modules_of(p)); }

std::vector<std::string> ThreadDb::candidates_for(const std::vector<LoadedModule>& modules) const {
  std::vector<std::string> out;
  for (const std::string& dir : split_path(search_path_)) {
    if (dir == "$sdir") {
      out.emplace_back(kLibraryName);
    } else if (dir == "$pdir" || dir.starts_with("$pdir/")) {
      if (auto pdir = thread_library_dir(modules)) out.push_back(*pdir + dir.substr(5) + "/" + std::string(kLibraryName));
    } else {
      out.push_back(dir + "/" + std::string(kLibraryName));
    }
  }
  return out;
}

const ThreadDb::FileSymbols& ThreadDb::symbols_of(const std::string& file) {
  struct stat st {};
  bool have_stat = ::stat(file.c_str(), &st) == 0;
  auto& slot = file_symbols_[file];
  if (slot && have_stat && slot->dev == st.st_dev && slot->ino == st.st_ino && slot->size == st.st_size &&
      slot->mtime.tv_sec == st.st_mtim.tv_sec && slot->mtime.tv_nsec == st.st_mtim.tv_nsec)
    return *slot;
  slot = std::make_unique<FileSymbols>();
  if (have_stat) {
    slot->dev = st.st_dev;
    slot->ino = st.st_ino;
    slot->size = st.st_size;
    slot->mtime = st.st_mtim;
    slot->symbols = read_elf_symbol_values(file);
  }
  return *slot;
}

std::optional<uint64_t> ThreadDb::lookup_symbol(const std::vector<LoadedModule>& modules, const std::string& name) {
  std::optional<uint64_t> local;
  for (const auto& m : modules) {
    const auto& syms = symbols_of(m.file).symbols;
    auto it = syms.find(name);
    if (it == syms.end()) continue;
    if (it->second.global) return it->second.value + m.bias;
    if (!local) local = it->second.value + m.bias;
  }
  return local;
}

Result<uint64_t> ThreadDb::tls_address(Process& p, pid_t tid, uint64_t offset, uint64_t lm) {
  if (!p.alive() || !p.has_thread(tid)) return Error{ESRCH, fmt::format("no thread {}", tid)};
  ps_prochandle ph;
  ph.db = this;
  ph.process = &p;
  ph.modules = modules_of(p);

  // As gdbserver: the first library on the path that loads and accepts the process serves it,
  // and keeps serving it while it lives, whatever the search path says later.
  std::erase_if(accepted_, [](const auto& entry) { return ::kill(entry.first, 0) != 0 && errno == ESRCH; });
  std::vector<std::string> paths = candidates_for(ph.modules);
  if (auto it = accepted_.find(p.pid()); it != accepted_.end()) paths.insert(paths.begin(), it->second);
  Library* lib = nullptr;
  td_thragent_t* agent = nullptr;
  std::string why = fmt::format("no {} found on the search path '{}'", kLibraryName, search_path_);
  for (const std::string& path : paths) {
    Library* candidate = open_library(path);
    if (!candidate) continue;
    td_err_e err = candidate->ta_new(&ph, &agent);
    if (err == TD_OK) {
      lib = candidate;
      accepted_[p.pid()] = path;
      break;
    }
    why = fmt::format("{}: td_ta_new: {}", path, td_error_name(err));
  }
  if (!lib) return Error{ENOENT, why};
  // One agent per request: it caches symbol addresses, which an exec would make stale.
  struct AgentGuard {
    Library* lib;
    td_thragent_t* agent;
    ~AgentGuard() { lib->ta_delete(agent); }
  } guard{lib, agent};

  if (!lib->tls_get_addr || (lm == 0 && !lib->tlsbase))
    return Error{ENOSYS, "libthread_db has no td_thr_tls_get_addr / td_thr_tlsbase"};

  td_thrhandle_t th{};
  if (td_err_e err = lib->map_lwp2thr(agent, tid, &th); err != TD_OK) return td_error("td_ta_map_lwp2thr", err);
  // gdbserver's find_one_thread: a thread libthread_db cannot name yet (the main thread before
  // libc set up its thread pointer: ti_tid 0) is not asked about.
  td_thrinfo_t info{};
  if (td_err_e err = lib->thr_get_info(&th, &info); err != TD_OK) return td_error("td_thr_get_info", err);
  if (info.ti_lid != tid) return Error{ESRCH, fmt::format("libthread_db maps thread {} to LWP {}", tid, info.ti_lid)};
  if (info.ti_tid == 0) return Error{ESRCH, fmt::format("thread {} is not initialised yet", tid)};

  psaddr_t addr = nullptr;
  if (lm != 0) {
    td_err_e err = lib->tls_get_addr(&th, reinterpret_cast<psaddr_t>(static_cast<uintptr_t>(lm)), offset, &addr);
    if (err != TD_OK) return td_error("td_thr_tls_get_addr", err);
    return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr));
  }
  // A static program: GDB knows no link_map, the executable's block is module 1 (glibc's
  // __libc_setup_tls), as gdbserver does.
  td_err_e err = lib->tlsbase(&th, 1, &addr);
  if (err != TD_OK) return td_error("td_thr_tlsbase", err);
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)) + offset;
}

}  // namespace backend

// ---- proc_service: what libthread_db calls back (exported by proc_service.list) ----

namespace {

// prgregset_t is struct user_regs_struct as an array; the names are GDB's register names.
constexpr const char* kUserRegsOrder[] = {
    "r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
    "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs"};
static_assert(sizeof(kUserRegsOrder) / sizeof(kUserRegsOrder[0]) * 8 == sizeof(user_regs_struct));

bool stopped_thread(ps_prochandle* ph, lwpid_t lwp) {
  return ph && ph->process && ph->process->alive() && ph->process->has_thread(lwp);
}

ps_err_e read_memory(ps_prochandle* ph, psaddr_t addr, void* buf, size_t size) {
  if (!ph || !ph->process) return PS_BADPID;
  auto n = ph->process->read_memory(reinterpret_cast<uintptr_t>(addr), {static_cast<uint8_t*>(buf), size});
  return n && *n == size ? PS_OK : PS_ERR;
}

ps_err_e write_memory(ps_prochandle* ph, psaddr_t addr, const void* buf, size_t size) {
  if (!ph || !ph->process) return PS_BADPID;
  auto n = ph->process->write_memory(reinterpret_cast<uintptr_t>(addr), {static_cast<const uint8_t*>(buf), size});
  return n && *n == size ? PS_OK : PS_ERR;
}

}  // namespace

extern "C" {

ps_err_e ps_pdread(ps_prochandle* ph, psaddr_t addr, void* buf, size_t size) {
  return read_memory(ph, addr, buf, size);
}
ps_err_e ps_pdwrite(ps_prochandle* ph, psaddr_t addr, const void* buf, size_t size) {
  return write_memory(ph, addr, buf, size);
}
// Text and data share one address space on Linux.
ps_err_e ps_ptread(ps_prochandle* ph, psaddr_t addr, void* buf, size_t size) {
  return read_memory(ph, addr, buf, size);
}
ps_err_e ps_ptwrite(ps_prochandle* ph, psaddr_t addr, const void* buf, size_t size) {
  return write_memory(ph, addr, buf, size);
}

ps_err_e ps_lgetregs(ps_prochandle* ph, lwpid_t lwp, prgregset_t gregs) {
  if (!stopped_thread(ph, lwp)) return PS_BADLID;
  auto regs = ph->process->read_registers(lwp, backend::RegisterSet::General);
  if (!regs) return PS_ERR;
  const auto& layout = ph->process->register_layout();
  for (size_t i = 0; i < std::size(kUserRegsOrder); ++i) {
    auto regno = layout.find(kUserRegsOrder[i]);
    gregs[i] = regno ? regs->get_u64(layout, *regno) : 0;
  }
  return PS_OK;
}

ps_err_e ps_lsetregs(ps_prochandle* ph, lwpid_t lwp, const prgregset_t gregs) {
  if (!stopped_thread(ph, lwp)) return PS_BADLID;
  auto regs = ph->process->read_registers(lwp, backend::RegisterSet::All);
  if (!regs) return PS_ERR;
  const auto& layout = ph->process->register_layout();
  for (size_t i = 0; i < std::size(kUserRegsOrder); ++i)
    if (auto regno = layout.find(kUserRegsOrder[i])) regs->set_u64(layout, *regno, gregs[i]);
  return ph->process->write_registers(lwp, *regs) ? PS_OK : PS_ERR;
}

// libthread_db uses the FPU set only in td_thr_getfpregs / td_thr_setfpregs, which the server
// never calls; gdbserver answers PS_ERR as well.
ps_err_e ps_lgetfpregs(ps_prochandle*, lwpid_t, prfpregset_t*) { return PS_ERR; }
ps_err_e ps_lsetfpregs(ps_prochandle*, lwpid_t, const prfpregset_t*) { return PS_ERR; }

pid_t ps_getpid(ps_prochandle* ph) { return ph && ph->process ? ph->process->pid() : -1; }

// x86-64 glibc finds a thread's descriptor through the FS base (DB_THREAD_SELF is
// CONST_THREAD_AREA(64, FS)); idx is <sys/reg.h>'s register index.
ps_err_e ps_get_thread_area(ps_prochandle* ph, lwpid_t lwp, int idx, psaddr_t* base) {
  if (!stopped_thread(ph, lwp)) return PS_BADLID;
  if (idx != FS && idx != GS) return PS_BADADDR;
  auto regs = ph->process->read_registers(lwp, backend::RegisterSet::General);
  if (!regs) return PS_ERR;
  const auto& layout = ph->process->register_layout();
  auto regno = layout.find(idx == FS ? "fs_base" : "gs_base");
  if (!regno) return PS_ERR;
  *base = reinterpret_cast<psaddr_t>(static_cast<uintptr_t>(regs->get_u64(layout, *regno)));
  return PS_OK;
}

// The object name ("libc.so.6", "ld-linux-x86-64.so.2", or none) is only a hint: like GDB's
// lookup for gdbserver, search every module, so a static program's own tables serve too.
ps_err_e ps_pglobal_lookup(ps_prochandle* ph, const char*, const char* name, psaddr_t* addr) {
  if (!ph || !ph->db || !name) return PS_ERR;
  auto value = ph->db->lookup_symbol(ph->modules, name);
  if (!value) return PS_NOSYM;
  *addr = reinterpret_cast<psaddr_t>(static_cast<uintptr_t>(*value));
  return PS_OK;
}

// The process is stopped whenever libthread_db runs (all-stop): nothing to do.
ps_err_e ps_pstop(ps_prochandle*) { return PS_OK; }
ps_err_e ps_pcontinue(ps_prochandle*) { return PS_OK; }
ps_err_e ps_lstop(ps_prochandle*, lwpid_t) { return PS_OK; }
ps_err_e ps_lcontinue(ps_prochandle*, lwpid_t) { return PS_OK; }

}  // extern "C"
