/* Record and replay (tests/integration/test_record_replay.py): gets nondeterministic values
 * (a file's contents, time, clocks, randomness, its pid, rdtsc, a signal it sends itself),
 * prints them, and stops at values_ready() where GDB reads the same values.
 *   replay_prog FILE           the values
 *   replay_prog FILE thread    also starts a thread (record refuses it)
 *   replay_prog FILE alarm     also takes three SIGALRMs from setitimer while it loops, and
 *                              prints the loop index at which each arrived
 *   replay_prog FILE busy      the same, but the loop makes no syscall: the SIGALRMs surely
 *                              arrive inside the program's own code */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

char file_text[64];
long now;
long long mono_ns;
unsigned long long random_value;
long pid;
unsigned long long tsc;
volatile int usr1_count;
volatile int alarm_count;
volatile long loop_index;
long alarm_at[3];

static void on_usr1(int sig) { (void)sig; usr1_count++; }
static void on_alarm(int sig) {
  (void)sig;
  if (alarm_count < 3) alarm_at[alarm_count] = loop_index;
  alarm_count++;
}
static void* thread_main(void* arg) { return arg; }

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char** argv) {
  FILE* f = fopen(argc > 1 ? argv[1] : "/etc/hostname", "r");
  if (f) {
    if (!fgets(file_text, sizeof file_text, f)) file_text[0] = 0;
    fclose(f);
    file_text[strcspn(file_text, "\n")] = 0;
  }
  now = (long)time(NULL);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  mono_ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  if (getrandom(&random_value, sizeof random_value, 0) != sizeof random_value) random_value = 0;
  pid = (long)getpid();
  tsc = __rdtsc();
  signal(SIGUSR1, on_usr1);
  raise(SIGUSR1);
  if (argc > 2 && strcmp(argv[2], "thread") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
  }
  if (argc > 2 && strcmp(argv[2], "busy") == 0) {
    signal(SIGALRM, on_alarm);
    struct itimerval it = {{0, 20000}, {0, 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (loop_index = 0; alarm_count < 3; loop_index++) {
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("alarms=%ld,%ld,%ld\n", alarm_at[0], alarm_at[1], alarm_at[2]);
  }
  if (argc > 2 && strcmp(argv[2], "alarm") == 0) {
    signal(SIGALRM, on_alarm);
    struct timespec first = {0, 1000};
    nanosleep(&first, NULL); /* bound before the timer runs: the loop is all syscall */
    struct itimerval it = {{0, 20000}, {0, 20000}};
    setitimer(ITIMER_REAL, &it, NULL);
    /* Most of the time is spent in nanosleep: the signals arrive there (EINTR). */
    for (loop_index = 0; alarm_count < 3; loop_index++) {
      struct timespec d = {0, 2000000};
      nanosleep(&d, NULL);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("alarms=%ld,%ld,%ld\n", alarm_at[0], alarm_at[1], alarm_at[2]);
  }
  printf("file=%s\n", file_text);
  printf("time=%ld\n", now);
  printf("mono=%lld\n", mono_ns);
  printf("random=%llu\n", random_value);
  printf("pid=%ld\n", pid);
  printf("tsc=%llu\n", tsc);
  printf("usr1=%d\n", usr1_count);
  fflush(stdout);
  values_ready();
  return (int)(random_value % 7) + 3;
}
