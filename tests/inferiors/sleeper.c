/* sleeper.c: runs forever, for attach / detach / interrupt tests.
 *
 * Tests rely on:
 *   - prints "pid <PID>\n" on stdout (flushed) at start;
 *   - loops forever: loop_counter++, calls tick(loop_counter), writes loop_counter (decimal)
 *     to the heartbeat file given as argv[1] (if any, rewritten each round), sleeps 10 ms;
 *   - so a heartbeat file that keeps changing proves the process still runs;
 *   - never_touched is a global nothing reads or writes (a watchpoint there never fires).
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile long loop_counter = 0;
volatile long never_touched = 0;

void tick(long n)
{
    (void)n;                    /* LINE:tick */
}

static void heartbeat(const char *path, long n)
{
    char buf[32];
    int len = snprintf(buf, sizeof buf, "%ld\n", n);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (write(fd, buf, len) < 0) { /* ignored */ }
        close(fd);
    }
}

int main(int argc, char **argv)
{
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    struct timespec ts = {0, 10 * 1000 * 1000};
    for (;;) {
        loop_counter++;         /* LINE:loop */
        tick(loop_counter);
        if (argc > 1)
            heartbeat(argv[1], loop_counter);
        nanosleep(&ts, 0);
    }
}
