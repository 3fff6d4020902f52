/* patchreplan.c: a patched block end that loses its patch to a later block start.
 *
 * Tests rely on: main(argc, argv) calls trace_begin(), then tail_shared(i == 10) for i < N
 * (N = argv[1], default 2000), trace_end(), prints "sum=<value>" and exits 0. With argv[2]
 * "spin", a second thread made after trace_begin() runs a loop of its own meanwhile (stopped
 * after trace_end()), so block patching explores tail_shared while another thread runs.
 * tail_shared(0) jumps to `mov; add; xor; pop %rbx; pop %rbp; ret`, whose ret a patch covers
 * with the instructions before it. tail_shared(1) takes an indirect jmp (no direct edge shows
 * where) to a block whose direct `jmp` enters the first one at `pop %rbp`: that block start,
 * explored at the 11th call, leaves 2 bytes before the ret, too few for a patch, so the ret
 * becomes an int3 site. The first block, explored before, must then run from a translation,
 * or each later call stops there.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__asm__(".pushsection .text\n"
        ".globl tail_shared\n.type tail_shared,@function\ntail_shared:\n"
        " push %rbp\n push %rbx\n lea 1f(%rip), %rdx\n"
        " test %rdi, %rdi\n jz 3f\n jmp *%rdx\n"
        "3: mov %rdi, %rax\n add $3, %rax\n xor %ecx, %ecx\n pop %rbx\n"
        "2: pop %rbp\n ret\n"
        "1: mov $7, %eax\n pop %rbx\n jmp 2b\n"
        ".size tail_shared,.-tail_shared\n.popsection\n");
long tail_shared(long x);

__attribute__((noinline)) void trace_begin(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline)) void trace_end(void) { __asm__ volatile("" ::: "memory"); }

static volatile int spinning = 1;
static volatile long spins;

static void* spinner(void* arg) {
  while (spinning) spins = spins + 1;
  return arg;
}

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000, sum = 0;
  int spin = argc > 2 && strcmp(argv[2], "spin") == 0;
  pthread_t other;
  trace_begin();
  if (spin) {
    pthread_create(&other, 0, spinner, 0);
    while (spins < 1000) {}  /* it runs */
  }
  for (long i = 0; i < n; ++i) sum += tail_shared(i == 10);
  trace_end();
  if (spin) {
    spinning = 0;
    pthread_join(other, 0);
  }
  printf("sum=%ld\n", sum);
  return 0;
}
