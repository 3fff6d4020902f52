/* singlestep_rate.c: the ceiling for a server that traces by single-stepping inside itself.
 *
 *     singlestep_rate PROG [ARGS...]
 *
 * Forks PROG under ptrace (PTRACE_TRACEME + exec), then PTRACE_SINGLESTEPs it from the
 * exec stop to its exit, one waitpid per step and nothing else: no register reads, no
 * decoding, no bookkeeping. Prints
 *
 *     SINGLESTEP steps=N seconds=S steps_per_s=R exit=E
 *
 * A server that records by single-stepping does at least this much work per instruction,
 * so R is an upper bound on its traced instructions per second on this machine.
 * Built by bench/bench.py (cc -O2) when the btrace row runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s PROG [ARGS...]\n", argv[0]);
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
        fprintf(stderr, "singlestep_rate: no exec stop\n");
        return 1;
    }
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    unsigned long long steps = 0;
    int sig = 0;
    double t0 = now();
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) != 0) {
            perror("PTRACE_SINGLESTEP");
            return 1;
        }
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 1;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
        steps++;
        sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);
    }
    double secs = now() - t0;
    printf("SINGLESTEP steps=%llu seconds=%.6f steps_per_s=%.0f exit=%d\n", steps, secs,
           steps / secs, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}
