/* leader_exit.c: main starts a thread and leaves with pthread_exit (the leader stays a zombie
 * while the thread lives); the thread waits until the kernel shows the leader as exited, calls
 * after_leader_exit() (tests break there) and exits the process with status 5. With the
 * argument "resume-only-main", the thread calls thread_ready() first, then waits for the
 * leader's exit: a client that resumes only main sees every resumed thread exit. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void thread_ready(void) { __asm__ volatile("" ::: "memory"); }
void after_leader_exit(void) { __asm__ volatile("" ::: "memory"); }

static int leader_exited(void)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && (p[2] == 'Z' || p[2] == 'X');
}

static void *worker(void *arg)
{
    (void)arg;
    thread_ready();
    while (!leader_exited()) usleep(1000);   /* polls an observable condition */
    after_leader_exit();
    exit(5);
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_exit(NULL);
}
