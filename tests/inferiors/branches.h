/* branches.h: the traced region shared by branches*.c (header so each inferior stays one
 * file for the CMake glob). Deterministic: the same instructions run on every call once the
 * PLT entries are bound (each program calls region() once before trace_begin() to warm up).
 *
 * region() contains, in order:
 *   - two calls through a function pointer table (ops[0] = add1, ops[1] = dbl): indirect calls;
 *   - a loop of 8 iterations (LINE:loop) calling classify(i), a dense switch that GCC
 *     compiles to a jump table (indirect jmp; tests/integration checks with objdump);
 *   - a conditional branch that is NOT taken (LINE:not-taken: `five` is always 5, so the
 *     jne over the increment falls through);
 *   - a getpid() syscall through the PLT (LINE:syscall);
 *   - returns 52 + 8 ... (the value is irrelevant; it is stored in `sink`).
 * straight-line code at LINE:region-start / LINE:region-straight has no branch between them.
 */
#include <unistd.h>

volatile int sink;
volatile int five = 5;

static int add1(int x) { return x + 1; }
static int dbl(int x) { return x * 2; }
int (*volatile ops[2])(int) = {add1, dbl};

int classify(int v)
{
    switch (v) {
    case 0: return 10;
    case 1: return 21;
    case 2: return 32;
    case 3: return 43;
    case 4: return 54;
    case 5: return 65;
    case 6: return 76;
    case 7: return 87;
    case 8: return 98;
    default: return -1;
    }
}

int region(void)
{
    int acc = 0;                            /* LINE:region-start */
    acc += 3;                               /* LINE:region-straight */
    acc += ops[0](acc);                     /* LINE:fnptr */
    acc += ops[1](acc);
    for (int i = 0; i < 8; i++)             /* LINE:loop */
        acc += classify((i * 3) % 9);       /* LINE:switch */
    if (five == 5)                          /* LINE:not-taken */
        acc += 1;
    acc += (int)(getpid() > 0);             /* LINE:syscall */
    return acc;                             /* LINE:region-return */
}

/* trace_begin()/trace_end() mark the traced region; tests break on them. */
void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }
