/* tls.c: thread-local storage, for GDB's `print` of __thread variables (qGetTLSAddr).
 *
 * Tests rely on:
 *   - `__thread int tls_var = 7`: main sets it to 100, worker k (k = 1, 2) to 100 + k;
 *   - errno: main sets it to 1000, worker k to 1000 + k (just before waiting);
 *   - the linked shared library lib/tls_lib.c: `__thread int lib_tls = 5`, set through
 *     lib_tls_set() to 500 (main) and 500 + k (worker k);
 *   - workers are named "tls-worker-k" (pthread_setname_np); main stays "tls" (or "tls_static");
 *   - after all threads have set their values and wait on a barrier, main dlopens
 *     libtls_dl.so (lib/tls_dl.c, next to this program) and sets its `__thread int dl_tls = 9`
 *     to 900 in main only: the workers have no storage for it (libthread_db: TD_TLSDEFER);
 *   - then main calls all_set() (LINE:all-set) with every value in place, releases the workers,
 *     joins them and exits 0.
 *   - tls_static.c builds this file with TLS_STATIC, statically linked: no library, no dlopen.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#ifndef TLS_STATIC
#include <dlfcn.h>
#include <unistd.h>
void lib_tls_set(int value);
#endif

#define NWORKERS 2
__thread int tls_var = 7;
static pthread_barrier_t ready, done;

void all_set(void)
{
    __asm__ volatile("" ::: "memory"); /* LINE:all-set */
}

static void *worker(void *arg)
{
    int k = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "tls-worker-%d", k);
    pthread_setname_np(pthread_self(), name);
    tls_var = 100 + k;
#ifndef TLS_STATIC
    lib_tls_set(500 + k);
#endif
    errno = 1000 + k;
    pthread_barrier_wait(&ready);
    pthread_barrier_wait(&done);
    return 0;
}

#ifndef TLS_STATIC
/* Opens libtls_dl.so from this program's directory and sets its dl_tls in main. */
static int open_dl_library(void)
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0)
        return -1;
    path[n] = 0;
    char *slash = strrchr(path, '/');
    strcpy(slash ? slash + 1 : path, "libtls_dl.so");
    void *h = dlopen(path, RTLD_NOW);
    if (!h)
        return -1;
    void (*set)(int) = (void (*)(int))dlsym(h, "dl_tls_set");
    if (!set)
        return -1;
    set(900);
    return 0;
}
#endif

int main(void)
{
    pthread_t t[NWORKERS];
    pthread_barrier_init(&ready, 0, NWORKERS + 1);
    pthread_barrier_init(&done, 0, NWORKERS + 1);
    tls_var = 100;
#ifndef TLS_STATIC
    lib_tls_set(500);
#endif
    for (long k = 1; k <= NWORKERS; k++)
        pthread_create(&t[k - 1], 0, worker, (void *)k);
    pthread_barrier_wait(&ready);
#ifndef TLS_STATIC
    if (open_dl_library() != 0)
        return 2;
#endif
    errno = 1000;
    all_set();
    pthread_barrier_wait(&done);
    for (int k = 0; k < NWORKERS; k++)
        pthread_join(t[k], 0);
    return 0;
}
