// PatchTracer: the system-call buffer of a recording (docs/record-replay.md, "The system-call
// buffer"). A call that neither blocks nor makes descriptors or mappings runs from its stub,
// which appends a record to the thread's buffer (beside its rings); at the thread's next stop
// each record goes to the sink once the ring is drained up to where the call was made, so that
// it carries its exact branch count. Every other system call in patched code stops at an int3
// before it: the recording runs its free runs under PTRACE_CONT.
#include "backend/btrace/patch/patch_tracer.h"

#include <cstring>

#include "backend/btrace/patch/patch_tracer_detail.h"

namespace backend {

bool PatchTracer::buffering() const { return tracer_ && tracer_->syscall_buffer() && rings_.size() <= 1; }

void PatchTracer::plan_buffered_call(pid_t tid, Site& s) {
  const FlowInsn& f = s.block.end;
  uint64_t next = f.addr + f.len;
  // The whole block: its number is set in it (glibc's wrappers), and the instructions the
  // patch displaces come from before the `syscall`, never before its latest start.
  uint64_t from = s.latest_start;
  if (f.len != 2 || from >= f.addr || next - from > 4096) return;
  std::vector<uint8_t> bytes(next - from);
  if (code_.reader()(from, bytes) != bytes.size()) return;
  auto insns = patch::decode_all(dis_, bytes, from);
  if (!insns || insns->size() < 2 || insns->back().addr != f.addr || insns->back().len != f.len) return;
  auto nr = patch::syscall_number(*insns);
  if (!nr) return;
  auto out = patch::buffered_syscall_output(*nr);
  std::span<const patch::Insn> before(insns->data(), insns->size() - 1);
  auto k = patch::choose_displacement(before, s.latest_start);
  if (!k) return;
  Region* r = region_of(f.addr);
  if (!r) return;
  if (!r->code_begin && (r->area_failed || !map_code_area(tid, *r))) {
    r->area_failed = true;
    return;
  }
  patch::SyscallStubSpec spec;
  spec.displaced.assign(before.begin() + static_cast<std::ptrdiff_t>(*k), before.end());
  spec.syscall_addr = f.addr;
  spec.nr = *nr;
  spec.out = out.value_or(patch::SyscallOutput{});
  spec.stop_only = !out;
  auto placed = place_stub(tid, *r, [&](uint64_t a) { return patch::build_syscall_stub(spec, a); });
  if (!placed) return;
  auto& [at, built] = *placed;
  auto* stub = &built;
  uint64_t begin = spec.displaced.front().addr;
  auto jmp = patch::jmp_rel32(begin, at);
  if (!jmp) return;
  if (!link_exits(at, stub->code, stub->exits)) return;
  if (!area_write(at, stub->code)) return;
  // No edge: the call is no branch. Its int3 (no room) stands for the original `syscall`.
  StubInfo info{f.addr, static_cast<uint32_t>(stub->code.size()), stub->exact, stub->miss_int3, {},
                std::nullopt, 0, f.len};
  info.buffered = !spec.stop_only;
  stubs_[at] = std::move(info);
  s.begin = begin;
  s.end = f.addr;  // the `syscall` itself stays: the stub's int3 sends the thread there
  s.original.assign(bytes.begin() + static_cast<std::ptrdiff_t>(begin - from),
                    bytes.begin() + static_cast<std::ptrdiff_t>(f.addr - from));
  s.patched = *jmp;
  s.patched.resize(s.end - s.begin, 0xcc);
  s.patchable = true;
}

bool PatchTracer::in_buffered_stub(uint64_t pc) const {
  uint64_t base = 0;
  const StubInfo* info = stub_at(pc, &base);
  return info && info->buffered;
}

void PatchTracer::flush_calls(pid_t tid, Ring& r, PatchThread* t) {
  if (!r.calls || !r.view) return;
  auto* words = reinterpret_cast<uint64_t*>(r.view);
  uint64_t end = __atomic_load_n(&words[patch::kGsSyscallBufNext / 8], __ATOMIC_ACQUIRE);
  if (end <= r.calls || end > r.calls_end) return;
  SyscallBufferSink* sink = tracer_->syscall_buffer();
  const uint8_t* base = r.view + (r.calls - r.head_addr);
  for (uint64_t at = r.calls; at + patch::kSyscallRecordHeader <= end;) {
    const uint8_t* rec = base + (at - r.calls);
    uint64_t w[patch::kSyscallRecordHeader / 8];
    std::memcpy(w, rec, sizeof w);
    uint64_t len = std::min<uint64_t>(w[patch::kRecordLength], end - at - patch::kSyscallRecordHeader);
    // The branches before it, counted first.
    if (uint64_t head = w[patch::kRecordHead]; head > r.first && head <= r.end) {
      size_t used = 0;
      (void)drain_span(tid, r, t, r.first, head, used);
      r.first += used;
    }
    BufferedSyscall call;
    call.nr = w[patch::kRecordNr];
    std::memcpy(call.args, &w[patch::kRecordArgs], sizeof call.args);
    call.result = static_cast<int64_t>(w[patch::kRecordResult]);
    call.pc = w[patch::kRecordPc];
    call.data = std::span<const uint8_t>(rec + patch::kSyscallRecordHeader, len);
    if (auto o = patch::buffered_syscall_output(call.nr); o && o->ptr_arg >= 0) call.data_addr = call.args[o->ptr_arg];
    if (sink) sink->buffered_syscall(tid, call);
    at += patch::kSyscallRecordHeader + ((len + 7) & ~uint64_t{7});
  }
  __atomic_store_n(&words[patch::kGsSyscallBufNext / 8], r.calls, __ATOMIC_RELEASE);
}

}  // namespace backend
