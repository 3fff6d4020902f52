/* nonstop.c: for non-stop debugging. A spinner thread counts `counter` up for ever (calling
 * spin_tick() on each round), a hitter thread calls bp_here() every millisecond, main sleeps.
 * Exits 0 after argv[1] seconds (default 60) so a forgotten run ends by itself. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long counter;
volatile unsigned long hits;

void spin_tick(void) { __asm__ volatile("" ::: "memory"); }
void bp_here(void) { hits++; }

static void *spinner(void *arg)
{
    (void)arg;
    for (;;) {
        counter++;
        spin_tick();
    }
    return 0;
}

static void *hitter(void *arg)
{
    (void)arg;
    for (;;) {
        bp_here();
        usleep(1000);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    pthread_t t1, t2;
    pthread_create(&t1, 0, spinner, 0);
    pthread_create(&t2, 0, hitter, 0);
    sleep(seconds);
    return 0;
}
