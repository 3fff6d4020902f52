/* buffered_calls.c: calls the system-call buffer takes (stat, lstat, readlink, lgetxattr,
 * access), ROUNDS times each (argv[1], default 300), on a file it is given (argv[2]) whose
 * size and link it folds into `checksum`; `last_size` is written once a round (a watchpoint's
 * target). Between the rounds' halves, a getpid() (a call the buffer does not take: it stops).
 * Prints checksum=, last_size=, link_len=, then stops at values_ready(). Exit 0.
 * (tests/integration/test_record_replay_buffer.py) */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

volatile long checksum;
volatile long last_size;
long link_len;

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    const char *file = argc > 2 ? argv[2] : "/etc/passwd";
    char link[256], value[64];
    struct stat st;
    for (int i = 0; i < rounds; i++) {
        if (stat(file, &st) == 0) checksum += st.st_size + st.st_nlink;
        if (lstat("/proc/self/exe", &st) == 0) checksum += st.st_mode & 0777;
        if (i == rounds / 2) checksum += getpid() != 0;
        ssize_t n = readlink("/proc/self/exe", link, sizeof link);
        if (n > 0) link_len = n;
        checksum += lgetxattr(file, "user.none", value, sizeof value) < 0;
        checksum += access(file, R_OK) == 0;
        last_size = st.st_size + i;
    }
    printf("checksum=%ld\nlast_size=%ld\nlink_len=%ld\n", checksum, last_size, link_len);
    fflush(stdout);
    values_ready();
    return 0;
}
