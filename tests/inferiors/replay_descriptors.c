/* Record and replay of descriptors the replay cannot make alike (tests/integration/
 * test_record_replay_children.py): a TCP connection to itself over loopback (socket, bind,
 * listen, getsockname, connect, accept, send, recv), an epoll set that sees the data, an
 * eventfd and a timerfd; then a file opened after them, whose descriptor number shows that the
 * replay's placeholders kept the numbering. Prints what it got and stops at values_ready(). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

int port;
int accepted_fd;
char tcp_text[32];
int epoll_ready;
unsigned long long event_value;
int timer_armed;
int file_fd;
char file_text[32];

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char** argv) {
  int lsn = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(lsn, (struct sockaddr*)&a, sizeof a) != 0 || listen(lsn, 1) != 0 ||
      getsockname(lsn, (struct sockaddr*)&a, &len) != 0)
    return 1;
  port = ntohs(a.sin_port);
  int cli = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (connect(cli, (struct sockaddr*)&a, sizeof a) != 0) return 2;
  struct sockaddr_in peer;
  socklen_t plen = sizeof peer;
  accepted_fd = accept4(lsn, (struct sockaddr*)&peer, &plen, SOCK_CLOEXEC);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 77};
  epoll_ctl(ep, EPOLL_CTL_ADD, accepted_fd, &ev);
  send(cli, "over-tcp", 9, 0);
  struct epoll_event out[4];
  int n = epoll_wait(ep, out, 4, 1000);
  epoll_ready = n == 1 ? (int)out[0].data.u64 : -n;
  recv(accepted_fd, tcp_text, sizeof tcp_text - 1, 0);
  int efd = eventfd(0, EFD_CLOEXEC);
  uint64_t one = 41;
  if (write(efd, &one, 8) != 8) return 3;
  if (read(efd, &event_value, 8) != 8) return 4;
  int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
  struct itimerspec its = {{0, 0}, {100, 0}};
  timerfd_settime(tfd, 0, &its, NULL);
  struct itimerspec cur;
  timerfd_gettime(tfd, &cur);
  timer_armed = cur.it_value.tv_sec > 90;
  file_fd = open(argc > 1 ? argv[1] : "/etc/hostname", O_RDONLY);
  ssize_t got = read(file_fd, file_text, sizeof file_text - 1);
  file_text[got > 0 ? got : 0] = 0;
  file_text[strcspn(file_text, "\n")] = 0;
  printf("port=%d\naccepted_fd=%d\ntcp_text=%s\nepoll_ready=%d\nevent_value=%llu\ntimer_armed=%d\n", port,
         accepted_fd, tcp_text, epoll_ready, event_value, timer_armed);
  printf("file_fd=%d\nfile_text=%s\n", file_fd, file_text);
  fflush(stdout);
  values_ready();
  return 0;
}
