/* patchmaps.c: mapping calls in a recorded region, for the block-patching source's handling of
 * mmap/munmap/mprotect while its patches are in (tests/integration/test_btrace_patch.py).
 *
 *   patchmaps MODE [N]   MODE "data": N rounds of anonymous and file mappings, mprotect and
 *                        munmap of them and a MAP_FIXED over one of its own (no code changes);
 *                        MODE "code": the same, and each round also dlopens libm, calls cos()
 *                        through it and dlcloses it (a mapping with PROT_EXEC comes and goes).
 * Calls trace_begin() before the rounds and trace_end() after, then prints "sum=<value>". */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

__attribute__((noinline)) void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static long round_of(int i, int code, int fd)
{
    long sum = 0;
    size_t len = 3 * 4096;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) exit(2);
    for (size_t k = 0; k < len; k += 512) p[k] = (char)(i + k);
    /* A fixed mapping over its own middle page, then read-only, then gone. */
    char *q = mmap(p + 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (q == MAP_FAILED) exit(3);
    q[7] = 5;
    mprotect(p, len, PROT_READ);
    for (size_t k = 0; k < len; k += 512) sum += p[k];
    munmap(p, len);
    const unsigned char *f = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f == MAP_FAILED) exit(4);
    for (int k = 0; k < 64; k++) sum += f[k] & (k % 3 ? 1 : 2);
    munmap((void *)f, 4096);
    if (code) {
        void *m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
        if (!m) exit(5);
        double (*c)(double) = (double (*)(double))dlsym(m, "cos");
        sum += (long)(c((double)i) * 1000);
        dlclose(m);
    }
    return sum;
}

int main(int argc, char **argv)
{
    int code = argc > 1 && strcmp(argv[1], "code") == 0;
    int n = argc > 2 ? atoi(argv[2]) : 5;
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0) return 1;
    long sum = round_of(0, code, fd);  /* warm: the calls' code explored before the region */
    trace_begin();
    for (int i = 1; i <= n; i++) sum += round_of(i, code, fd);
    trace_end();
    printf("sum=%ld\n", sum);
    return 0;
}
