#include "backend/btrace/patch/shared_mapping.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "backend/ptrace/remote_syscall.h"

namespace backend::patch {

namespace {

bool failed(int64_t r) { return r < 0 && r > -4096; }

// A descriptor of this process, closed with it.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

SharedView::~SharedView() {
  if (data_) ::munmap(data_, size_);
}

SharedView& SharedView::operator=(SharedView&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Result<SharedMapping> map_shared(pid_t pid, pid_t tid, const ProcMemory& mem, uint64_t addr, bool exact, uint64_t size,
                                 int prot, uint64_t syscall_at, uint64_t name_at) {
  auto inject = [&](long nr, std::array<uint64_t, 6> args) {
    return inject_syscall(pid, tid, mem, nr, args, syscall_at);
  };
  auto created = inject(SYS_memfd_create, {name_at, MFD_CLOEXEC, 0, 0, 0, 0});
  if (!created) return created.error();
  if (failed(*created)) return Error{static_cast<int>(-*created), "memfd_create in the program failed"};
  const uint64_t theirs = static_cast<uint64_t>(*created);
  // Whatever happens next, the program's descriptor goes (its mapping, if any, keeps the memory).
  struct CloseTheirs {
    decltype(inject)& run;
    uint64_t fd;
    ~CloseTheirs() { (void)run(SYS_close, {fd, 0, 0, 0, 0, 0}); }
  } close_theirs{inject, theirs};

  Fd pidfd{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
  if (pidfd.fd < 0) return errno_error("pidfd_open");
  Fd ours{static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.fd, static_cast<int>(theirs), 0))};
  if (ours.fd < 0) return errno_error("pidfd_getfd");
  if (::ftruncate(ours.fd, static_cast<off_t>(size)) != 0) return errno_error("ftruncate of a shared area");
  void* view = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, ours.fd, 0);
  if (view == MAP_FAILED) return errno_error("mmap of a shared area in the server");
  SharedMapping out;
  out.view = SharedView(static_cast<uint8_t*>(view), size);
  const uint64_t flags = MAP_SHARED | (exact ? MAP_FIXED_NOREPLACE : 0);
  auto m = inject(SYS_mmap, {addr, size, static_cast<uint64_t>(prot), flags, theirs, 0});
  if (!m) return m.error();
  if (failed(*m)) return Error{static_cast<int>(-*m), "mmap of a shared area in the program failed"};
  out.addr = static_cast<uint64_t>(*m);
  if (exact && out.addr != addr) {  // an old kernel ignored MAP_FIXED_NOREPLACE
    (void)inject(SYS_munmap, {out.addr, size, 0, 0, 0, 0});
    return Error{ENOMEM, "the shared area could not be placed where asked"};
  }
  return out;
}

}  // namespace backend::patch
