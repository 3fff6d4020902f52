/* patchsigflood.c: signals pending whenever the recorded thread resumes, for the trace sources.
 *
 * A second thread sends SIGWINCH (ignored by default; GDB passes it silently) to the main thread
 * as fast as it can while the main thread runs 32 distinct system-call sites whose number comes
 * from a register (so no trace source can know it: each site is an int3 the engine steps over),
 * each a few times, between trace_begin() and trace_end(). A signal is then often pending just
 * when the server resumes the thread over an instruction it lifted its int3 from.
 *
 * Tests rely on: trace_begin(), the sites, trace_end(); `calls` counts the sites' returns
 * (32 * ROUNDS = 128 when all ran); main prints "calls=<n>" and exits 0.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ROUNDS 4

volatile int calls;
static volatile int done;
static pid_t main_tid;

#define SITE(n)                                                                          \
    __attribute__((noinline)) static long site##n(long nr)                               \
    {                                                                                    \
        long r;                                                                          \
        __asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");        \
        calls++;                                                                         \
        return r;                                                                        \
    }
#define SITES8(a) SITE(a##0) SITE(a##1) SITE(a##2) SITE(a##3) SITE(a##4) SITE(a##5) SITE(a##6) SITE(a##7)
SITES8(1)
SITES8(2)
SITES8(3)
SITES8(4)
#define CALL8(a, nr)                                                                     \
    site##a##0(nr); site##a##1(nr); site##a##2(nr); site##a##3(nr);                      \
    site##a##4(nr); site##a##5(nr); site##a##6(nr); site##a##7(nr)

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static void *flood(void *arg)
{
    (void)arg;
    while (!done)
        syscall(SYS_tgkill, getpid(), main_tid, SIGWINCH);
    return NULL;
}

int main(void)
{
    pthread_t t;
    main_tid = (pid_t)syscall(SYS_gettid);
    trace_begin();
    pthread_create(&t, NULL, flood, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        long nr = SYS_getppid;
        CALL8(1, nr);
        CALL8(2, nr);
        CALL8(3, nr);
        CALL8(4, nr);
    }
    done = 1;
    pthread_join(t, NULL);
    trace_end();
    printf("calls=%d\n", calls);
    return 0;
}
