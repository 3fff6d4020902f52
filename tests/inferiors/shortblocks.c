/* shortblocks.c: blocks too short for a 5-byte patch (issue 11), which the block-patching
 * source runs from translations: a `test; jne` block (4 bytes) after a conditional jump, a
 * 1-byte `ret` as a jump target and as a fall-through, a 4-byte block at a call's return
 * site.
 *
 * Tests rely on: main(argc, argv) calls trace_begin(), spin(N) with N = argv[1] (default 100),
 * trace_end(), prints "sum=<value>" and exits 0. The global label `short_test` is the first
 * instruction of the 4-byte `test; jne` block (a breakpoint there is hit N/2 times, rounded
 * down, per spin call... see the loop below: every odd count takes it).
 */
#include <stdio.h>
#include <stdlib.h>

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

/* eax counts up to edi; at each count, `test $1,%al; jne` (4 bytes) is the fall-through of
 * `je 2f`; odd counts go back at once, even ones pass an `add $0; jmp` block (5 bytes). */
__attribute__((naked, noinline)) int count_to(int n)
{
    __asm__ volatile(
        "xor %eax,%eax\n"
        "1: add $1,%eax\n"
        "   cmp %edi,%eax\n"
        "   je 2f\n"
        ".globl short_test\n"
        "short_test:\n"
        "   test $1,%al\n"
        "   jne 1b\n"
        "   add $0,%eax\n"
        "   jmp 1b\n"
        "2: ret\n");
}

/* A 1-byte ret right after a jne (fall-through) and a 4-byte block after a call. */
__attribute__((naked, noinline)) int odd_or_zero(int x)
{
    __asm__ volatile(
        "mov %edi,%eax\n"
        "and $1,%eax\n"
        "jne 3f\n"
        "ret\n"
        "3: mov %edi,%eax\n"
        "ret\n");
}

__attribute__((noinline)) long spin(int n)
{
    long sum = 0;
    for (int i = 0; i < n; i++) {
        sum += count_to(i % 7 + 1);
        if (odd_or_zero(i) == 0) sum += 2;
    }
    return sum;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100;
    trace_begin();
    long sum = spin(n);
    trace_end();
    printf("sum=%ld\n", sum);
    return 0;
}
