// Sends itself SIGUSR1 twice; exits with the number of handled signals.
#include <signal.h>
#include <unistd.h>
static volatile int handled = 0;
static void on_usr1(int s) { (void)s; handled++; }
int main(void) {
  signal(SIGUSR1, on_usr1);
  kill(getpid(), SIGUSR1);
  kill(getpid(), SIGUSR1);
  return handled;
}
