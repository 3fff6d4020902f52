/* bploop.c: calls hit(i) N times (argv[1], default 20000); `hits` ends at N; then calls
 * loop_done() once and exits 0. */
#include <stdlib.h>

volatile long hits = 0;

void hit(long i) { (void)i; hits++; }

void loop_done(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    for (long i = 0; i < n; i++)
        hit(i);
    loop_done();
    return 0;
}
