/* patch_threads.c: 8 threads running loops and calls for the block-patching trace source, with
 * every thread's history deterministic (so two trace sources can be compared line by line).
 *
 * Tests rely on: main creates 4 "early" threads, each blocking in read() on pipe go_early;
 * main waits (outside any recorded region) until /proc shows all 4 blocked in that read, then
 * calls trace_begin(). Inside the region main writes 4 bytes to go_early (each early thread
 * wakes, runs early_work(i), writes one byte to pipe done and blocks in read() on pipe park),
 * creates 4 "late" threads (each blocks in read() on go_late), calls late_ready() (they may
 * be anywhere in their start-up then), writes 4 bytes to go_late (each late thread runs
 * late_work(i), writes one byte to done, blocks on park), reads the 8 done bytes one at a
 * time, sleeps 200 ms (everyone is blocked on park by then) and calls trace_end(). Then it writes 8 bytes to park, joins everyone,
 * prints "sum=<value>" and exits 0. argv[1]: iterations per thread (default 50).
 * work() has conditional jumps, a loop, direct calls, calls through a function pointer, a
 * switch (jump table), recursion (returns) and a loop of 8 * n iterations without a stop.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NE 4
#define NL 4

static int go_early[2], go_late[2], done[2], park[2];
static int iterations = 50;
static long results[NE + NL];
static pid_t early_tids[NE];
static volatile int early_started;

static long inc(long x) { return x + 1; }
static long twice(long x) { return x * 2; }
long (*volatile fns[2])(long) = {inc, twice};

static long pick(long v)
{
    switch (v & 7) {
    case 0: return 11;
    case 1: return 23;
    case 2: return 35;
    case 3: return 47;
    case 4: return 59;
    case 5: return 61;
    case 6: return 73;
    default: return 85;
    }
}

static long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

static long work(long seed, int n)
{
    long sum = seed;
    for (int i = 0; i < n; i++) {
        if ((i + seed) % 3 == 0)
            sum += pick(i);
        else
            sum = fns[i & 1](sum) & 0xffffff;
        if (i % 16 == 0)
            sum += fib(6 + (seed & 1));
    }
    for (int j = 0; j < n * 8; j++) /* block ends that all patch: the ring fills between stops */
        if (j & 1)
            sum++;
    return sum;
}

long early_work(int i) { return work(i, iterations + i * 7); }
long late_work(int i) { return work(100 + i, iterations + i * 5); }

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void late_ready(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static void byte_in(int fd)
{
    char c;
    while (read(fd, &c, 1) != 1) {}
}

static void byte_out(int fd)
{
    char c = 1;
    while (write(fd, &c, 1) != 1) {}
}

static void *early(void *arg)
{
    int i = (int)(long)arg;
    early_tids[i] = gettid();
    __atomic_add_fetch(&early_started, 1, __ATOMIC_SEQ_CST);
    byte_in(go_early[0]);
    results[i] = early_work(i);
    byte_out(done[1]);
    byte_in(park[0]);
    return 0;
}

static void *late(void *arg)
{
    int i = (int)(long)arg;
    byte_in(go_late[0]);
    results[NE + i] = late_work(i);
    byte_out(done[1]);
    byte_in(park[0]);
    return 0;
}

/* tid is blocked in read(fd) (its /proc syscall line: "0 <fd in hex> ...") */
static int blocked_in_read(pid_t tid, int fd)
{
    char path[64], line[256], want[32];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(line, sizeof line, f) != 0;
    fclose(f);
    snprintf(want, sizeof want, "0 0x%x ", fd);
    return ok && strncmp(line, want, strlen(want)) == 0;
}

int main(int argc, char **argv)
{
    pthread_t t[NE + NL];
    if (argc > 1)
        iterations = atoi(argv[1]);
    if (pipe(go_early) || pipe(go_late) || pipe(done) || pipe(park))
        return 2;
    /* every function the region calls is bound before it (lazy binding would show once) */
    byte_out(park[1]);
    byte_in(park[0]);
    usleep(1);
    for (int i = 0; i < NE; i++)
        pthread_create(&t[i], 0, early, (void *)(long)i);
    while (__atomic_load_n(&early_started, __ATOMIC_SEQ_CST) < NE)
        usleep(1000);
    for (int i = 0; i < NE; i++)
        while (!blocked_in_read(early_tids[i], go_early[0]))
            usleep(1000);
    trace_begin();
    for (int i = 0; i < NE; i++)
        byte_out(go_early[1]);
    for (int i = 0; i < NL; i++)
        pthread_create(&t[NE + i], 0, late, (void *)(long)i);
    late_ready();
    for (int i = 0; i < NL; i++)
        byte_out(go_late[1]);
    for (int i = 0; i < NE + NL; i++)
        byte_in(done[0]);
    usleep(200000); /* every thread blocked in its read of park (not on its way there) */
    trace_end();
    for (int i = 0; i < NE + NL; i++)
        byte_out(park[1]);
    long sum = 0;
    for (int i = 0; i < NE + NL; i++) {
        pthread_join(t[i], 0);
        sum += results[i];
    }
    printf("sum=%ld\n", sum);
    return 0;
}
