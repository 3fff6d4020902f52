"""`branchstub --probe` tells the truth about this machine: its debug-register answer agrees
with what native GDB (no server at all) sees when it sets a hardware watchpoint."""
import os
import re
import subprocess
import tempfile

from harness import GDB, debug_registers_trap, server_probe


def native_gdb_watch_fires():
    """Like ../shared/gdb-testsuite/host-fingerprint.sh: a native `watch` on a global."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "w.c")
        with open(src, "w") as f:
            f.write("volatile int v;\nint main(void){for(int i=0;i<3;i++) v=i; return 0;}\n")
        exe = os.path.join(d, "w")
        subprocess.run(["gcc", "-g", "-O0", src, "-o", exe], check=True, timeout=60)
        out = subprocess.run([GDB, "-nx", "-batch", "-ex", "break main", "-ex", "run", "-ex", "watch v",
                              "-ex", "continue", exe], capture_output=True, text=True, timeout=60).stdout
        return "New value" in out, out


def test_probe_lists_every_mechanism_with_a_reason():
    probe = server_probe()
    for name in ("perf BTS", "Intel PT", "debug registers", "BTF (PTRACE_SINGLEBLOCK)",
                 "msr_helper (LBR module)"):
        assert name in probe, probe
        assert probe[name][1], (name, probe)


def test_probe_debug_registers_agree_with_native_gdb():
    works, why = debug_registers_trap()
    fires, out = native_gdb_watch_fires()
    assert works == fires, "probe says %r (%s) but native gdb's watch %s:\n%s" % (
        works, why, "fires" if fires else "never fires", out)
    if not works:
        assert re.search(r"no trap", why), why


FAULT_CHECK = r"""
#include <asm/prctl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
static void on_segv(int s) { (void)s; write(1, "faulted\n", 8); _exit(0); }
int main(int argc, char** argv) {
  signal(SIGSEGV, on_segv);
  int cpuid = strcmp(argv[1], "cpuid") == 0;
  long r = cpuid ? syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0L) : prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
  if (r != 0) { perror("request"); return 0; }
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (cpuid) __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
  else __asm__ volatile("rdtsc" : "=a"(a), "=d"(d));
  puts("ran");
  return 0;
}
"""


def run_c(source, args):
    """Compiles `source` and runs it with `args` (its CompletedProcess, text)."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "check.c")
        with open(src, "w") as f:
            f.write(source)
        exe = os.path.join(d, "check")
        subprocess.run(["gcc", "-O0", src, "-o", exe], check=True, timeout=60)
        return subprocess.run([exe] + args, capture_output=True, text=True, timeout=30)


def test_probe_instruction_faults_agree_with_a_native_check():
    """The rdtsc trap and CPUID faulting lines say what a program asking for them sees."""
    probe = server_probe()
    for line, arg in (("rdtsc trap (PR_SET_TSC)", "rdtsc"), ("CPUID faulting", "cpuid")):
        out = run_c(FAULT_CHECK, [arg])
        native = "faulted" in out.stdout
        works, why = probe[line]
        assert works == native, (line, probe[line], out.stdout, out.stderr)
        assert why, probe[line]
    # Most hosts trap rdtsc on request, but some hypervisors ignore PR_SET_TSC (an AMD EPYC
    # guest: "succeeded but rdtsc ran without a fault"); record/replay does not depend on it
    # (its decoder stops before every rdtsc: test_record_replay.py's tsc values).
    if not probe["rdtsc trap (PR_SET_TSC)"][0]:
        assert "without a fault" in probe["rdtsc trap (PR_SET_TSC)"][1], probe


def test_probe_says_whether_a_step_over_cpuid_stops_after_it():
    """The "single step over cpuid" line says what a native single step over cpuid does."""
    works, why = server_probe()["single step over cpuid"]
    out = run_c(STEP_CHECK, []).stdout
    assert ("stepped to +2" in out) == works, (why, out)
    assert why


STEP_CHECK = r"""
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>
extern char at_cpuid[];
__asm__(".globl at_cpuid\nat_cpuid: cpuid\n nop\n nop\n ret\n");
int main(void) {
  pid_t c = fork();
  if (c == 0) {
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    _exit(0);
  }
  int st;
  waitpid(c, &st, 0);
  struct user_regs_struct r;
  ptrace(PTRACE_GETREGS, c, 0, &r);
  r.rip = (uint64_t)at_cpuid;
  r.rax = 0;
  ptrace(PTRACE_SETREGS, c, 0, &r);
  ptrace(PTRACE_SINGLESTEP, c, 0, 0);
  waitpid(c, &st, 0);
  ptrace(PTRACE_GETREGS, c, 0, &r);
  printf("stepped to +%ld\n", (long)(r.rip - (uint64_t)at_cpuid));
  kill(c, SIGKILL);
  return 0;
}
"""
