#include "backend/btrace/perf/perf_bts.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "backend/btrace/blocks.h"
#include "backend/host/cpu_id.h"

namespace backend {

namespace {

constexpr size_t kRecordSize = 24;  // perf_event_header + u64 ip + u64 addr
constexpr int kReadRetries = 5;     // data_head may still move right after a ptrace stop

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

PerfBtsRing::PerfBtsRing(std::span<const uint8_t> mapping, size_t page_size, uint64_t kernel_start)
    : header_(mapping.data()), kernel_start_(kernel_start) {
  const auto* page = reinterpret_cast<const perf_event_mmap_page*>(header_);
  // data_offset/data_size exist since PERF_ATTR_SIZE_VER5 kernels; older ones leave them 0 and
  // the data area is simply everything after the first page.
  uint64_t offset = page->data_offset, size = page->data_size;
  if (size == 0 || offset + size > mapping.size()) {
    offset = page_size;
    size = mapping.size() > page_size ? mapping.size() - page_size : 0;
  }
  data_ = header_ + offset;
  size_ = size;
}

uint64_t PerfBtsRing::load_head() const {
  // The kernel updates data_head concurrently; an acquire load orders the record reads after it.
  const auto* page = reinterpret_cast<const perf_event_mmap_page*>(header_);
  return __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
}

PerfBtsRead PerfBtsRing::walk(uint64_t head, uint64_t bytes) const {
  PerfBtsRead out;
  uint64_t pos = head;
  // A partial record left at the old end of the buffer (bytes % 24) is never looked at.
  while (bytes >= kRecordSize && size_ >= kRecordSize) {
    pos -= kRecordSize;
    bytes -= kRecordSize;
    uint8_t rec[kRecordSize];
    uint64_t at = pos % size_;
    uint64_t first = std::min<uint64_t>(kRecordSize, size_ - at);
    std::memcpy(rec, data_ + at, first);
    if (first < kRecordSize) std::memcpy(rec + first, data_, kRecordSize - first);  // wrapped
    perf_event_header h;
    std::memcpy(&h, rec, sizeof h);
    if (h.type != PERF_RECORD_SAMPLE || h.size != kRecordSize) {
      out.incomplete = true;
      break;
    }
    Branch b{load_u64(rec + 8), load_u64(rec + 16)};
    bool kernel_from = kernel_start_ ? b.from >= kernel_start_ : (b.from >> 63) != 0;
    if (kernel_from) continue;  // kernel->user returns after interrupts/syscalls
    out.branches.push_back(b);
  }
  return out;
}

Result<PerfBtsRead> PerfBtsRing::read_branches(TraceRead kind) {
  for (int attempt = 0;; ++attempt) {
    uint64_t head = load_head();
    uint64_t bytes;
    if (kind == TraceRead::Delta) {
      if (head < last_head_ || head - last_head_ > size_) return Error{EOVERFLOW, "Overflow."};
      bytes = head - last_head_;
    } else {
      if (kind == TraceRead::New && head == last_head_) {
        PerfBtsRead none;
        none.unchanged = true;
        return none;
      }
      bytes = std::min<uint64_t>(head, size_);
    }
    PerfBtsRead out = walk(head, bytes);
    if (load_head() != head && attempt + 1 < kReadRetries) continue;
    last_head_ = head;
    return out;
  }
}

Result<std::vector<TraceBlock>> PerfBtsRing::read(TraceRead kind, uint64_t current_pc, bool* incomplete) {
  auto r = read_branches(kind);
  if (!r) return r.error();
  if (incomplete) *incomplete = r->incomplete;
  if (r->unchanged) return std::vector<TraceBlock>{};
  return build_blocks(r->branches, current_pc, kind == TraceRead::Delta);
}

perf_event_attr perf_bts_attr() {
  perf_event_attr attr;
  std::memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_BRANCH_INSTRUCTIONS;
  attr.sample_period = 1;  // period 1 on branch instructions is what selects the BTS hardware
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_ADDR;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_idle = 1;
  return attr;
}

uint64_t kernel_text_start() {
  std::ifstream in("/proc/kallsyms");
  std::string addr, type, name;
  while (in >> addr >> type >> name) {
    if (name == "_text") return std::stoull(addr, nullptr, 16);  // 0 when kptr_restrict hides it
    in.ignore(4096, '\n');  // skip a trailing [module] column, if any
  }
  return 0;
}

std::string perf_errno_meaning(int err) {
  switch (err) {
    case ENOENT:
      return "no hardware PMU here: perf has no branch event (most VMs expose none)";
    case EOPNOTSUPP:
      return "this CPU's PMU cannot do it (no BTS, or BTS disabled, e.g. by PTI)";
    case EBUSY:
      return "the hardware is in use by another LBR, BTS or PT user (perf record -b, a KVM guest's vLBR)";
    case EINVAL:
      return "the PMU rejected the event's attributes";
    case EACCES:
    case EPERM:
      return "refused by perf_event_paranoid; run as root or with CAP_PERFMON";
    default:
      return "";
  }
}

Error perf_bts_open_error(int err, const char* paranoid_path) {
  if (err == EPERM || err == EACCES) {
    FILE* f = std::fopen(paranoid_path, "re");
    if (!f) {
      int e = errno;
      return Error{err, std::string("Failed to open ") + paranoid_path + " (" + std::strerror(e) +
                            ").  Your system does not support process recording."};
    }
    int level = 0;
    bool got = std::fscanf(f, "%d", &level) == 1;
    std::fclose(f);
    if (got && level > 2)
      return Error{err,
                   "You do not have permission to record the process.  Try setting "
                   "/proc/sys/kernel/perf_event_paranoid to 2 or less."};
  }
  // gdbserver's words first (GDB users and tests know them), then what the errno means here.
  std::string text = std::string("Failed to start recording: ") + std::strerror(err);
  std::string meaning = perf_errno_meaning(err);
  if (!meaning.empty()) text += " (" + meaning + ")";
  return Error{err, text};
}

Result<std::unique_ptr<PerfBtsSource>> PerfBtsSource::open(pid_t tid, uint64_t size_bytes) {
  if (bts_disabled_for_cpu(read_cpu_id()))
    return Error{ENOTSUP, "BTS support has been disabled for the target cpu."};

  auto event = PerfEvent::open(perf_bts_attr(), tid);
  if (!event) return perf_bts_open_error(event.error().code);

  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  int map_err = 0;
  uint64_t pages = bts_buffer_bytes(size_bytes, page) / page;
  Mapping map;
  for (; pages > 0; pages >>= 1) {
    auto m = Mapping::map(event->fd(), (pages + 1) * page, PROT_READ);
    if (m) {
      map = std::move(*m);
      break;
    }
    map_err = m.error().code;
  }
  if (!map.data()) return Error{map_err, std::string("Failed to map trace buffer: ") + std::strerror(map_err) + "."};
  return over(std::move(map), page, kernel_text_start(), std::move(*event));
}

std::unique_ptr<PerfBtsSource> PerfBtsSource::over(Mapping map, size_t page_size, uint64_t kernel_start,
                                                    PerfEvent event) {
  std::unique_ptr<PerfBtsSource> src(new PerfBtsSource());
  src->event_ = std::move(event);
  src->map_ = std::move(map);
  src->ring_ = std::make_unique<PerfBtsRing>(std::span<const uint8_t>(src->map_.data(), src->map_.size()), page_size,
                                             kernel_start);
  return src;
}

PerfBtsSource::~PerfBtsSource() = default;

}  // namespace backend
