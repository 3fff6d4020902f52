/* A cpuid with an instruction right after it that changes a register
 * (test_gdb_basic.py::test_stepi_over_cpuid_stops_right_after_it): a single step over the cpuid
 * must stop before that instruction runs, on hosts whose hypervisor drops the step's trap too. */
#include <stdio.h>

unsigned cpuid_then_mark(void);
__asm__(".globl cpuid_then_mark\n"
        ".type cpuid_then_mark, @function\n"
        "cpuid_then_mark:\n"
        "  push %rbx\n"
        "  xor %eax, %eax\n"
        "  xor %ecx, %ecx\n"
        "  xor %esi, %esi\n"
        ".globl at_cpuid\n"
        "at_cpuid:\n"
        "  cpuid\n"
        ".globl after_cpuid\n"
        "after_cpuid:\n"
        "  mov $0x1234567, %esi\n"
        ".globl after_mark\n"
        "after_mark:\n"
        "  mov %ebx, %eax\n"
        "  pop %rbx\n"
        "  ret\n");

int main(void) {
  printf("vendor word %#x\n", cpuid_then_mark());
  return 0;
}
