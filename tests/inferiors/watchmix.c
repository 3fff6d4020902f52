/* watchmix.c: writes `cells[2]` in many different ways (direct, through computed pointers,
 * memcpy, array index from a pseudo-random sequence, a callee's stack argument, struct copy,
 * a string operation), interleaved with unrelated work, for the differential watchpoint test:
 * the stops of a watchpoint on cells[2] must be the same whoever watches (debug registers,
 * the server's emulation, GDB's own single-stepping software watchpoint).
 * Exits with the low byte of the final checksum. */
#include <string.h>

volatile int cells[8];
struct pair { int a, b; };
volatile struct pair pairs[4];
static unsigned seed = 12345;

static unsigned next(void) { seed = seed * 1103515245u + 12345u; return (seed >> 16) & 0x7fff; }

__attribute__((noinline)) void store_via(volatile int *p, int v) { *p = v; }
__attribute__((noinline)) int sum_args(int a, int b, int c, int d, int e, int f, int g) { return a + b + c + d + e + f + g; }

int main(void)
{
    int checksum = 0;
    for (int round = 0; round < 40; round++) {
        unsigned r = next();
        int idx = (int)(r % 8);
        cells[idx] = (int)r;                      /* sometimes cells[2] */
        store_via(&cells[(r >> 3) % 8], round);  /* through a pointer argument */
        int tmp[8];
        for (int i = 0; i < 8; i++) tmp[i] = cells[i] + i;
        if (r & 1) memcpy((void *)cells, tmp, sizeof tmp);   /* a block copy over all cells */
        volatile int *p = cells + (r % 3) + 1;    /* pointer arithmetic: cells[1..3] */
        *p += 1;
        checksum += sum_args(cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], (int)r);
        if ((r & 6) == 6) {                      /* a struct copy that does not touch cells */
            struct pair q = {round, (int)r};
            pairs[round % 4] = q;
        }
    }
    return checksum & 0xff;
}
