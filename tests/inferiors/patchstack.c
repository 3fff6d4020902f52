/* patchstack.c: block ends whose displaced instructions use the stack, for the block-patching
 * trace source; and a program that reads its own code.
 *
 * Tests rely on: main(argc, argv) calls rsp_leaf(1), trace_begin(), rsp_leaf(i & 7) for i < N
 * (N = argv[1], default 20), then with argv[2] = "selfread" code_sum() N times (a byte sum
 * of rsp_leaf's first 40 bytes, branching on its low bit), trace_end(), prints "sum=<value>"
 * and exits 0.
 * rsp_leaf is a leaf in asm whose short jcc blocks end after `cmpq $3,-8(%rsp)` (red zone),
 * push/pop pairs, `add -128(%rsp)` (the red zone's far end) and `leave`: a patch over such a
 * block end displaces them into its stub.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__asm__(".pushsection .text\n"
        ".globl rsp_leaf\n.type rsp_leaf,@function\nrsp_leaf:\n"
        " mov %rdi, -8(%rsp)\n xor %eax, %eax\n"
        " cmpq $3, -8(%rsp)\n jne 1f\n inc %eax\n"
        "1: push %rdi\n pop %rcx\n test %rcx, %rcx\n jz 2f\n add $2, %eax\n"
        "2: push %rdi\n push %rax\n pop %rax\n pop %rdx\n jno 3f\n ud2\n"
        "3: mov %rdi, -128(%rsp)\n add -128(%rsp), %rax\n jc 4f\n"
        "4: push %rbp\n mov %rsp, %rbp\n push %rdi\n leave\n jmp 5f\n"
        "5: ret\n.size rsp_leaf,.-rsp_leaf\n.popsection\n");
long rsp_leaf(long);

unsigned char code_sum(void)
{
    unsigned char s = 0;
    const unsigned char *p = (const unsigned char *)rsp_leaf;
    for (int i = 0; i < 40; i++)
        s += p[i];
    return s;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20, s = 0;
    int selfread = argc > 2 && strcmp(argv[2], "selfread") == 0;
    s += rsp_leaf(1);
    trace_begin();
    for (long i = 0; i < n; i++)
        s += rsp_leaf(i & 7);
    for (long i = 0; selfread && i < n; i++)
        s += (code_sum() & 1) ? 3 : -1;
    trace_end();
    printf("sum=%ld\n", s);
    return 0;
}
