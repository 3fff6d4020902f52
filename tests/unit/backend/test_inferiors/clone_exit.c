/* clone_exit.c: main starts two threads one after the other; each calls in_thread() and
 * returns. main joins each one and then waits until its task is gone from /proc/self/task
 * (under a tracer: until the tracer reaped its exit), so every thread's exit is seen before
 * the process's; exits 3. For QThreadOptions' clone and exit events. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static volatile pid_t tid;

void in_thread(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg)
{
    (void)arg;
    tid = gettid();
    in_thread();
    return 0;
}

static void wait_task_gone(pid_t t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)t);
    for (int i = 0; i < 10000 && access(path, F_OK) == 0; i++) usleep(1000);  /* 10 s at most */
}

int main(void)
{
    for (int i = 0; i < 2; i++) {
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        pthread_join(t, NULL);
        wait_task_gone(tid);
    }
    return 3;
}
