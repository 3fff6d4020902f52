/* watchloop.c: writes the global `target` (1, 2, ... N) once every ~50 instructions, for the
 * watchpoint benchmark (bench/bench.py). N = argv[1] (default 1000); exits 0. */
#include <stdlib.h>

volatile long target = 0;
volatile long work = 0;

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 1; i <= n; i++) {
        for (int j = 0; j < 6; j++)
            work += j;
        target = i;
    }
    return 0;
}
