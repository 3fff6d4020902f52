/* patchshort.c: tiny blocks for the block-patching trace source, forced with inline asm.
 *
 * Tests rely on: main(argc, argv) runs shorts(N) once to warm up, then trace_begin(),
 * shorts(N) with N = argv[1] (default 50), trace_end(), prints "sum=<value>" and exits 0.
 * shorts() runs, each iteration:
 *   - a 2-instruction `dec; jnz rel8` loop (a 5-byte block that jumps to its own start);
 *   - a loop whose body is a block made of one `jz rel8` right at a block start;
 *   - a `jmp rel8` that is a block of its own, landing on a `jnz rel8` block of its own;
 *   - `jrcxz` and `loop` in 2-byte blocks;
 *   - calls to just_ret (a 1-byte `ret` function) and ret_one (`mov $1,%eax; ret`), and
 *     a call whose return lands on a `jcc` directly;
 *   - a `jmp *%rax` in a 2-byte block that lands on a 1-byte `ret`-ended block chain.
 * Block ends too short to patch keep the software engine's stop; the history must still be
 * the software source's.
 */
#include <stdio.h>
#include <stdlib.h>

__asm__(".text\n"
        ".globl just_ret\n.type just_ret,@function\njust_ret:\n ret\n.size just_ret,.-just_ret\n"
        ".globl ret_one\n.type ret_one,@function\nret_one:\n mov $1, %eax\n ret\n.size ret_one,.-ret_one\n"
        ".globl ind_target\n.type ind_target,@function\nind_target:\n jmp 1f\n1: ret\n.size ind_target,.-ind_target\n");
void just_ret(void);
int ret_one(void);
void ind_target(void);

long shorts(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++) {
        long k = (i & 7) + 1;
        __asm__ volatile(
            /* a 5-byte dec/jnz block jumping to its own start */
            "mov %1, %%rcx\n"
            "1: dec %%rcx\n jnz 1b\n"
            /* a block that is nothing but a jz (taken on even counts) */
            "mov %1, %%rcx\n"
            "2: test $1, %%cl\n"
            "3: jz 4f\n"
            " add $3, %0\n"
            "4: dec %%rcx\n jnz 2b\n"
            /* jmp rel8 alone, landing on a jnz rel8 alone */
            " jmp 5f\n"
            " ud2\n"
            "5: jnz 6f\n"
            " add $1, %0\n"
            "6: test %1, %1\n"
            /* jrcxz and loop in 2-byte blocks */
            " mov %1, %%rcx\n"
            "7: jrcxz 8f\n"
            " loop 7b\n"
            "8: add $5, %0\n"
            : "+r"(s)
            : "r"(k)
            : "rcx", "cc");
        just_ret();
        s += ret_one();
        __asm__ volatile(
            /* a call whose return address is a jcc; an indirect jmp in a 2-byte block */
            " call ret_one\n"
            " test $1, %%al\n"
            " jnz 9f\n"
            " ud2\n"
            "9: lea ind_target(%%rip), %%rax\n"
            " call 10f\n"
            " jmp 11f\n"
            "10: jmp *%%rax\n"
            "11: add $7, %0\n"
            : "+r"(s)
            :
            : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "cc", "memory");
    }
    return s;
}

void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 50;
    long w = shorts(2);
    trace_begin();
    long s = shorts(n);
    trace_end();
    printf("sum=%ld\n", s + w);
    return 0;
}
