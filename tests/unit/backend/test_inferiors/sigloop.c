// Its SIGUSR1 handler raises SIGUSR1 again (blocked until the handler returns), so a SIGUSR1 is
// nearly always pending and about a third of attaches meet it before their own SIGSTOP (the
// kernel takes the lower signal number first). As in GDB's attach-into-signal.c.
#include <signal.h>
#include <unistd.h>
volatile unsigned long handled = 0;
static void on_usr1(int sig) {
  (void)sig;
  handled++;
  raise(SIGUSR1);
}
int main(void) {
  signal(SIGUSR1, on_usr1);
  raise(SIGUSR1);
  for (;;) pause();
}
