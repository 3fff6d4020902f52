// Asynchronous signals delivered no faster than a recorded program can run between them.
//
// Natively a timer's signal costs its program a microsecond or two; recorded, each is several
// ptrace stops. Once those take longer than the timer's period (a 1 ms timer on a loaded
// machine, a 50 us one anywhere), the next signal is pending again when the handler returns
// and the program never runs a single instruction of its own: the recording hangs. The kernel
// may deliver an asynchronous signal later than it was sent and merges a standard signal
// with one of its kind still pending, so the recorder may do the same: a signal that
// interrupts the program's own code before it has run kMinRunNs of CPU time since the last
// one delivered is held (resumed without it), and raised again (tgkill from the recorder) once
// the program has run that long or sleeps in a system call. The replay sees only the
// signals delivered, at their recorded branch counts, so nothing about it changes.
// Realtime signals are queued by the kernel, never merged: they are never held.
#pragma once

#include <signal.h>

#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace backend::replay {

class SignalPacer {
 public:
  static constexpr int64_t kMinRunNs = 500'000;
  enum class Action { Deliver, Hold, Drop };

  // An asynchronous signal stopped the program. ours: sent by raise_due()'s tgkill (si_code
  // SI_TKILL from the recorder's pid); in_user_code: it came while the program ran its own code
  // (not inside a system call, which it may be the one to wake); cpu_ns: the program's CPU time.
  // Deliver: *si is the siginfo to deliver (a held signal's own when it is ours). Hold: resume
  // without it (kept). Drop: resume without it (a raise whose signal went in meanwhile).
  Action arrived(siginfo_t* si, bool ours, bool in_user_code, int64_t cpu_ns);
  // The held signals to raise now: the program has run long enough since the last delivery,
  // or it sleeps in the kernel (a timer it waits for in pause() must reach it).
  std::vector<int> due(int64_t cpu_ns, bool sleeping);
  bool holding() const { return !held_.empty(); }
  uint64_t held_count() const { return holds_; }

 private:
  std::map<int, siginfo_t> held_;  // by signal number: the first one's siginfo
  std::set<int> raised_;           // held signals whose tgkill is on its way
  int64_t last_delivery_ = INT64_MIN / 2;
  uint64_t holds_ = 0;
};

}  // namespace backend::replay
