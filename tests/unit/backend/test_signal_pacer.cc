// SignalPacer: which asynchronous signals a recording holds back, and when they are raised again
// (backend/replay/signal_pacer.h).
#include <signal.h>

#include <catch2/catch.hpp>

#include "backend/replay/signal_pacer.h"

using backend::replay::SignalPacer;
using Action = SignalPacer::Action;

namespace {
constexpr int64_t kRun = SignalPacer::kMinRunNs;

siginfo_t timer(int sig = SIGALRM, int code = SI_KERNEL) {
  siginfo_t si{};
  si.si_signo = sig;
  si.si_code = code;
  return si;
}
}  // namespace

TEST_CASE("signal pacer: a signal before the program ran long enough is held, raised when due", "[replay][pacer]") {
  SignalPacer p;
  siginfo_t first = timer();
  CHECK(p.arrived(&first, false, true, 1'000'000) == Action::Deliver);  // the first: at once
  siginfo_t second = timer();
  second.si_value.sival_int = 2;  // told apart from later ones
  CHECK(p.arrived(&second, false, true, 1'000'000 + kRun / 10) == Action::Hold);
  CHECK(p.holding());
  CHECK(p.held_count() == 1);
  siginfo_t third = timer();
  CHECK(p.arrived(&third, false, true, 1'000'000 + kRun / 5) == Action::Hold);  // merged into the held one
  CHECK(p.held_count() == 1);
  CHECK(p.due(1'000'000 + kRun / 2, false).empty());  // not run long enough, not asleep
  CHECK(p.due(1'000'000 + kRun, false) == std::vector<int>{SIGALRM});
  CHECK(p.due(1'000'000 + kRun, false).empty());  // raised once
  // The raise arrives (SI_TKILL from the recorder): delivered with the held siginfo.
  siginfo_t raised = timer(SIGALRM, SI_TKILL);
  CHECK(p.arrived(&raised, true, true, 1'000'000 + kRun + 10) == Action::Deliver);
  CHECK(raised.si_code == SI_KERNEL);
  CHECK(raised.si_value.sival_int == 2);
  CHECK_FALSE(p.holding());
  // A raise with nothing held (its signal went in another way): dropped.
  siginfo_t stray = timer(SIGALRM, SI_TKILL);
  CHECK(p.arrived(&stray, true, true, 1'000'000 + 3 * kRun) == Action::Drop);
}

TEST_CASE("signal pacer: never held inside a system call, realtime ones never, asleep raises at once", "[replay][pacer]") {
  SignalPacer p;
  siginfo_t si = timer();
  CHECK(p.arrived(&si, false, true, 0) == Action::Deliver);
  si = timer();
  CHECK(p.arrived(&si, false, false, 10) == Action::Deliver);  // it may be what wakes the call
  si = timer(SIGRTMIN);
  CHECK(p.arrived(&si, false, true, 20) == Action::Deliver);  // queued by the kernel, not merged
  si = timer(SIGUSR1, SI_USER);
  CHECK(p.arrived(&si, false, true, 30) == Action::Hold);
  CHECK(p.due(40, true) == std::vector<int>{SIGUSR1});  // asleep in the kernel: raised now
}

TEST_CASE("signal pacer: a held signal's kind arriving when due is delivered and the raise dropped", "[replay][pacer]") {
  SignalPacer p;
  siginfo_t si = timer();
  CHECK(p.arrived(&si, false, true, 0) == Action::Deliver);
  si = timer();
  CHECK(p.arrived(&si, false, true, 100) == Action::Hold);
  CHECK(p.due(kRun, false) == std::vector<int>{SIGALRM});
  // The kernel merged the raise into a timer signal pending before it: that one comes.
  si = timer();
  CHECK(p.arrived(&si, false, true, kRun + 5) == Action::Deliver);
  CHECK_FALSE(p.holding());
  si = timer(SIGALRM, SI_TKILL);
  CHECK(p.arrived(&si, true, true, kRun + 6) == Action::Drop);
  // Merged into a timer signal too soon again: held anew, and raised again when due.
  si = timer();
  CHECK(p.arrived(&si, false, true, kRun + 7) == Action::Hold);
  CHECK(p.due(2 * kRun + 5, false) == std::vector<int>{SIGALRM});
  si = timer();
  CHECK(p.arrived(&si, false, true, 2 * kRun + 6) == Action::Deliver);
  si = timer();
  CHECK(p.arrived(&si, false, true, 2 * kRun + 7) == Action::Hold);
  CHECK(p.due(3 * kRun + 6, false) == std::vector<int>{SIGALRM});
}
