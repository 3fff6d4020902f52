/* patchsigsyscall.c: signal handlers interrupting a blocked read() inside the traced region,
 * for the trace sources (under the block-patching source the read's syscall runs in place).
 *
 * Tests rely on: trace_begin(), then twice (first without SA_RESTART: read fails with EINTR
 * and is called again; then with SA_RESTART: the kernel restarts it): a one-shot 20 ms timer,
 * a read() of an empty pipe that blocks until SIGALRM's handler on_alarm writes one byte into
 * it; then trace_end(). `got` counts the bytes read (2), `eintr` the EINTR failures (1); main
 * prints "got=<n> eintr=<n>" and exits 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int fds[2];
volatile int got, eintr;

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static void on_alarm(int sig)
{
    (void)sig;
    char c = 'x';
    (void)!write(fds[1], &c, 1);
}

static void wait_for_byte(int restart)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval t = {{0, 0}, {0, 20000}};
    setitimer(ITIMER_REAL, &t, NULL);
    char c;
    for (;;) {
        ssize_t n = read(fds[0], &c, 1);
        if (n == 1) {
            got++;
            return;
        }
        if (n < 0 && errno == EINTR)
            eintr++;
    }
}

int main(void)
{
    if (pipe(fds) != 0)
        return 1;
    trace_begin();
    wait_for_byte(0);
    wait_for_byte(1);
    trace_end();
    printf("got=%d eintr=%d\n", got, eintr);
    return 0;
}
