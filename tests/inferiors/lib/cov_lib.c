/* cov_lib.c: the shared library of coverage_lib.c. Deterministic branches: a loop, a switch,
 * a call through a pointer, a recursive call. */
static int odd(int v) { return v * 3 + 1; }
static int even(int v) { return v / 2; }
static int (*const step[2])(int) = {even, odd};

int lib_depth(int n) { return n <= 0 ? 0 : 1 + lib_depth(n - 1); }

int lib_collatz(int v)
{
    int steps = 0;
    while (v != 1 && steps < 1000) {
        v = step[v & 1](v);
        steps++;
    }
    switch (steps % 4) {
    case 0: return steps + lib_depth(3);
    case 1: return steps * 2;
    case 2: return steps - 1;
    default: return steps;
    }
}
