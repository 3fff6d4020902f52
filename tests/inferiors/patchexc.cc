/* patchexc.cc: C++ exceptions thrown and caught through several frames, for the
 * block-patching trace source (the unwinder in libgcc_s/libstdc++ runs patched code too).
 *
 * Tests rely on: main(argc, argv) runs throws(2) once to warm up, then trace_begin(),
 * throws(N) with N = argv[1] (default 6), trace_end(), prints "sum=<value>" and exits 0.
 * throws() calls level1 -> level2 -> level3 for each i; level3 throws an Oops (a class with a
 * destructor) on i % 3 != 0, caught in level1 on i % 3 == 1 (a local with a destructor in
 * level2 is destroyed during the unwinding) and rethrown from level1 to throws() on
 * i % 3 == 2 (catch (...) { throw; }).
 */
#include <cstdio>
#include <cstdlib>

volatile long g;

struct Oops {
    long v;
    explicit Oops(long x) : v(x) {}
    ~Oops() { g += 1; }
};

struct Guard {
    long v;
    explicit Guard(long x) : v(x) {}
    ~Guard() { g ^= v; }
};

__attribute__((noinline)) long level3(long i)
{
    if (i % 3 != 0)
        throw Oops(i);
    return i + 1;
}

__attribute__((noinline)) long level2(long i)
{
    Guard guard(i * 7);
    return level3(i) * 2;
}

__attribute__((noinline)) long level1(long i)
{
    try {
        return level2(i);
    } catch (const Oops &e) {
        if (i % 3 == 2)
            throw;
        return e.v + 100;
    }
}

__attribute__((noinline)) long throws(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        try {
            s += level1(i);
        } catch (...) {
            s += 1000;
        }
    }
    return s;
}

extern "C" void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
extern "C" void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 6;
    long w = throws(2);
    trace_begin();
    long s = throws(n);
    trace_end();
    std::printf("sum=%ld\n", s + w);
    return 0;
}
