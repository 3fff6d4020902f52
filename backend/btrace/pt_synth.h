// A software history served as Intel PT (`--synthesize-pt`): the packets a CPU tracing the
// thread in user mode would have written for the same path, so that GDB decodes it with
// libipt as it would a hardware trace. GDB spends ~5 µs per instruction turning a BTS history
// into its own (it disassembles every recorded instruction); from PT it took a fifth of that
// for the same 1.7 M-instruction run (docs/benchmarks.md), so histories about five times
// longer stay interactive.
//
// What is written (Intel SDM vol. 3, "Intel Processor Trace"): PSB+ (PSB, MODE.Exec 64-bit,
// PSBEND), TIP.PGE where the history begins, one TNT bit per conditional branch on the path
// (taken or not), TIP for every return and indirect branch (no return compression), TIP.PGD
// and TIP.PGE around a system call that returns where it was (the kernel is not traced), TIP
// for one the history shows going elsewhere (rt_sigreturn), FUP + TIP (an asynchronous branch)
// for a signal whose handler interrupted the thread, and FUP + TIP.PGD at the pc the thread
// stopped at. Direct jumps and calls need no packet. IPs are written whole (6 bytes,
// sign-extended). So GDB shows what it shows for the same history as BTS, with no gap.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/btrace/branch.h"
#include "backend/x86/block_cache.h"

namespace backend {

// The packets, bytes only (unit-tested against the SDM's encodings).
class PtPacketWriter {
 public:
  enum class IpKind : uint8_t { Tip = 0x0d, TipPge = 0x11, TipPgd = 0x01, Fup = 0x1d };
  void psb_plus();                    // PSB, MODE.Exec (64-bit), PSBEND
  void tnt(bool taken);               // one conditional branch, buffered into long TNT packets
  void ip(IpKind kind, uint64_t ip);  // with the whole ip (IPBytes 011: 48 bits, sign-extended)
  void ip_suppressed(IpKind kind);    // IPBytes 000: no ip
  std::vector<uint8_t> take();        // everything written (pending TNT bits flushed first)
  size_t size() const { return out_.size(); }

 private:
  void flush_tnt();
  std::vector<uint8_t> out_;
  uint64_t tnt_bits_ = 0;  // oldest first from the top of those pending
  unsigned tnt_count_ = 0;
};

// The stream for a thread whose history is `branches` (oldest first; a software history: a
// branch to 0 is a call through a null pointer, not an LBR gap), begun at `start` (where
// recording began, or the target of the oldest branch kept: then that branch is not in
// `branches`), and stopped at `end_pc`. The path between branches is walked in `code` (every
// conditional branch on it not taken). Where the history and the code disagree (code changed
// since, a branch that cannot follow), the stream says tracing was off there, and GDB shows a
// gap: never a wrong path.
std::vector<uint8_t> synthesize_pt(std::span<const Branch> branches, uint64_t start, uint64_t end_pc, BlockCache& code);

}  // namespace backend
