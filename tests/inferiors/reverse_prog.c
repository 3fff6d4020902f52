/* Reverse execution on a replay (tests/integration/test_reverse.py): a global written in a
 * loop (watch it, then reverse-continue to the write before), a time() whose recorded value
 * the replay shows (reverse-step over it), and a function to step back into. */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int counter;
long recorded_time;

__attribute__((noinline)) int bump(int by) {
  counter += by; /* bump-line */
  return counter;
}

int main(void) {
  recorded_time = (long)time(NULL); /* time-line */
  for (int i = 0; i < 5; i++)
    bump(i + 1); /* loop-line */
  printf("counter=%d time=%ld pid=%d\n", counter, recorded_time, (int)getpid()); /* print-line */
  return 0; /* end-line */
}
