#include "backend/btrace/perf/perf_pt.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "backend/btrace/perf/perf_bts.h"

namespace backend {

Result<int> pt_event_type(const char* type_path) {
  errno = 0;
  FILE* f = std::fopen(type_path, "re");
  if (!f) {
    int e = errno ? errno : ENOENT;
    std::string head = std::string("Failed to open ") + type_path;
    switch (e) {
      case EACCES:
      case EFAULT:
      case EPERM:
        return Error{e, head + " (" + std::strerror(e) + ").  You do not have permission to use Intel PT."};
      case ENOTDIR:
      case ENOENT:
        return Error{e, head + " (" + std::strerror(e) + ").  Your system does not support Intel PT."};
      default:
        return Error{e, head + ": " + std::strerror(e) + "."};
    }
  }
  int type = -1;
  bool found = std::fscanf(f, "%d", &type) == 1;
  std::fclose(f);
  if (!found) return Error{EINVAL, std::string("Failed to read the PT event type from ") + type_path + "."};
  return type;
}

perf_event_attr pt_attr(int type) {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = static_cast<uint32_t>(type);
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_idle = 1;
  return attr;
}

PtSupport probe_pt(const char* type_path) {
  PtSupport s;
  auto type = pt_event_type(type_path);
  if (!type) {
    s.why = type.error().message;
    return s;
  }
  s.type = *type;
  perf_event_attr attr = pt_attr(*type);
  attr.disabled = 1;
  auto event = PerfEvent::open(attr, 0);
  if (!event) {
    int e = event.error().code;
    s.why = std::string("intel_pt PMU type ") + std::to_string(*type) + ", but perf_event_open failed: " +
            std::strerror(e);
    std::string meaning = perf_errno_meaning(e);
    if (!meaning.empty()) s.why += " (" + meaning + ")";
    return s;
  }
  s.works = true;
  return s;
}

PtAuxRing::PtAuxRing(const perf_event_mmap_page* header, std::span<const uint8_t> aux)
    : header_(header), aux_(aux) {}

Result<PtRead> PtAuxRing::read(TraceRead kind) {
  if (kind == TraceRead::Delta) return Error{ENOTSUP, "Generic Error."};
  // The kernel moves aux_head as it writes; acquire orders the data reads after it.
  uint64_t head = __atomic_load_n(&header_->aux_head, __ATOMIC_ACQUIRE);
  PtRead out;
  if (kind == TraceRead::New && head == last_head_) {
    out.unchanged = true;
    return out;
  }
  last_head_ = head;
  size_t size = aux_.size();
  if (size == 0) return out;
  // In overwrite mode aux_head wraps inside the buffer; as a byte counter it would not. Either
  // way the newest byte is just before head % size, and the oldest right after it.
  size_t at = static_cast<size_t>(head % size);
  out.raw.reserve(size);
  out.raw.insert(out.raw.end(), aux_.begin() + at, aux_.end());
  out.raw.insert(out.raw.end(), aux_.begin(), aux_.begin() + at);
  return out;
}

Result<std::unique_ptr<PerfPtSource>> PerfPtSource::open(pid_t tid, uint64_t size_bytes, uint64_t config) {
  auto type = pt_event_type();
  if (!type) return type.error();
  perf_event_attr attr = pt_attr(*type);
  attr.config |= config;
  auto event = PerfEvent::open(attr, tid);
  if (!event) return perf_bts_open_error(event.error().code);

  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  auto user = Mapping::map(event->fd(), page, PROT_READ | PROT_WRITE);
  if (!user)
    return Error{user.error().code, std::string("Failed to map trace user page: ") + std::strerror(user.error().code) + "."};
  auto* header = reinterpret_cast<perf_event_mmap_page*>(user->data());
  header->aux_offset = header->data_offset + header->data_size;

  uint64_t pages = bts_buffer_bytes(size_bytes, page) / page;
  Mapping aux;
  int map_err = 0;
  for (; pages > 0; pages >>= 1) {
    uint64_t length = pages * page;
    if (length > UINT_MAX) continue;  // btrace-conf reports the size as an unsigned int
    header->aux_size = length;
    auto m = Mapping::map(event->fd(), length, PROT_READ, static_cast<off_t>(header->aux_offset));
    if (m) {
      aux = std::move(*m);
      break;
    }
    map_err = m.error().code;
  }
  if (!aux.data()) return Error{map_err, std::string("Failed to map trace buffer: ") + std::strerror(map_err) + "."};
  return over(std::move(*user), std::move(aux), std::move(*event));
}

std::unique_ptr<PerfPtSource> PerfPtSource::over(Mapping user_page, Mapping aux, PerfEvent event) {
  std::unique_ptr<PerfPtSource> src(new PerfPtSource());
  src->event_ = std::move(event);
  src->user_page_ = std::move(user_page);
  src->aux_ = std::move(aux);
  const auto* header = reinterpret_cast<const perf_event_mmap_page*>(src->user_page_.data());
  src->ring_ = std::make_unique<PtAuxRing>(header, std::span<const uint8_t>(src->aux_.data(), src->aux_.size()));
  return src;
}

PerfPtSource::~PerfPtSource() = default;

}  // namespace backend
