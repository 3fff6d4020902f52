/* patchopt.c: optimised code (built with -O2, see CFLAGS below) for the block-patching trace
 * source. CFLAGS: -O2
 *
 * Tests rely on: main(argc, argv) runs mix(3) once to warm up (binds the PLT entries), then
 * trace_begin(), mix(N) with N = argv[1] (default 40), trace_end(), prints "sum=<value>" and
 * exits 0. mix() runs, each iteration:
 *   - dispatch(i): a dense switch of 12 cases with different bodies, an indirect jmp through
 *     a jump table at -O2;
 *   - chain(i): sibling calls (tail_a ends in `jmp tail_b`, tail_b in `jmp leaf`);
 *   - libc through the PLT: getppid(), strtol(), memchr() of short strings;
 *   - escape(i): setjmp, then longjmp from three frames down on odd i.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile long g;
volatile long seed = 7;
static jmp_buf env;

#define NOINL __attribute__((noinline))

NOINL long dispatch(long v)
{
    switch (v % 12) {
    case 0: g += 1; return v * 3;
    case 1: g ^= v; return v + 17;
    case 2: g -= 2; return v << 2;
    case 3: g += v; return v - 9;
    case 4: g *= 3; return v | 5;
    case 5: g &= 0xfff; return v ^ 0x55;
    case 6: g += 6; return v / 3;
    case 7: g -= v; return v * v;
    case 8: g |= 8; return v + g;
    case 9: g ^= 99; return v - g;
    case 10: g += 10; return v * 7;
    default: g -= 11; return v >> 1;
    }
}

NOINL long leaf(long x) { g += x; return x * 5 + g; }
NOINL long tail_b(long x) { g ^= x; return leaf(x + 2); }
NOINL long tail_a(long x) { g += 1; return tail_b(x * 3); }
NOINL long chain(long x) { return (x & 1) ? tail_a(x) : tail_b(x); }

NOINL void deep3(long x) { g += x; if (x & 1) longjmp(env, (int)(x & 0xff) + 1); }
NOINL void deep2(long x) { deep3(x + seed); g ^= 1; }
NOINL void deep1(long x) { deep2(x * 2 + seed); g ^= 2; }

NOINL long escape(long x)
{
    int r = setjmp(env);
    if (r)
        return r;
    deep1(x);
    return -1;
}

NOINL long mix(long n)
{
    static const char *nums[4] = {"12", "-7", "0x1f", "400"};
    long s = 0;
    for (long i = 0; i < n; i++) {
        s += dispatch(i * seed);
        s += chain(i);
        s += getppid() > 0;
        s += strtol(nums[i & 3], NULL, 0);
        s += memchr("abcdefgh", 'a' + (int)(i & 7), 8) != NULL;
        s += escape(i);
    }
    return s;
}

NOINL void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
NOINL void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 40;
    long w = mix(3);
    trace_begin();
    long s = mix(n);
    trace_end();
    printf("sum=%ld\n", s + w);
    return 0;
}
