#include "backend/ptrace/terminal.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>

namespace backend {

namespace {

pid_t first_foreground = -1;

void give_terminal_back() { (void)::tcsetpgrp(STDERR_FILENO, first_foreground); }

}  // namespace

bool terminal_handover() {
  static std::optional<bool> handover;
  if (handover) return *handover;
  handover = ::isatty(STDERR_FILENO) && ::tcgetpgrp(STDERR_FILENO) == ::getpgrp();
  if (*handover) {
    first_foreground = ::tcgetpgrp(STDERR_FILENO);
    ::signal(SIGTTOU, SIG_IGN);
    ::signal(SIGTTIN, SIG_IGN);
    std::atexit(give_terminal_back);
  }
  return *handover;
}

void terminal_child_setup(bool handover) {
  // Ignored dispositions survive exec; the server's must not reach the program.
  ::signal(SIGTTOU, SIG_DFL);
  ::signal(SIGTTIN, SIG_DFL);
  if (handover) (void)::setpgid(0, 0);
}

void hand_terminal_to(pid_t pid) {
  (void)::setpgid(pid, pid);  // fails once the child has exec'd, when its own call is done
  (void)::tcsetpgrp(STDERR_FILENO, pid);
}

}  // namespace backend
