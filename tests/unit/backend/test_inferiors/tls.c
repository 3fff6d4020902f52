/* tls.c: thread-local storage for the ThreadDb tests. Main and two workers (k = 1, 2) set
 * `__thread int tls_var` to 100 (main) / 100 + k and errno to 1000 / 1000 + k, then meet on a
 * barrier; main dlopens argv[1] if given (a library with `__thread int dl_tls` and
 * dl_tls_set(int)) and sets dl_tls to 900 in main only, then calls stop_here() and lets
 * everyone finish. Built with -DNO_DLOPEN for the static variant. */
#include <errno.h>
#include <pthread.h>
#ifndef NO_DLOPEN
#include <dlfcn.h>
#endif

__thread int tls_pad = 1; /* so that tls_var's offset is not 0 */
__thread int tls_var = 7;
static pthread_barrier_t ready, done;

void stop_here(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg)
{
    int k = (int)(long)arg;
    tls_var = 100 + k;
    errno = 1000 + k;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    return 0;
}

int main(int argc, char **argv)
{
    pthread_t t[2];
    pthread_barrier_init(&ready, 0, 3);
    pthread_barrier_init(&done, 0, 3);
    tls_var = 100;
    for (long k = 1; k <= 2; k++)
        pthread_create(&t[k - 1], 0, worker, (void *)k);
    pthread_barrier_wait(&ready);
#ifndef NO_DLOPEN
    if (argc > 1) {
        void *h = dlopen(argv[1], RTLD_NOW);
        void (*set)(int) = h ? (void (*)(int))dlsym(h, "dl_tls_set") : 0;
        if (!set)
            return 2;
        set(900);
    }
#endif
    errno = 1000;
    stop_here();
    pthread_barrier_wait(&done);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], 0);
    return tls_pad - 1;
}
