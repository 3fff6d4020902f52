#include "protocol/signals.h"

#include <array>
#include <utility>

namespace protocol {
namespace {

// (Linux number, GDB number) for the classic signals. Literal Linux x86-64 numbers so the
// table does not depend on the build host's <signal.h>.
constexpr std::array<std::pair<int, int>, 30> kClassic{{
    {1, 1},    // HUP
    {2, 2},    // INT
    {3, 3},    // QUIT
    {4, 4},    // ILL
    {5, 5},    // TRAP
    {6, 6},    // ABRT
    {7, 10},   // BUS
    {8, 8},    // FPE
    {9, 9},    // KILL
    {10, 30},  // USR1
    {11, 11},  // SEGV
    {12, 31},  // USR2
    {13, 13},  // PIPE
    {14, 14},  // ALRM
    {15, 15},  // TERM
    {16, 143}, // STKFLT: GDB has no such signal
    {17, 20},  // CHLD
    {18, 19},  // CONT
    {19, 17},  // STOP
    {20, 18},  // TSTP
    {21, 21},  // TTIN
    {22, 22},  // TTOU
    {23, 16},  // URG
    {24, 24},  // XCPU
    {25, 25},  // XFSZ
    {26, 26},  // VTALRM
    {27, 27},  // PROF
    {28, 28},  // WINCH
    {29, 23},  // IO (== POLL on Linux)
    {30, 32},  // PWR
}};
constexpr int kLinuxSys = 31;
constexpr int kGdbSys = 12;
constexpr int kGdbPoll = 33;  // Linux SIGPOLL is SIGIO

// Real-time: Linux 32 -> 77, 33..63 -> 45..75, 64 -> 78.
int rt_to_gdb(int linux_signo) {
  if (linux_signo == 32) return 77;
  if (linux_signo >= 33 && linux_signo <= 63) return linux_signo - 33 + 45;
  if (linux_signo == 64) return 78;
  return -1;
}

}  // namespace

int host_to_gdb_signal(int linux_signo) {
  if (linux_signo == 0) return 0;
  if (linux_signo == kLinuxSys) return kGdbSys;
  for (auto [host, gdb] : kClassic)
    if (host == linux_signo) return gdb;
  int rt = rt_to_gdb(linux_signo);
  return rt >= 0 ? rt : kGdbSignalUnknown;
}

int gdb_to_host_signal(int gdb_signo) {
  if (gdb_signo == 0) return 0;
  if (gdb_signo == kGdbSys) return kLinuxSys;
  if (gdb_signo == kGdbPoll) return 29;
  if (gdb_signo == kGdbSignalUnknown) return 0;
  for (auto [host, gdb] : kClassic)
    if (gdb == gdb_signo) return host;
  if (gdb_signo == 77) return 32;
  if (gdb_signo >= 45 && gdb_signo <= 75) return gdb_signo - 45 + 33;
  if (gdb_signo == 78) return 64;
  return 0;
}

std::set<int> host_signals_listed(const std::vector<int>& gdb_signals) {
  std::set<int> listed(gdb_signals.begin(), gdb_signals.end());
  std::set<int> out;
  for (int host = 1; host <= 64; ++host)
    if (listed.count(host_to_gdb_signal(host))) out.insert(host);
  return out;
}

}  // namespace protocol
