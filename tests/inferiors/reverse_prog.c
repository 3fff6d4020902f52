/* Reverse execution on a replay (tests/integration/test_reverse.py): a global written in a
 * loop (watch it, then reverse-continue to the write before), a time() whose recorded value
 * the replay shows (reverse-step over it), a function to step back into, and a buffer that
 * only a read() writes (a watchpoint on it goes back into the system call). */
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int counter;
long recorded_time;
char name[16];
struct big {
  long v[50];
} big_a = {{1}}, big_b;  /* copied with rep movsq */

__attribute__((noinline)) int bump(int by) {
  counter += by; /* LINE:bump-line */
  return counter;
}

int main(void) {
  int fd = open("/proc/self/comm", O_RDONLY);
  if (fd >= 0) {
    (void)!read(fd, name, sizeof name - 1); /* LINE:read-line */
    close(fd);
  }
  big_b = big_a; /* LINE:copy-line */
  recorded_time = (long)time(NULL); /* LINE:time-line */
  for (int i = 0; i < 5; i++)
    bump(i + 1); /* LINE:loop-line */
  printf("counter=%d time=%ld pid=%d\n", counter, recorded_time, (int)getpid()); /* LINE:print-line */
  return 0; /* LINE:end-line */
}
