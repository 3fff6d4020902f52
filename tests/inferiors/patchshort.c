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
 *   - a `jmp *%rax` in a 2-byte block that lands on a 1-byte `ret`-ended block chain;
 *   - midjump(i & 1): on odd i an indirect jmp lands in the middle of the bytes a patch of a
 *     short block's end covers (a block start no direct edge shows);
 *   - late_f(), then from i = 3 late_in (only through a function pointer) whose jnz lands in
 *     the middle of late_f's patched block end;
 *   - odd_ends(): `rep ret`, `ret $8`, a get-pc call/pop, `notrack jmp *%rax`, `bnd jmp`,
 *     `jmp *(%rsp)` and `call *disp(%rip)`.
 * Block ends too short to patch keep the software engine's stop; the history must still be
 * the software source's.
 */
#include <stdio.h>
#include <stdlib.h>

__asm__(".pushsection .text\n"
        ".globl just_ret\n.type just_ret,@function\njust_ret:\n ret\n.size just_ret,.-just_ret\n"
        ".globl ret_one\n.type ret_one,@function\nret_one:\n mov $1, %eax\n ret\n.size ret_one,.-ret_one\n"
        ".globl ind_target\n.type ind_target,@function\nind_target:\n jmp 1f\n1: ret\n.size ind_target,.-ind_target\n.popsection\n");
/* midjump(sel): sel = 0 falls into block 1 (add; cmp; jne: too short alone, so a patch of
 * its end also covers the cmp and the add); sel != 0 enters that block at the cmp, through an
 * indirect jmp no direct edge shows: a block start in the middle of those bytes. */
__asm__(".pushsection .text\n"
        ".globl midjump\n.type midjump,@function\nmidjump:\n"
        " xor %eax, %eax\n mov $3, %ecx\n mov $3, %edx\n lea 2f(%rip), %rsi\n"
        " test %rdi, %rdi\n jz 1f\n jmp *%rsi\n"
        "1: add $1, %rcx\n"
        "2: cmp %edx, %ecx\n jne 3f\n inc %eax\n"
        "3: ret\n.size midjump,.-midjump\n.popsection\n");
int midjump(long sel);
/* late_in: reached only through a function pointer; jumps (direct) into the middle of
 * late_f's short block, after late_f's end was patched. */
__asm__(".pushsection .text\n"
        ".globl late_f\n.type late_f,@function\nlate_f:\n"
        " xor %eax, %eax\n mov $3, %ecx\n mov $3, %edx\n"
        " add $1, %rcx\n"
        "late_mid: cmp %edx, %ecx\n jne 3f\n inc %eax\n"
        "3: ret\n.size late_f,.-late_f\n"
        ".globl late_in\n.type late_in,@function\nlate_in:\n"
        " xor %eax, %eax\n mov $3, %ecx\n mov $3, %edx\n test %rdi, %rdi\n jnz late_mid\n ret\n"
        ".size late_in,.-late_in\n.popsection\n");
int late_f(void);
int late_in(long x);
int (*volatile late_ptr)(long) = late_in;
/* odd_ends: `rep ret`, `ret $8`, a get-pc `call 1f; 1: pop`, `notrack jmp *%rax`,
 * `bnd jmp`, `jmp *(%rsp)`-style memory targets and `call *disp(%rip)`. */
__asm__(".pushsection .text\n"
        ".globl rep_ret\n.hidden rep_ret\n.type rep_ret,@function\nrep_ret:\n mov $2, %eax\n rep ret\n.size rep_ret,.-rep_ret\n"
        ".globl ret_imm\n.hidden ret_imm\n.type ret_imm,@function\nret_imm:\n mov $4, %eax\n ret $8\n.size ret_imm,.-ret_imm\n"
        ".globl odd_ends\n.type odd_ends,@function\nodd_ends:\n"
        " push %rbx\n xor %ebx, %ebx\n"
        " call rep_ret\n add %eax, %ebx\n"
        " push $0\n call ret_imm\n add %eax, %ebx\n"
        " call 1f\n1: pop %rax\n lea 2f-1b(%rax), %rax\n notrack jmp *%rax\n ud2\n"
        "2: bnd jmp 3f\n ud2\n"
        "3: lea 4f(%rip), %rax\n push %rax\n jmp *(%rsp)\n ud2\n"
        "4: pop %rax\n call *odd_ptr(%rip)\n add %eax, %ebx\n"
        " mov %ebx, %eax\n pop %rbx\n ret\n.size odd_ends,.-odd_ends\n.popsection\n");
int rep_ret(void);
int odd_ends(void);
int (*volatile odd_ptr)(void) = rep_ret;
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
        s += midjump(i & 1);
        s += late_f();
        if (i > 2)
            s += late_ptr(i & 1);
        s += odd_ends();
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
