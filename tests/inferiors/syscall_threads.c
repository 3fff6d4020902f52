/* A thread blocks in read() while the other thread passes the same syscall instruction in libc,
 * is interrupted there by signals, and a thread is created meanwhile: what a software branch
 * tracer that ran syscalls with their int3 lifted (or from a copy elsewhere) got wrong.
 *
 * Before region_begin the worker blocks in read(go); inside the region main wakes it, it comes
 * back into read(park) and blocks there; main sends it SIGUSR1 three times (the handler checks
 * that the interrupted pc its frame holds is in libc, as without a debugger), reads three bytes
 * from a pipe of its own through the same read(), creates and joins a thread, releases the
 * worker and blocks in read() for its answer while the worker reads three bytes of its own
 * through that same syscall instruction, calls region_end (the worker is then blocked in a last read()),
 * lets the worker finish, joins it and prints what happened. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

static int go[2], park[2], own[2], wown[2], done[2], finish[2];
static volatile int worker_bytes;
static volatile int frames, frames_outside_libc;

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
    (void)sig;
    (void)si;
    ucontext_t *uc = ctx;
    Dl_info info;
    void *pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
    ++frames;
    if (!dladdr(pc, &info) || !info.dli_fname || !strstr(info.dli_fname, "libc"))
        ++frames_outside_libc;
}

static void *worker(void *arg)
{
    char c = 0;
    (void)arg;
    if (read(go[0], &c, 1) != 1) return 0;
    if (read(park[0], &c, 1) != 1) return 0;
    usleep(50000);  /* main is in read(), of done, by now: the worker passes its syscall */
    for (int i = 0; i < 3; ++i) {
        char b;
        if (read(wown[0], &b, 1) == 1) worker_bytes += b == "def"[i];
    }
    if (write(done[1], &c, 1) != 1) return 0;
    if (read(finish[0], &c, 1) != 1) return 0;  /* alive at region_end: its history can be read */
    return (void *)(long)c;
}

static void *child(void *arg) { return arg; }

void region_begin(void) { __asm__ volatile("" ::: "memory"); }
void region_end(void) { __asm__ volatile("" ::: "memory"); }

int main(void)
{
    struct sigaction sa;
    pthread_t w, t;
    void *got = 0, *child_got = 0;
    char c, bytes = 0;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (pipe(go) || pipe(park) || pipe(own) || pipe(wown) || pipe(done) || pipe(finish) || sigaction(SIGUSR1, &sa, 0)) return 1;
    if (pthread_create(&w, 0, worker, 0)) return 1;
    usleep(50000);
    region_begin();
    if (write(go[1], "g", 1) != 1) return 1;
    usleep(100000);  /* the worker is back in read(), of park */
    for (int i = 0; i < 3; ++i) {  /* one at a time: two pending SIGUSR1 would be one */
        pthread_kill(w, SIGUSR1);
        while (frames <= i) usleep(1000);
        usleep(30000);  /* back in read() */
    }
    if (write(own[1], "abc", 3) != 3) return 1;
    for (int i = 0; i < 3; ++i)
        if (read(own[0], &c, 1) == 1) bytes += c == "abc"[i];
    if (pthread_create(&t, 0, child, (void *)7L) || pthread_join(t, &child_got)) return 1;
    if (write(wown[1], "def", 3) != 3) return 1;
    if (write(park[1], "x", 1) != 1 || read(done[0], &c, 1) != 1) return 1;
    region_end();
    if (write(finish[1], &c, 1) != 1) return 1;
    pthread_join(w, &got);
    printf("frames %d, outside libc %d, own bytes %d, worker bytes %d, worker got %c, child %ld\n", frames,
           frames_outside_libc, bytes, worker_bytes, (char)(long)got, (long)child_got);
    return 0;
}
