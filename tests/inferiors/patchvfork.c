/* patchvfork.c: vfork children inside the traced region, for the block-patching trace source
 * (a vfork child runs in its parent's memory until it exits or execs).
 *
 * Tests rely on: main runs work(3), trace_begin(), work(50), a vfork() whose child runs
 * work(7) and _exit(3)s, work(50), posix_spawn("/bin/true") (a clone with CLONE_VM|CLONE_VFORK
 * in libc), work(50), trace_end(). children_ok counts the children that exited as expected
 * (2 when both did); main prints "sum=<value> children_ok=<n>" and exits 0.
 */
#include <spawn.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
volatile long g;
volatile int children_ok;

__attribute__((noinline)) long work(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (i & 1)
            s += i;
        else
            s ^= i;
        g++;
    }
    return s;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(void)
{
    int st = 0;
    long s = work(3);
    trace_begin();
    s += work(50);
    pid_t p = vfork();
    if (p == 0) {
        work(7);
        _exit(3);
    }
    if (waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 3)
        children_ok++;
    s += work(50);
    char *av[] = {"/bin/true", NULL};
    if (posix_spawn(&p, "/bin/true", NULL, NULL, av, environ) == 0 && waitpid(p, &st, 0) == p &&
        WIFEXITED(st) && WEXITSTATUS(st) == 0)
        children_ok++;
    s += work(50);
    trace_end();
    printf("sum=%ld children_ok=%d\n", s, children_ok);
    return 0;
}
