/* many_threads.c: N threads (argv[1], default 200) all block on a condition variable;
 * when all have started main calls all_ready() (N+1 threads alive), then releases them,
 * joins them and exits 0. */
#include <pthread.h>
#include <stdlib.h>

static pthread_barrier_t barrier;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int go = 0;

void all_ready(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&barrier);
    pthread_mutex_lock(&lock);
    while (!go)
        pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    pthread_t *t = calloc(n, sizeof *t);
    pthread_barrier_init(&barrier, 0, n + 1);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], 0, worker, 0);
    pthread_barrier_wait(&barrier);
    all_ready();
    pthread_mutex_lock(&lock);
    go = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], 0);
    return 0;
}
