/* branches_threads.c: 4 threads each run the branches region (branches.h).
 *
 * Tests rely on: main warms up region(), creates 4 threads running worker(); they all wait
 * on a barrier with main; main calls threads_ready() while all 4 wait (then releases them);
 * each worker calls trace_begin(), region(), trace_end() once. Joins, exits 0.
 */
#include <pthread.h>
#include "branches.h"

#define NT 4
static pthread_barrier_t barrier;

void threads_ready(void) { __asm__ volatile("" ::: "memory"); }

void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    trace_begin();
    sink = region();
    trace_end();
    return 0;
}

int main(void)
{
    pthread_t t[NT];
    sink = region();
    pthread_barrier_init(&barrier, 0, NT + 1);
    for (int i = 0; i < NT; i++)
        pthread_create(&t[i], 0, worker, 0);
    threads_ready();
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < NT; i++)
        pthread_join(t[i], 0);
    return 0;
}
