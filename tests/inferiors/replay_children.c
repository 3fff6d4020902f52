/* Record and replay of a program that makes child processes and talks over a socket pair
 * (tests/integration/test_record_replay_children.py). The children run unrecorded; what the
 * parent learns of them (their pids, what they wrote into a pipe, their exit statuses, the
 * SIGCHLDs) is what the replay must give back. Prints what it got and stops at values_ready().
 *   replay_children        fork + pipe + waitpid, kill of a child, system(), popen(),
 *                          socketpair + sendmsg/recvmsg, getresuid/getresgid, tcsetattr */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

long child_pid;
char child_text[64];
int child_status;
int killed_signal;
int system_status;
char popen_text[64];
int popen_status;
char socket_text[32];
unsigned res_uid[3], res_gid[3];
int tcset_result;
volatile int sigchld_count;
long after_children; /* written last: a watch on it reverse-continues to that write */

static void on_chld(int sig) { (void)sig; sigchld_count++; }

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

int main(void) {
  signal(SIGCHLD, on_chld);
  /* fork: the child writes its own pid and a word into a pipe and exits with 7. */
  int p[2];
  if (pipe(p) != 0) return 1;
  pid_t c = fork();
  if (c == 0) {
    /* The recording traps rdtsc in the program: a child runs untraced, with rdtsc its own again
     * (else this faults and the status below is not 7). */
    volatile unsigned long long tsc = __rdtsc();
    (void)tsc;
    close(p[0]);
    char msg[64];
    int n = snprintf(msg, sizeof msg, "from-child-%ld", (long)getpid());
    if (write(p[1], msg, (size_t)n) != n) _exit(1);
    _exit(7);
  }
  child_pid = (long)c;
  close(p[1]);
  ssize_t got = read(p[0], child_text, sizeof child_text - 1);
  child_text[got > 0 ? got : 0] = 0;
  close(p[0]);
  int status = 0;
  if (waitpid(c, &status, 0) == c && WIFEXITED(status)) child_status = WEXITSTATUS(status);
  /* A child that waits to be killed. */
  pid_t k = fork();
  if (k == 0) {
    for (;;) pause();
  }
  kill(k, SIGTERM);
  if (waitpid(k, &status, 0) == k && WIFSIGNALED(status)) killed_signal = WTERMSIG(status);
  /* posix_spawn underneath: clone(CLONE_VM|CLONE_VFORK), then /bin/sh. */
  int s = system("exit 3");
  system_status = WIFEXITED(s) ? WEXITSTATUS(s) : -1;
  FILE* f = popen("echo from-popen", "r");
  if (f) {
    if (!fgets(popen_text, sizeof popen_text, f)) popen_text[0] = 0;
    popen_text[strcspn(popen_text, "\n")] = 0;
    int ps = pclose(f);
    popen_status = WIFEXITED(ps) ? WEXITSTATUS(ps) : -1;
  }
  /* A socket pair: a message sent with sendmsg comes back through recvmsg. */
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0) {
    char out[] = "over-socket";
    struct iovec oi = {out, sizeof out};
    struct msghdr om = {0};
    om.msg_iov = &oi;
    om.msg_iovlen = 1;
    sendmsg(sv[0], &om, 0);
    struct iovec ii = {socket_text, sizeof socket_text - 1};
    struct msghdr im = {0};
    im.msg_iov = &ii;
    im.msg_iovlen = 1;
    recvmsg(sv[1], &im, 0);
    close(sv[0]);
    close(sv[1]);
  }
  getresuid(&res_uid[0], &res_uid[1], &res_uid[2]);
  getresgid(&res_gid[0], &res_gid[1], &res_gid[2]);
  struct termios t;
  memset(&t, 0, sizeof t);
  tcset_result = tcsetattr(0, TCSADRAIN, &t) == 0 ? 0 : -1;
  after_children = child_pid + child_status;
  printf("child_pid=%ld\n", child_pid);
  printf("child_text=%s\n", child_text);
  printf("child_status=%d\n", child_status);
  printf("killed_signal=%d\n", killed_signal);
  printf("system_status=%d\n", system_status);
  printf("popen_text=%s\n", popen_text);
  printf("popen_status=%d\n", popen_status);
  printf("socket_text=%s\n", socket_text);
  printf("res_uid=%u,%u,%u\n", res_uid[0], res_uid[1], res_uid[2]);
  printf("tcset_result=%d\n", tcset_result);
  printf("sigchld_count=%d\n", sigchld_count);
  fflush(stdout);
  values_ready();
  return 0;
}
