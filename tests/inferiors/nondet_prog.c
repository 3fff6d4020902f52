/* Record and replay of instructions whose results differ between runs
 * (tests/integration/test_record_replay_instructions.py): cpuid (vendor, leaf 1's ebx, which
 * holds the APIC id of the CPU it ran on), three rdrand values, an rdseed and an rdpid where
 * the CPU has them. Prints them and stops at values_ready() where GDB reads the same values.
 * rdrand_site is the address of the first rdrand (its value lands in rax). */
#include <cpuid.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

char vendor[13];
unsigned leaf1_ebx;
int have_rdrand, have_rdseed, have_rdpid;
unsigned long long rnd[3];
unsigned long long seed;
unsigned long long pid_value;

__attribute__((noinline)) unsigned long long one_rdrand(void) {
  unsigned long long v;
  unsigned char ok;
  do {
    __asm__ volatile(".globl rdrand_site\nrdrand_site: rdrand %%rax\n\tsetc %1" : "=a"(v), "=qm"(ok) : : "cc");
  } while (!ok);
  return v;
}

__attribute__((noinline)) void values_ready(void) { __asm__ volatile("" ::: "memory"); }

int main(void) {
  unsigned a, b, c, d;
  __cpuid(0, a, b, c, d);
  memcpy(vendor, &b, 4);
  memcpy(vendor + 4, &d, 4);
  memcpy(vendor + 8, &c, 4);
  unsigned max_leaf = a;
  __cpuid(1, a, b, c, d);
  leaf1_ebx = b;
  have_rdrand = (c >> 30) & 1;
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    have_rdseed = (b >> 18) & 1;
    have_rdpid = (c >> 22) & 1;
  }
  for (int i = 0; i < 3 && have_rdrand; ++i) rnd[i] = one_rdrand();
  if (have_rdseed) {
    unsigned char ok = 0;
    while (!ok) __asm__ volatile("rdseed %0\n\tsetc %1" : "=r"(seed), "=qm"(ok) : : "cc");
  }
  if (have_rdpid) __asm__ volatile("rdpid %0" : "=r"(pid_value));
  printf("vendor=%s\nleaf1_ebx=%u\nrdrand=%d\nrnd0=%llu\nrnd1=%llu\nrnd2=%llu\nrdseed=%d\nseed=%llu\nrdpid=%d\n",
         vendor, leaf1_ebx, have_rdrand, rnd[0], rnd[1], rnd[2], have_rdseed, seed, have_rdpid);
  fflush(stdout);
  values_ready();
  return 0;
}
