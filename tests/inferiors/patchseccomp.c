/* patchseccomp.c: a program under a seccomp filter that kills it on memfd_create, for the
 * block-patching trace source (which maps the areas it shares with the server through a
 * memfd_create run in the program, and must not try that under a filter).
 *
 * Tests rely on: main runs work(3), installs the filter (no_new_privs, then every system call
 * allowed but memfd_create, which kills the process), trace_begin(), work(200), trace_end(),
 * and prints "sum=<value> filtered=<1 when the filter went in>"; it exits 0 when the filter
 * went in, 3 when it could not be installed.
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

volatile long g;

__attribute__((noinline)) long work(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        if (i % 3)
            s += i;
        else
            s ^= i;
        g++;
    }
    return s;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static int filter_memfd_create(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof code[0], code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return 0;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
}

int main(void)
{
    long s = work(3);
    int filtered = filter_memfd_create();
    trace_begin();
    s += work(200);
    trace_end();
    printf("sum=%ld filtered=%d\n", s, filtered);
    return filtered ? 0 : 3;
}
