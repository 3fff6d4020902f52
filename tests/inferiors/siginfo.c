/* siginfo.c: a SIGSEGV (a write to an unmapped page) caught by an SA_SIGINFO handler, which
 * copies what the kernel (or a debugger, through PTRACE_SETSIGINFO) handed it into seen_*
 * and calls handled(). Exit code 0 after the handler.
 * With the argument "io": raises SIGIO first, whose default action terminates the program;
 * with "io-ignored": raises SIGIO with SIGIO ignored, then exits with code 3.
 *
 * Tests rely on: handled() (called once the seen_* are set), seen_signo, seen_errno,
 * seen_code, seen_addr, the LINE:fault marker.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

volatile int seen_signo, seen_errno, seen_code;
void *volatile seen_addr;
static void *volatile page;

void handled(void)
{
    __asm__ volatile("" ::: "memory");
}

static void on_segv(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)context;
    seen_signo = info->si_signo;
    seen_errno = info->si_errno;
    seen_code = info->si_code;
    seen_addr = info->si_addr;
    handled();
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "io-ignored") == 0) {
        signal(SIGIO, SIG_IGN);
        raise(SIGIO);
        return 3;
    }
    if (argc > 1 && strcmp(argv[1], "io") == 0)
        raise(SIGIO);
    page = mmap(0, (size_t)sysconf(_SC_PAGESIZE), PROT_NONE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (page == MAP_FAILED)
        return 1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSEGV, &action, 0) != 0)
        return 1;
    *(volatile int *)page = 0;  /* LINE:fault */
    return 2;
}
