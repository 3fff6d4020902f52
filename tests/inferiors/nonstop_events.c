/* nonstop_events.c: one thread meets an event while another runs on, for the non-stop tests.
 * A spinner thread counts `counter` up for ever; a worker thread waits until the spinner has
 * counted (so it surely runs), does the event argv[1] names once, calls event_done() and
 * sleeps. main exits 0 after argv[2] seconds (default 60), so a forgotten run ends by itself.
 *   syscall  the worker calls getppid() (no other thread does)
 *   fork     the worker forks; the child calls in_child() and exits 7; the worker waits for it
 *   vfork    the same with vfork()
 *   watch    the worker writes `watched` (0 -> 1), then reads it
 *   cond     the worker calls visit(i) for i = 0..19 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long counter;
volatile int watched;
volatile int child_status = -1;
volatile int visited;
static const char *event = "";

void event_done(void) { __asm__ volatile("" ::: "memory"); }
void in_child(void) { __asm__ volatile("" ::: "memory"); }
void visit(int i) { visited = i; }

static void *spinner(void *arg)
{
    (void)arg;
    for (;;) counter++;
    return 0;
}

static void *worker(void *arg)
{
    (void)arg;
    while (counter < 100000) {}
    if (strcmp(event, "syscall") == 0) {
        (void)getppid();
    } else if (strcmp(event, "fork") == 0 || strcmp(event, "vfork") == 0) {
        pid_t pid = strcmp(event, "vfork") == 0 ? vfork() : fork();
        if (pid == 0) {
            in_child();
            _exit(7);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        child_status = WIFEXITED(status) ? WEXITSTATUS(status) : -2;
    } else if (strcmp(event, "watch") == 0) {
        watched = 1;
        visited = watched;
    } else if (strcmp(event, "cond") == 0) {
        for (int i = 0; i < 20; i++) visit(i);
    }
    event_done();
    for (;;) usleep(1000);
    return 0;
}

int main(int argc, char **argv)
{
    event = argc > 1 ? argv[1] : "";
    int seconds = argc > 2 ? atoi(argv[2]) : 60;
    pthread_t t1, t2;
    pthread_create(&t1, 0, spinner, 0);
    pthread_create(&t2, 0, worker, 0);
    sleep(seconds);
    return 0;
}
