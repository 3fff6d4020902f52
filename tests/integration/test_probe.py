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
