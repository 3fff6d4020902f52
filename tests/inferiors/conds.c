/* conds.c: target-side breakpoint conditions and dprintf (issue 17).
 * conds [N [THREADS]]: each of THREADS threads (default 0: the main thread alone) calls
 * visit(i, tag) for i = 0..N-1 (default 20); `probe` points at unreadable memory (address 8)
 * until the main thread sets it to &total after its loop; then done() and exit 0. */
#include <pthread.h>
#include <stdlib.h>

volatile long total = 0;
long *volatile probe = (long *)8;

void visit(long i, long tag)
{
    total += i + tag; /* LINE:visit */
}

void done(void) { __asm__ volatile("" ::: "memory"); }

static long loops = 20;

static void *worker(void *arg)
{
    long tag = (long)arg;
    for (long i = 0; i < loops; i++)
        visit(i, tag); /* LINE:call */
    return NULL;
}

int main(int argc, char **argv)
{
    loops = argc > 1 ? atol(argv[1]) : 20;
    int n = argc > 2 ? atoi(argv[2]) : 0;
    if (n > 16) n = 16;
    pthread_t th[16];
    for (int k = 0; k < n; k++)
        pthread_create(&th[k], NULL, worker, (void *)(long)(100 * (k + 1)));
    worker((void *)0L);
    for (int k = 0; k < n; k++)
        pthread_join(th[k], NULL);
    probe = (long *)&total;
    done();
    return 0;
}
