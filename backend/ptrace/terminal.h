// The server's terminal (its stderr) handed to each program it launches, as gdbserver does:
// the program runs in a process group of its own, made the terminal's foreground group. A ^C
// typed there is then the program's, and a program launched earlier, now in the background,
// is stopped by SIGTTOU or SIGTTIN when it uses the terminal (two inferiors of one session).
// Only when the server owns that terminal at its first launch (its process group is the
// foreground one); otherwise programs stay in the server's group, as before.
#pragma once

#include <sys/types.h>

namespace backend {

// Decided once, before the first fork: whether launched programs get the terminal. When they
// do, the server ignores SIGTTOU and SIGTTIN from then on (it writes to a terminal it no
// longer owns) and gives the terminal back to its first owner when it exits.
bool terminal_handover();

// Child side, between fork and exec (async-signal-safe): SIGTTOU and SIGTTIN as the program
// expects them, and a process group of its own when `handover`.
void terminal_child_setup(bool handover);

// Parent side, after fork: the child's group (set on both sides, whichever runs first) becomes
// the terminal's foreground group.
void hand_terminal_to(pid_t pid);

}  // namespace backend
