/* execer.c: execs the program named by argv[1] with the remaining arguments (argv[1] as its
 * argv[0]); with no argument it exits 3. Optionally execs from a second thread first
 * ("--from-thread PROG ARGS..."), so the exec comes from a thread that is not the leader. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char **target;

void before_exec(void) { __asm__ volatile("" ::: "memory"); }

static void *exec_from_thread(void *arg)
{
    (void)arg;
    before_exec();
    execv(target[0], target);
    perror("execv");
    _exit(127);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 3;
    if (strcmp(argv[1], "--from-thread") == 0) {
        if (argc < 3) return 3;
        target = argv + 2;
        pthread_t t;
        pthread_create(&t, NULL, exec_from_thread, NULL);
        for (;;) pause();
    }
    target = argv + 1;
    before_exec();
    execv(target[0], target);
    perror("execv");
    return 127;
}
