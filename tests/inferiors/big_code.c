/* CFLAGS: -O1 -g0
 * A program with more code than one stub area holds (tests/integration/test_btrace_patch.py):
 * 800 functions of 100 conditional branches each (~1.2 MB of text, ~80,000 block ends; one
 * area is 4x the text plus 1 MiB). Its block ends are patched into a second area instead of
 * staying int3 sites. The asm keeps each `if` a branch (no cmov).
 *   big_code [ROUNDS]     calls every function ROUNDS times (default 3) */
#include <stdio.h>
#include <stdlib.h>

#define S if (v & (1u << (__COUNTER__ % 31))) { __asm__ volatile("" ::: "memory"); acc += __COUNTER__; }
#define S10 S S S S S S S S S S
#define S100 S10 S10 S10 S10 S10 S10 S10 S10 S10 S10
#define F(n) __attribute__((noinline)) unsigned long f##n(unsigned v) { unsigned long acc = 0; S100 return acc; }
#define F10(n) F(n##0) F(n##1) F(n##2) F(n##3) F(n##4) F(n##5) F(n##6) F(n##7) F(n##8) F(n##9)
#define F100(n) F10(n##0) F10(n##1) F10(n##2) F10(n##3) F10(n##4) F10(n##5) F10(n##6) F10(n##7) F10(n##8) F10(n##9)
#define N(n) f##n,
#define N10(n) N(n##0) N(n##1) N(n##2) N(n##3) N(n##4) N(n##5) N(n##6) N(n##7) N(n##8) N(n##9)
#define N100(n) N10(n##0) N10(n##1) N10(n##2) N10(n##3) N10(n##4) N10(n##5) N10(n##6) N10(n##7) N10(n##8) N10(n##9)

F100(0) F100(1) F100(2) F100(3) F100(4) F100(5) F100(6) F100(7)

typedef unsigned long (*fn)(unsigned);
static fn all[] = {N100(0) N100(1) N100(2) N100(3) N100(4) N100(5) N100(6) N100(7)};

__attribute__((noinline)) void trace_end(void) { __asm__ volatile("" ::: "memory"); }

int main(int argc, char** argv) {
  unsigned rounds = argc > 1 ? (unsigned)atoi(argv[1]) : 3;
  unsigned long sum = 0;
  for (unsigned r = 0; r < rounds; r++)
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) sum += all[i](0x55555555u + r + i);
  trace_end();
  printf("sum=%lu\n", sum);
  return 0;
}
