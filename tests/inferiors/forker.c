/* forker.c: forks; the child execs /bin/true; the parent waits for it, calls after_fork()
 * and exits with the child's exit status (0).
 *   forker vfork   the same with vfork()
 *   forker work    the child calls in_child() and exits 5 instead of exec'ing */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int child_value;

void after_fork(void) { __asm__ volatile("" ::: "memory"); }
void in_child(void) { child_value = 42; __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    pid_t pid = strcmp(mode, "vfork") == 0 ? vfork() : fork();
    if (pid == 0) {
        if (strcmp(mode, "work") == 0) {
            in_child();
            _exit(5);
        }
        execl("/bin/true", "true", (char *)0);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    after_fork();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
