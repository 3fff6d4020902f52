// Known control flow for the branch-engine tests: calls, a function-pointer call, a switch,
// loops, a raw syscall and (with an argument) a signal handler, between two marker functions.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
volatile int sink;
__attribute__((noinline)) void region_begin(void) { sink++; }
__attribute__((noinline)) void region_end(void) { sink++; }
__attribute__((noinline)) void hit_me(int i) { sink += i; }
static int add(int a) { return a + 1; }
static int sub(int a) { return a - 1; }
static int (*ops[2])(int) = {add, sub};
static void on_usr1(int s) { sink += s; }
__attribute__((noinline)) int work(int n, int with_signal) {
  int acc = 0;
  for (int i = 0; i < n; i++) {
    acc = ops[i & 1](acc);
    switch (i % 6) {
      case 0: acc += 3; break;
      case 1: acc ^= 7; break;
      case 2: acc -= 2; break;
      case 3: acc *= 3; break;
      case 4: acc |= 5; break;
      default: acc = acc / 2; break;
    }
    if (i % 7 == 3) hit_me(i);
    if (i == 10) syscall(SYS_getpid);
    if (i == 15 && with_signal) raise(SIGUSR1);
  }
  return acc;
}
int main(int argc, char** argv) {
  (void)argv;
  signal(SIGUSR1, on_usr1);
  region_begin();
  sink = work(40, argc > 1);
  region_end();
  return 0;
}
