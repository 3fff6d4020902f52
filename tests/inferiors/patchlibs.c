/* patchlibs.c: a region that runs mostly in libc, for the block-patching trace source's
 * shared-library patching.
 *
 * Tests rely on: main(argc, argv) warms up (work(2)), calls trace_begin(), work(N) with
 * N = argv[1] (default 50), trace_end(), then prints "sum=<value>" and exits 0. work() calls
 * snprintf, strlen, strtol, memcpy/memcmp, qsort with a callback in the program (libc calling
 * back into the main executable) and getpid (a system call in libc) each iteration.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int by_value(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

long work(long n)
{
    long sum = 0, v[12];
    char buf[64], copy[64];
    for (long i = 0; i < n; i++) {
        int len = snprintf(buf, sizeof buf, "%ld:%lx:%s", i * 7919, i, i & 1 ? "odd" : "even");
        sum += (long)strlen(buf) + len;
        sum += strtol(buf, NULL, 10);
        memcpy(copy, buf, sizeof buf);
        sum += memcmp(copy, buf, (size_t)len) == 0;
        for (int k = 0; k < 12; k++) v[k] = (i * 31 + k * 17) % 23;
        qsort(v, 12, sizeof v[0], by_value);
        sum += v[0] + v[11];
        sum += getpid() > 0;
    }
    return sum;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 50;
    long sum = work(2);
    trace_begin();
    sum += work(n);
    trace_end();
    printf("sum=%ld\n", sum);
    return 0;
}
