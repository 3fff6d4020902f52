/* singlestep_pcs.c: the address of every instruction a program executes, in order.
 *
 *     singlestep_pcs OUT PROG [ARGS...]
 *
 * Runs PROG with ASLR off (as branchstub runs it, so the addresses are a debugged run's) under
 * ptrace and single-steps it from the exec stop (the loader's first instruction) to its exit:
 * OUT gets one hex pc per instruction, then "end PC" (the last one), the PCS input of
 * tests/tools/pt_tool's encoder. Single-threaded programs only. Built by
 * bench/history_client_bench.py (cc -O2) for its PT rows. */
#define _GNU_SOURCE
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s OUT PROG [ARGS...]\n", argv[0]);
        return 2;
    }
    FILE *out = fopen(argv[1], "w");
    if (!out) {
        perror(argv[1]);
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        personality(ADDR_NO_RANDOMIZE);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
            _exit(126);
        execv(argv[2], argv + 2);
        _exit(127);
    }
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
        fprintf(stderr, "singlestep_pcs: no exec stop\n");
        return 1;
    }
    ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)PTRACE_O_EXITKILL);
    unsigned long last = 0, steps = 0;
    int sig = 0;
    for (;;) {
        unsigned long pc = (unsigned long)ptrace(PTRACE_PEEKUSER, pid, (void *)offsetof(struct user_regs_struct, rip), NULL);
        if (pc != last || steps == 0) {  /* a rep string instruction traps once per iteration */
            fprintf(out, "%lx\n", pc);
            ++steps;
        }
        last = pc;
        if (ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig) != 0 || waitpid(pid, &status, 0) != pid)
            return 1;
        if (WIFEXITED(status) || WIFSIGNALED(status))
            break;
        sig = WSTOPSIG(status) == SIGTRAP ? 0 : WSTOPSIG(status);
    }
    fprintf(out, "end %lx\n", last);
    fclose(out);
    printf("SINGLESTEP steps=%lu\n", steps);
    return 0;
}
