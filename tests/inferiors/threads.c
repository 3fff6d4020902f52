/* threads.c: 8 threads.
 *
 * Tests rely on:
 *   - main creates 8 threads running worker(void *arg) (arg = 0..7);
 *   - every worker waits on a barrier until all 8 exist, then calls thread_hit(id) once
 *     (8 hits in all), then waits on a second barrier;
 *   - main calls all_running() while all 8 workers are alive (9 threads in `info threads`),
 *     then releases them, joins them and exits 0; `hits` ends at 8.
 */
#include <pthread.h>

#define NTHREADS 8
static pthread_barrier_t start_barrier, end_barrier;
volatile int hits = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void thread_hit(int id)
{
    pthread_mutex_lock(&lock);
    hits++;                     /* LINE:thread-hit */
    pthread_mutex_unlock(&lock);
    (void)id;
}

void all_running(void)
{
    __asm__ volatile("" ::: "memory");
}

void *worker(void *arg)
{
    int id = (int)(long)arg;
    pthread_barrier_wait(&start_barrier);
    thread_hit(id);
    pthread_barrier_wait(&end_barrier);
    return 0;
}

int main(void)
{
    pthread_t t[NTHREADS];
    pthread_barrier_init(&start_barrier, 0, NTHREADS + 1);
    pthread_barrier_init(&end_barrier, 0, NTHREADS + 1);
    for (long i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    pthread_barrier_wait(&start_barrier);
    all_running();
    pthread_barrier_wait(&end_barrier);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], 0);
    return hits == NTHREADS ? 0 : 1;
}
