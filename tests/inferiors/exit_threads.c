/* exit_threads.c: main starts N threads (argv[1], default 8) that sleep for ever, touches
 * M MiB of memory (argv[2], default 256; small pages), calls all_started() once all run, then
 * exits at once (_exit(0), an exit_group). The other threads die while a debugger that stopped
 * them may still be resuming them one by one, and the last of them takes a while to go (it
 * tears the memory down) while the leader is already a zombie. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_barrier_t barrier;

void all_started(void) { __asm__ volatile("" ::: "memory"); }

static void *sleeper(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    for (;;)
        sleep(1);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 8;
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
    if (mib) {
        size_t len = mib << 20;
        char *mem = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem != MAP_FAILED) {
            madvise(mem, len, MADV_NOHUGEPAGE);
            memset(mem, 1, len);
        }
    }
    pthread_barrier_init(&barrier, 0, n + 1);
    for (int i = 0; i < n; i++) {
        pthread_t t;
        pthread_create(&t, 0, sleeper, 0);
    }
    pthread_barrier_wait(&barrier);
    all_started();
    _exit(0);
}
