"""GDB 13 `target remote` basics against the server under test (issue 2)."""
import re

import pytest

from harness import (IS_GDBSERVER, cpu_has, gdb_remote, inferior, line_of, server_probe, wait_gone,
                     wait_heartbeat, wait_until, watch_args)

BASIC = inferior("basic")


def L(tag):
    return "basic.c:%d" % line_of("basic", tag)


@pytest.fixture
def basic_server(procs):
    return procs.server(["--once", "{COMM}", BASIC])


def test_break_function_and_line_continue_exit_code(basic_server):
    r = gdb_remote(basic_server, [
        "break compute", "break " + L("marker-body"),
        "continue", "continue", "delete 1", "continue",
        "print counter", "print global_value", "continue"], prog=BASIC, sysroot=False)
    out = r.out
    assert re.search(r"Breakpoint 1, compute \(x=0\) at .*basic\.c:%d" % line_of("basic", "compute-body"), out), r
    assert "Breakpoint 1, compute (x=1)" in out, r
    assert re.search(r"Breakpoint 2, marker \(\) at .*basic\.c:%d" % line_of("basic", "marker-body"), out), r
    assert re.search(r"\$1 = 5\b", out), r
    assert re.search(r"\$2 = 42\b", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out), r
    assert basic_server.wait_exit(10) is not None, "server did not exit after the program (--once)"
    assert basic_server.stdout.wait_for(r"sum=25 counter=5", 5), "program output missing"


def test_backtrace_through_libc(basic_server):
    r = gdb_remote(basic_server, ["break by_value", "continue", "bt"], prog=BASIC)
    bt = r.out[r.out.index("#0"):]
    assert re.search(r"#0 +by_value \(", bt), r
    assert re.search(r"#\d+ +.*(qsort|msort)", bt), r        # frames inside libc
    assert re.search(r"#\d+ +0x[0-9a-f]+ in main \(\) at .*basic\.c:%d" % line_of("basic", "after-loop"), bt), r


def test_info_registers(basic_server):
    cmds = ["break compute", "continue", "info registers", "info registers rip", "p $xmm0"]
    if cpu_has("avx"):
        cmds.append("info registers ymm0")
    if cpu_has("avx512f"):
        cmds += ["info registers zmm0", "info registers k1"]
    r = gdb_remote(basic_server, cmds, prog=BASIC)
    out = r.out
    for reg in ("rax", "rbx", "rsp", "rbp", "eflags", "cs"):
        assert re.search(r"^%s +0x" % reg, out, re.M), (reg, r)
    assert re.search(r"^rip +0x[0-9a-f]+ +0x[0-9a-f]+ <compute\+\d+>", out, re.M), r
    assert "v4_int32" in out, r
    if cpu_has("avx"):
        assert re.search(r"^ymm0 +\{.*v8_int32", out, re.M), r
    if cpu_has("avx512f"):
        assert re.search(r"^zmm0 +\{.*v16_int32", out, re.M), r
        assert re.search(r"^k1 +0x", out, re.M), r


def test_print_locals_globals_examine_set_var(basic_server):
    r = gdb_remote(basic_server, [
        "break " + L("compute-return"), "continue", "continue", "continue",
        "print x", "print doubled", "print counter", "info locals",
        "up", "print local_sum", "print i", "x/4xw values", "print values",
        "set var counter = 100", "print counter", "print global_value = 99",
        "delete", "continue"], prog=BASIC)
    out = r.out
    assert re.search(r"\$1 = 2\b", out), r
    assert re.search(r"\$2 = 4\b", out), r
    assert re.search(r"\$3 = 3\b", out), r
    assert "doubled = 4" in out, r
    assert re.search(r"\$4 = 4\b", out), r            # local_sum = 1 + 3
    assert re.search(r"\$5 = 2\b", out), r            # i
    assert re.search(r"0x0+4\s+0x0+2\s+0x0+3\s+0x0+1", out), r
    assert re.search(r"\$6 = \{4, 2, 3, 1\}", out), r
    assert re.search(r"\$7 = 100\b", out), r
    assert re.search(r"\$8 = 99\b", out), r
    assert "exited with code 07" in out, r
    # The write reached the inferior: 100 + compute(3) + compute(4).
    assert basic_server.stdout.wait_for(r"sum=25 counter=102", 10), basic_server.stdout.text


def test_stepping_commands(basic_server):
    r = gdb_remote(basic_server, [
        "tbreak " + L("loop-body"), "continue",
        "step",                                    # into compute (x=0)
        "next",                                    # to counter++
        "stepi", "p/x $pc", "nexti", "p/x $pc", "x/i $pc",
        "finish",                                  # back in main, value 1
        "until " + L("call-marker"),
        "advance marker",
        "info frame"], prog=BASIC)
    out = r.out
    assert re.search(r"compute \(x=0\) at .*basic\.c:%d" % line_of("basic", "compute-body"), out), r
    assert re.search(r"^%d\s.*LINE:counter-inc" % line_of("basic", "counter-inc"), out, re.M), r
    pcs = re.findall(r"^\$\d+ = (0x[0-9a-f]+)", out, re.M)
    assert len(pcs) == 2 and pcs[0] != pcs[1], r
    assert re.search(r"=> 0x[0-9a-f]+ <compute\+\d+>:", out), r
    assert re.search(r"in main \(\) at .*basic\.c:%d" % line_of("basic", "loop-body"), out), r
    assert re.search(r"Value returned is \$\d+ = 1\b", out), r
    assert re.search(r"main \(\) at .*basic\.c:%d" % line_of("basic", "call-marker"), out), r
    assert re.search(r"marker \(\) at .*basic\.c:%d" % line_of("basic", "marker-body"), out), r


def test_watchpoints(procs, watch_mode):
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, [
        "break main", "continue",
        "watch counter", "continue", "continue", "delete 2",
        "rwatch counter", "continue", "delete 3",
        "awatch global_value", "continue", "delete 4",
        "continue"], prog=BASIC)
    out = r.out
    assert re.search(r"Hardware watchpoint 2: counter\s+Old value = 0\s+New value = 1", out), r
    assert re.search(r"Hardware watchpoint 2: counter\s+Old value = 1\s+New value = 2", out), r
    assert re.search(r"Hardware read watchpoint 3: counter\s+Value = 2", out), r
    assert re.search(r"Hardware access \(read/write\) watchpoint 4: global_value\s+"
                     r"(Old value = 42\s+New value = 43|Value = 4[23])", out), r
    assert "exited with code 07" in out, r


def test_hbreak(procs, watch_mode):
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["hbreak marker", "hbreak " + L("compute-return"),
                                  "continue", "delete 2", "continue", "continue"], prog=BASIC)
    out = r.out
    assert "Hardware assisted breakpoint 1 at" in out, r
    assert re.search(r"Breakpoint 2, compute \(x=0\)", out), r
    assert re.search(r"Breakpoint 1, marker \(\)", out), r
    assert "exited with code 07" in out, r


def test_kill(basic_server, procs):
    r = gdb_remote(basic_server, ["break marker", "continue", "info inferiors", "kill",
                                  "info inferiors"], prog=BASIC)
    m = re.search(r"process (\d+)", r.out)
    assert m, r
    assert re.search(r"\[Inferior 1 \(process %s\) killed\]" % m.group(1), r.out), r
    wait_gone(int(m.group(1)))
    assert basic_server.wait_exit(10) is not None, "server still running after kill (--once)"


def test_detach_program_runs_on(procs, heartbeat):
    prog = inferior("sleeper")
    srv = procs.server(["--once", "{COMM}", prog, heartbeat])
    r = gdb_remote(srv, ["break tick", "continue", "print loop_counter", "detach"], prog=prog)
    m = re.search(r"\[Inferior 1 \(process (\d+)\) detached\]", r.out)
    assert m, r
    procs.allowed.add(int(m.group(1)))
    assert re.search(r"\$1 = 1\b", r.out), r
    first = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=first)     # keeps running after the detach
    # (gdbserver then waits for the detached program to exit; the teardown ends both.)


def test_libraries_when_the_loader_is_the_program(procs):
    """ld.so started as the program: the main program has no DT_DEBUG, so the libraries-svr4
    read fails (E01, as with gdbserver) and GDB finds the loader's r_debug itself, and with it
    libc. An empty list instead would hide every library."""
    signals = inferior("signals")
    loader = "/lib64/ld-linux-x86-64.so.2"
    srv = procs.server(["--once", "{COMM}", loader, signals])
    r = gdb_remote(srv, ["continue", "info sharedlibrary", "kill"], prog=signals)
    out = r.out
    assert "Program received signal SIGUSR1" in out, r
    assert re.search(r"^0x[0-9a-f]+ +0x[0-9a-f]+ +Yes .*/libc\.so\.6$", out, re.M), r


def test_stepi_over_cpuid_stops_right_after_it(procs):
    # Some hypervisors drop the single step's trap after the cpuid they emulate, so the step
    # also runs the next instruction (the probe's "single step over cpuid" line); the server
    # then does that step itself. Either way GDB's stepi must stop before `mov $0x1234567,%esi`.
    works, detail = server_probe().get("single step over cpuid", (True, ""))
    if IS_GDBSERVER and not works:
        pytest.skip("gdbserver runs the next instruction too on this host: " + detail)
    prog = inferior("cpuid_step")
    server = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(server, [
        "break *at_cpuid", "continue", "stepi",
        "p $pc == &after_cpuid", "p/x $esi", "p/x $ebx",
        "stepi", "p $pc == &after_mark", "p/x $esi", "continue"], prog=prog)
    vendor = {"AuthenticAMD": 0x68747541, "GenuineIntel": 0x756e6547}
    with open("/proc/cpuinfo") as f:
        word = next((vendor.get(line.split(":")[1].strip()) for line in f if line.startswith("vendor_id")), None)
    assert re.search(r"\$1 = 1\b", r.out), r           # stopped right after the cpuid
    assert re.search(r"\$2 = 0x0\b", r.out), r         # the mov after it has not run
    if word:
        assert re.search(r"\$3 = %#x\b" % word, r.out), r  # leaf 0's ebx: the vendor's first word
    assert re.search(r"\$4 = 1\b", r.out), r
    assert re.search(r"\$5 = 0x1234567\b", r.out), r
    assert "exited normally" in r.out, r
