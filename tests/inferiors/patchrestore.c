/* patchrestore.c: what the block-patching trace source leaves in a program (nothing, once
 * recording stops or the debugger detaches).
 *
 * Tests rely on: main(argc, argv) with N = argv[1] (default 200) and an optional output file
 * argv[2]. It reads /proc/self/maps first (without the [stack] line), runs two regions, each
 * trace_begin(); work(N); poked(N); trace_end(); (work calls middle() once, at i == N/2),
 * then prints (to stdout, and to argv[2] when given) "sum=<work's sums> poked=<poked results>
 * text=<text_checksum()> maps_same=<0|1: the mappings are those from the start>".
 * text_checksum() is an FNV-1a hash of the bytes of the program's and libc's executable
 * mappings (every executable file mapping but ld.so, where GDB keeps its shared-library event
 * breakpoints while it is attached), read with the program's own loads: with no breakpoint
 * left in them it is what a run without a debugger prints.
 * hot(n) and poked(n) are loops written in assembly so that tests know the bytes a patch
 * covers: hot's block ends with `cmp %rsi,%rcx; jl` (hot_jl is the jl, inside the patched
 * bytes but not their first byte); poked's with `lea 3(%rax),%rax; jnz` (poke_lea is the lea,
 * its displacement, the 3, at poke_lea+3): poked(n) returns 3*n, or k*n once a debugger
 * writes k there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char maps_buf[1 << 16];

/* /proc/self/maps into maps_buf (no stdio, no malloc: nothing new gets mapped). */
static size_t read_maps(void)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    size_t n = 0;
    if (fd < 0)
        return 0;
    for (;;) {
        ssize_t r = read(fd, maps_buf + n, sizeof maps_buf - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    maps_buf[n] = 0;
    return n;
}

unsigned long text_checksum(void)
{
    uint64_t h = 1469598103934665603ull;
    read_maps();
    for (char *line = maps_buf; *line;) {
        char *end = strchr(line, '\n');
        if (!end)
            break;
        *end = 0;
        unsigned long lo, hi;
        char perms[8];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &name_at) >= 3 && name_at &&
            perms[2] == 'x' && line[name_at] == '/' && !strstr(line + name_at, "/ld-linux")) {
            for (const volatile unsigned char *p = (const unsigned char *)lo; p < (const unsigned char *)hi; p++)
                h = (h ^ *p) * 1099511628211ull;
        }
        line = end + 1;
    }
    return (unsigned long)h;
}

/* The mappings without [stack] (it may grow meanwhile), into out. */
static void maps_snapshot(char *out, size_t size)
{
    size_t used = 0;
    read_maps();
    for (char *line = maps_buf; *line;) {
        char *end = strchr(line, '\n');
        if (!end)
            break;
        size_t len = (size_t)(end - line) + 1;
        if (!memmem(line, len, "[stack]", 7) && used + len < size) {
            memcpy(out + used, line, len);
            used += len;
        }
        line = end + 1;
    }
    out[used] = 0;
}

long hot(long n)
{
    long s = 0;
    __asm__ volatile("xor %%rcx, %%rcx\n"
                     "1:\n"
                     " add %%rcx, %0\n"
                     " inc %%rcx\n"
                     " cmp %1, %%rcx\n"
                     ".globl hot_jl\n"
                     "hot_jl:\n"
                     " jl 1b\n"
                     : "+r"(s)
                     : "r"(n)
                     : "rcx", "cc");
    return s;
}

long poked(long n)
{
    long r;
    __asm__ volatile("mov %1, %%rcx\n"
                     " xor %%eax, %%eax\n"
                     "1:\n"
                     " dec %%rcx\n"
                     ".globl poke_lea\n"
                     "poke_lea:\n"
                     " lea 3(%%rax), %%rax\n"
                     " jnz 1b\n"
                     " mov %%rax, %0\n"
                     : "=r"(r)
                     : "r"(n)
                     : "rax", "rcx", "cc");
    return r;
}

volatile long mid_calls;
void middle(void) { mid_calls++; }

long work(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        s += hot(i & 15);
        if (i % 3 == 0)
            s ^= i;
        if (i == n / 2)
            middle();
    }
    return s;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static char maps_before[sizeof maps_buf], maps_after[sizeof maps_buf];

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200;
    const char *out = argc > 2 ? argv[2] : NULL;
    char line[256];
    printf("start\n");  /* stdout's buffer exists before the snapshot */
    fflush(stdout);
    maps_snapshot(maps_before, sizeof maps_before);
    long sum = 0, pk = 0;
    for (int region = 0; region < 2; region++) {
        trace_begin();
        sum += work(n);
        pk += poked(n);
        trace_end();
    }
    maps_snapshot(maps_after, sizeof maps_after);
    snprintf(line, sizeof line, "sum=%ld poked=%ld text=%lx maps_same=%d\n", sum, pk, text_checksum(),
             strcmp(maps_before, maps_after) == 0);
    fputs(line, stdout);
    fflush(stdout);
    if (out) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            (void)!write(fd, line, strlen(line));
            close(fd);
        }
    }
    if (strcmp(maps_before, maps_after) != 0)
        fprintf(stderr, "maps before:\n%s\nmaps after:\n%s\n", maps_before, maps_after);
    return 0;
}
