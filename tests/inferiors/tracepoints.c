/* tracepoints.c: GDB tracepoints (issue 31).
 * tracepoints [N [THREADS]]: each of THREADS extra threads and the main thread call
 * sample(i, tag) for i = 0..N-1 (default 10); sample() keeps a running sum in `total`, the
 * last value in `history[i % 8]`, and a string in `label`. Then done() and exit 0. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

volatile long total = 0;
long history[8];
char label[32] = "start";
long hits_seen = 0;
static long loops = 10;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

long sample(long i, long tag)
{
    __atomic_fetch_add(&hits_seen, 1, __ATOMIC_RELAXED); /* LINE:fast */
    long square = i * i; /* LINE:sample */
    pthread_mutex_lock(&lock);
    total += square + tag;
    history[i % 8] = square;
    snprintf(label, sizeof label, "sample-%ld", i);
    pthread_mutex_unlock(&lock);
    return square; /* LINE:return */
}

void done(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg)
{
    long tag = (long)arg;
    for (long i = 0; i < loops; i++)
        sample(i, tag); /* LINE:call */
    return NULL;
}

int main(int argc, char **argv)
{
    loops = argc > 1 ? atol(argv[1]) : 10;
    int n = argc > 2 ? atoi(argv[2]) : 0;
    if (n > 16) n = 16;
    pthread_t th[16];
    for (int k = 0; k < n; k++)
        pthread_create(&th[k], NULL, worker, (void *)(long)(1000 * (k + 1)));
    worker((void *)0L);
    for (int k = 0; k < n; k++)
        pthread_join(th[k], NULL);
    done(); /* LINE:done */
    printf("total %ld\n", total);
    return 0;
}
