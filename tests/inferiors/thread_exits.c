/* thread_exits.c: main starts a thread that calls in_thread() (tests break there) and then
 * returns; main joins it and exits 4. A client that resumes only that thread
 * (scheduler-locking) sees every resumed thread exit: gdbserver's "no resumed" stop. */
#include <pthread.h>

void in_thread(void) { __asm__ volatile("" ::: "memory"); }

static void *worker(void *arg)
{
    (void)arg;
    in_thread();
    return 0;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_join(t, NULL);
    return 4;
}
