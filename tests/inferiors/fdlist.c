/* fdlist.c: prints every file descriptor it was started with besides 0, 1 and 2, as
 * "FD n -> target", then "FDLIST-END", and exits 0. A debugger must not hand its own
 * descriptors (sockets, perf events, trace files) to the programs it launches. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
            continue;
        char path[64], target[PATH_MAX];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n < 0 ? 0 : n] = '\0';
        printf("FD %d -> %s\n", fd, target);
    }
    closedir(d);
    printf("FDLIST-END\n");
    fflush(stdout);
    return 0;
}
