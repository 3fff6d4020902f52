/* patchloop.c: hot code in the main program for the block-patching trace source.
 *
 * Tests rely on: main(argc, argv) warms up (work(3)), calls trace_begin(), work(N) with
 * N = argv[1] (default 200), trace_end(), then prints "sum=<value>" and exits 0. With argv[2]
 * = "alarm", SIGALRM fires every millisecond (setitimer) while work runs and its handler
 * counts ticks (the sum does not depend on it); with argv[2] = "fork", work forks once in the
 * middle, the child runs work(5) and exits 0, the parent waits for it (a child that does not
 * exit 0 adds 1000000 to the sum).
 * work() has short and long conditional jumps, a loop instruction, direct calls, calls
 * through a function pointer table, a switch compiled to a jump table, recursion (returns)
 * and a block where a short jcc directly follows a RIP-relative load (the displaced code
 * must be relocated).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

volatile long counter;
volatile int ticks;
static long table[16] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};

static long inc(long x) { return x + 1; }
static long twice(long x) { return x * 2; }
long (*volatile fns[2])(long) = {inc, twice};

long pick(long v)
{
    switch (v & 7) {
    case 0: return 11;
    case 1: return 23;
    case 2: return 35;
    case 3: return 47;
    case 4: return 59;
    case 5: return 61;
    case 6: return 73;
    default: return 85;
    }
}

long depth(long n) { return n <= 0 ? 0 : 1 + depth(n - 1); }

static long looped(long n)
{
    long r = 0;
    /* `loop` decrements rcx and jumps while it is not zero */
    __asm__ volatile("mov %1, %%rcx\n1:\n add $2, %0\n loop 1b\n" : "+r"(r) : "r"(n) : "rcx", "cc");
    return r;
}

long work(long n, int do_fork)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (table[i & 15] > 4)       /* RIP-relative load then a short jcc */
            s += fns[i & 1](i);
        else
            s -= pick(i);
        if (i % 3 == 0)
            s ^= depth(i & 7);
        s += looped((i & 3) + 1);
        counter++;                  /* LINE:counter */
        if (do_fork && i == n / 2) {
            pid_t p = fork();
            if (p == 0) {
                work(5, 0);
                _exit(0);
            }
            int st = 0;
            waitpid(p, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                s += 1000000;       /* the child ran into trouble: the sum says so */
        }
    }
    return s;
}

static void on_alarm(int sig) { (void)sig; ticks++; }

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200;
    const char *mode = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "alarm") == 0) {
        struct itimerval it = {{0, 1000}, {0, 1000}};
        signal(SIGALRM, on_alarm);
        setitimer(ITIMER_REAL, &it, NULL);
    }
    work(3, 0);
    trace_begin();
    long s = work(n, strcmp(mode, "fork") == 0);
    trace_end();
    if (strcmp(mode, "alarm") == 0) {
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
    }
    printf("sum=%ld\n", s);
    return 0;
}
