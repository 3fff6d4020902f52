/* coverage_lib.c: the coverage inferior with a shared library (libcov_lib.so) and threads.
 *
 * Tests rely on: `coverage_lib [N]` calls lib_collatz(27) in the library, then runs N threads
 * (default 0) that each call lib_collatz(7 + i) and lib_depth(5), joins them, and exits with
 * status 3. Without threads every run executes the same blocks (ASLR off, same environment).
 */
#include <pthread.h>
#include <stdlib.h>

int lib_collatz(int v);
int lib_depth(int n);

static volatile int results[16];

static void *worker(void *arg)
{
    long i = (long)arg;
    results[i] = lib_collatz(7 + (int)i) + lib_depth(5);
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 0;
    pthread_t t[16];
    if (n > 16)
        n = 16;
    results[15] = lib_collatz(27);
    for (long i = 0; i < n; i++)
        pthread_create(&t[i], 0, worker, (void *)i);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], 0);
    return 3;
}
