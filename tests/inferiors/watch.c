/* watch.c: known reads and writes of globals, for watchpoint tests.
 *
 * Tests rely on:
 *   - write_twice() writes `watched` = 1 twice (the second write does not change the value);
 *   - read_once() reads it (LINE:read) and returns it; main stores that in `sink`;
 *   - with the argument "thread", a second thread runs thread_writer(), which sets
 *     `thread_value` = 7 (LINE:thread-write), and main joins it;
 *   - copy_block(): a memcpy of 64 bytes over `block` (LINE:memcpy), then `rep stosb`
 *     zeroing `block` (LINE:stos);
 *   - exit code = sink + thread_value (1 or 8).
 */
#include <pthread.h>
#include <string.h>

volatile int watched = 0;
volatile int sink = 0;
volatile int thread_value = 0;
char block[64];
char source[64] = "watch me: sixty-four bytes of source data for memcpy, exactly.";

__attribute__((noinline)) void write_twice(void)
{
    watched = 1;                /* LINE:write1 */
    watched = 1;                /* LINE:write2 */
}

__attribute__((noinline)) int read_once(void)
{
    int v = watched;            /* LINE:read */
    return v;
}

static void *thread_writer(void *arg)
{
    (void)arg;
    thread_value = 7;           /* LINE:thread-write */
    return 0;
}

__attribute__((noinline)) void copy_block(void)
{
    void *dst = block;
    unsigned long n = sizeof block;
    memcpy(block, source, sizeof block);     /* LINE:memcpy */
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(0) : "memory"); /* LINE:stos */
}

int main(int argc, char **argv)
{
    write_twice();
    sink = read_once();
    if (argc > 1 && strcmp(argv[1], "thread") == 0) {
        pthread_t t;
        pthread_create(&t, 0, thread_writer, 0);
        pthread_join(t, 0);
    }
    copy_block();
    return sink + thread_value;
}
