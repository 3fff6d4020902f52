// Forks a child that calls marker() (a breakpoint there must not kill it); exits 3 if the child exited 0.
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) void marker(void) { __asm__ volatile(""); }
int main(void) {
  pid_t c = fork();
  if (c == 0) { marker(); _exit(0); }
  int st = 0;
  waitpid(c, &st, 0);
  marker();
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 3 : 4;
}
