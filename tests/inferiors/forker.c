/* forker.c: forks; the child execs /bin/true; the parent waits for it, calls after_fork()
 * and exits with the child's exit status (0). */
#include <sys/wait.h>
#include <unistd.h>

void after_fork(void) { __asm__ volatile("" ::: "memory"); }

int main(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/true", "true", (char *)0);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    after_fork();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
