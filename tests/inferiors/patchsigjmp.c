/* patchsigjmp.c: a signal handler that leaves through siglongjmp (no sigreturn), inside the
 * traced region, for the block-patching trace source.
 *
 * Tests rely on: main installs on_usr1 for SIGUSR1, runs work(4) (warm-up), trace_begin(),
 * work(N) with N = argv[1] (default 12), trace_end(), prints "sum=<value>" and exits 0.
 * work(n) runs deep(i) under sigsetjmp for i < n; deep raises SIGUSR1 when i % 3 == 0 and the
 * handler siglongjmps back into work (which then adds 100 instead of 1).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
static sigjmp_buf jb;
volatile long g;
static void on_usr1(int sig) { (void)sig; g += 5; siglongjmp(jb, 2); }
__attribute__((noinline)) void deep(long i) { g += i; if (i % 3 == 0) raise(SIGUSR1); g ^= 1; }
__attribute__((noinline)) long work(long n) {
  long s = 0;
  for (long i = 0; i < n; i++) {
    if (sigsetjmp(jb, 1) == 0) { deep(i); s += 1; } else s += 100;
  }
  return s;
}
__attribute__((noinline)) void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void trace_end(void) { __asm__ volatile("" ::: "memory"); }
int main(int argc, char **argv) {
  signal(SIGUSR1, on_usr1);
  long s = work(4);
  trace_begin();
  s += work(argc > 1 ? atol(argv[1]) : 12);
  trace_end();
  printf("sum=%ld\n", s);
  return 0;
}
