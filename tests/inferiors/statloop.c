/* statloop.c: stat()s PATH (argv[2], default "/") N times (argv[1], default 20000) and exits 0
 * when every call succeeded: bench/replay_bench.py's cost of one recorded system call. */
#include <stdlib.h>
#include <sys/stat.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    const char *path = argc > 2 ? argv[2] : "/";
    long failed = 0;
    struct stat st;
    for (long i = 0; i < n; i++)
        failed += stat(path, &st) != 0;
    return failed != 0;
}
