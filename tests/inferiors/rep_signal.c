/* rep_signal.c: SIGALRMs that interrupt `rep movsb` and `rep stosb` halfway
 * (tests/integration/test_record_replay_counting.py). A 1 ms interval timer runs while the
 * program copies and fills 32 MiB with single rep instructions (milliseconds each), so most
 * signals arrive inside one, where the CPU leaves rip at the instruction and rcx at the bytes
 * left. The SA_SIGINFO handler keeps the interrupted rip and rcx of the first 6 signals.
 * Prints alarms_rcx=, alarms_in_rep= (how many were inside either instruction) and a sum of
 * the buffers, then stops at values_ready(). Exit 0. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <ucontext.h>

#define SIZE (32u << 20)
#define KEEP 6

extern char rep_movs_site[], rep_stos_site[];
volatile int alarms;
unsigned long alarm_rip[KEEP], alarm_rcx[KEEP];
int alarms_in_rep;
unsigned long buffer_sum;

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

static void on_alarm(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    ucontext_t *ctx = uc;
    if (alarms < KEEP) {
        alarm_rip[alarms] = (unsigned long)ctx->uc_mcontext.gregs[REG_RIP];
        alarm_rcx[alarms] = (unsigned long)ctx->uc_mcontext.gregs[REG_RCX];
    }
    alarms++;
}

static void copy(void *dst, const void *src, size_t n)
{
    __asm__ volatile(".globl rep_movs_site\nrep_movs_site: rep movsb"
                     : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

static void fill(void *dst, int value, size_t n)
{
    __asm__ volatile(".globl rep_stos_site\nrep_stos_site: rep stosb"
                     : "+D"(dst), "+c"(n) : "a"(value) : "memory");
}

int main(void)
{
    unsigned char *a = malloc(SIZE), *b = malloc(SIZE);
    if (!a || !b)
        return 2;
    for (unsigned i = 0; i < SIZE; i += 4096)
        a[i] = (unsigned char)(i >> 12), b[i] = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_alarm;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGALRM, &sa, 0);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, 0);
    for (int round = 0; alarms < KEEP && round < 100000; round++) {
        copy(b, a, SIZE);
        fill(a + (round & 1), round & 0xff, SIZE - 1);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, 0);
    for (int i = 0; i < KEEP; i++)
        if (alarm_rip[i] == (unsigned long)rep_movs_site || alarm_rip[i] == (unsigned long)rep_stos_site)
            alarms_in_rep++;
    for (unsigned i = 0; i < SIZE; i += 512)
        buffer_sum = buffer_sum * 31 + a[i] + 7 * b[i];
    printf("alarms_rcx=");
    for (int i = 0; i < KEEP; i++)
        printf("%s%lu", i ? "," : "", alarm_rcx[i]);
    printf("\nalarms_in_rep=%d\nbuffer_sum=%lu\n", alarms_in_rep, buffer_sum);
    fflush(stdout);
    values_ready();
    return 0;
}
