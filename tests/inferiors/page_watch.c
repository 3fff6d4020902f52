/* Emulated watchpoints by page protection in a replay (tests/integration/test_page_watch.py):
 * a watched global shares its page with a neighbour written often (faults that are no hit),
 * is written by plain stores and by memset (a rep string store over the page), and read; the
 * kernel writes the same page in calls the replay runs for real (pipe's descriptors,
 * rt_sigaction's old action), and the program changes the page's protection itself. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct page {
  long neighbour;       /* written in loops: every write faults, none is a hit */
  long watched;
  int fds[2];           /* pipe() writes them */
  struct sigaction old; /* rt_sigaction's old action */
  char fill[3000];      /* memset over it: rep stosb, one fault, many steps, no hit */
} __attribute__((aligned(4096))) pg;
long sink;

__attribute__((noinline)) void set_watched(long v) {
  pg.watched = v; /* LINE:set-line */
}

int main(void) {
  set_watched(1);
  if (pipe(pg.fds) == 0) {
    close(pg.fds[0]);
    close(pg.fds[1]);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_IGN;
  sigaction(SIGUSR1, &sa, &pg.old);
  mprotect(&pg, 4096, PROT_READ | PROT_WRITE);
  set_watched(2);
  for (long i = 0; i < 20000; i++) pg.neighbour += i;
  set_watched(3);
  for (long i = 0; i < 1000; i++) pg.neighbour -= i;
  memset(pg.fill, 7, sizeof pg.fill);
  memset(&pg.watched, 0, sizeof pg.watched); /* LINE:zero-line */
  set_watched(4);
  sink = pg.watched; /* LINE:read-line */
  printf("watched=%ld neighbour=%ld fds=%d\n", pg.watched, pg.neighbour, pg.fds[0]); /* LINE:print-line */
  return 0; /* LINE:end-line */
}
