/* patchsyscalls.c: system calls among many branches, for the block-patching source's drains
 * under `catch syscall` (the server resumes most such stops at once, their drains left for
 * later).
 *
 * Tests rely on: main(argc, argv) calls trace_begin(), then argv[1] rounds (default 100), each
 * ten calls of a function with a conditional branch, a getppid() system call every 8th round,
 * then trace_end(); prints "rounds=<N> sum=<value>" and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

__attribute__((noinline)) static long step(long i)
{
    __asm__ volatile("" ::: "memory");
    return (i & 3) ? i * 3 : i + 7;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100, sum = 0;
    trace_begin();
    for (long r = 0; r < n; r++) {
        for (int k = 0; k < 10; k++) sum += step(r + k);
        if ((r & 7) == 0) sum += getppid() != 0;
    }
    trace_end();
    printf("rounds=%ld sum=%ld\n", n, sum);
    return 0;
}
