/* memdump.c: allocates a 64 MiB buffer `buf` (size in `buf_size`) whose byte i is
 * (unsigned char)((i * 2654435761u) >> 24), then calls ready(buf, size) and exits 0.
 * Tests dump the buffer at ready() and check it against the same formula. */
#include <stdlib.h>

unsigned char *buf;
unsigned long buf_size = 64ul << 20;

void ready(unsigned char *p, unsigned long n) { (void)p; (void)n; __asm__ volatile("" ::: "memory"); }

int main(void)
{
    buf = malloc(buf_size);
    for (unsigned long i = 0; i < buf_size; i++)
        buf[i] = (unsigned char)(((unsigned)i * 2654435761u) >> 24);
    ready(buf, buf_size);
    free(buf);
    return 0;
}
