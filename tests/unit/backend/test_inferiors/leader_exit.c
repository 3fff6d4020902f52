// main starts a thread and leaves with pthread_exit (a zombie while the thread lives); the
// thread calls ready(), waits until /proc shows the leader exited, calls after_leader_exit()
// and exits the process with status 5.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
void ready(void) { __asm__ volatile("" ::: "memory"); }
void after_leader_exit(void) { __asm__ volatile("" ::: "memory"); }
static int leader_gone(void) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
  FILE* f = fopen(path, "r");
  if (!f) return 1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  char* p = strrchr(buf, ')');
  return p && (p[2] == 'Z' || p[2] == 'X');
}
static void* worker(void* arg) {
  (void)arg;
  ready();
  while (!leader_gone()) usleep(1000);
  after_leader_exit();
  exit(5);
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, worker, 0);
  pthread_exit(0);
}
