/* fast_timer.c: work that makes no system call, under an interval timer faster than a
 * recording can take its signals (tests/integration/test_record_replay_signals.py). Natively each
 * SIGALRM costs the program a microsecond or two; recorded, each is several ptrace stops, and
 * once that is longer than the period the next signal is already pending when the handler
 * returns: without the recorder holding signals back the work never advances.
 *   fast_timer [ITERATIONS [PERIOD_US]]   (defaults 20000000 and 50)
 * Prints hash= (the work's result, the same with any number of signals) and ticks= (the signals
 * the handler saw), then stops at values_ready(). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

volatile unsigned long ticks;
unsigned long hash;

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

static void on_tick(int sig)
{
    (void)sig;
    ticks++;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    long period = argc > 2 ? atol(argv[2]) : 50;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval it = {{0, period}, {0, period}};
    setitimer(ITIMER_REAL, &it, 0);
    unsigned long h = 1469598103934665603ul;
    for (long i = 0; i < n; i++) {
        h = (h ^ (unsigned long)(i & 0xff)) * 1099511628211ul;
        if (h & 0x100)
            h += 7;
    }
    /* Blocked first: a signal the recorder holds back may come after the timer is off, and
     * the count printed must be the one at values_ready(). */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alrm, 0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    hash = h;
    printf("hash=%lu\nticks=%lu\n", h, ticks);
    fflush(stdout);
    values_ready();
    return 0;
}
