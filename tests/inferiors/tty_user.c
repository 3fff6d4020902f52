/* tty_user.c: uses its terminal (stdin) every 10 ms: calls tick(N) (tests break there),
 * prints "pid <PID> count <N>" and sets the terminal's attributes again (tcsetattr), which
 * stops a process of a background group with SIGTTOU. Gives up after 60 s (alarm). */
#include <signal.h>
#include <stdio.h>
#include <termios.h>
#include <unistd.h>

void tick(int count) { (void)count; }

int main(void)
{
    signal(SIGTTOU, SIG_DFL);
    alarm(60);
    for (int count = 0;; count++) {
        struct termios t;
        tick(count);
        printf("pid %d count %d\n", (int)getpid(), count);
        fflush(stdout);
        if (tcgetattr(0, &t) == 0)
            tcsetattr(0, TCSANOW, &t);
        usleep(10000);
    }
}
