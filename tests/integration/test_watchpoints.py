"""Watchpoints and hardware breakpoints (issue 9): every test runs with the emulated
(single-stepping) watchpoints on every host, and with the debug registers where the probe sees
them trap (skipped with the probe's reason elsewhere)."""
import os
import re
import signal
import subprocess

import pytest

from harness import (GDB, GDB_PRELUDE, GDB_SYSROOT, Reader, gdb_remote, inferior, line_of, lldb,
                     target_cmd, wait_heartbeat, watch_args)

WATCH = inferior("watch")


def L(tag):
    return line_of("watch", tag)


def server(procs, mode, *args):
    return procs.server(watch_args(mode) + ["--once", "{COMM}", WATCH] + list(args))


def test_watch_reports_each_change_with_the_line_after(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break main", "continue", "watch watched", "continue", "continue",
                         "continue"], prog=WATCH)
    # The first write changes 0 -> 1; the second writes 1 again (GDB stays silent: no change);
    # the next stop is the end of the watchpoint's scope... it is a global: the program exits.
    assert re.search(r"Hardware watchpoint 2: watched\s+Old value = 0\s+New value = 1\s+"
                     r"write_twice \(\) at .*watch\.c:%d" % L("write2"), r.out), r
    assert "exited with code 01" in r.out, r


def test_rwatch_stops_on_the_read(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break main", "continue", "rwatch watched", "continue", "continue", "continue"],
                   prog=WATCH)
    reads = list(re.finditer(r"Hardware read watchpoint 2: watched\s+Value = 1\s+(.*)\n", r.out))
    assert reads, r
    at_read = [m for m in reads if re.search(r"read_once \(\) at .*watch\.c:%d" % L("read"), m.group(1))]
    assert at_read, r
    if watch_mode == "software":
        # Exact read watchpoints: the two writes before never stop it. (On debug registers GDB
        # falls back to an access watchpoint and reports the write that keeps the value 1.)
        assert reads[0] is at_read[0], r
        assert len(reads) == 1, r


def test_awatch_sees_reads_and_writes(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break main", "continue", "awatch watched", "continue", "continue",
                         "continue", "continue"], prog=WATCH)
    hits = re.findall(r"Hardware access \(read/write\) watchpoint 2: watched\s+(Value = 1|Old value = 0\s+New value = 1)",
                      r.out)
    assert len(hits) >= 3, r   # write 0->1, write 1 (value kept), read


def test_watch_in_another_thread(procs, watch_mode):
    srv = server(procs, watch_mode, "thread")
    r = gdb_remote(srv, ["break main", "continue", "watch thread_value", "continue", "continue"],
                   prog=WATCH, timeout=90)
    assert re.search(r"Thread \d+ .*hit Hardware watchpoint 2: thread_value\s+Old value = 0\s+New value = 7", r.out), r
    assert "exited with code 010" in r.out, r


def test_watch_a_block_written_by_memcpy_and_rep_stos(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break copy_block", "continue", "watch block[40]", "continue",
                         "continue", "continue"], prog=WATCH, timeout=90)
    # memcpy of a constant 64 bytes is inlined (string moves); rep stos stops in the middle of
    # its iterations, at the instruction itself, as a debug register does.
    assert re.search(r"Hardware watchpoint 2: block\[40\]\s+Old value = 0 '\\000'\s+New value = 97 'a'\s+"
                     r"0x[0-9a-f]+ in copy_block \(\) at .*watch\.c:%d" % L("memcpy"), r.out), r
    assert re.search(r"Hardware watchpoint 2: block\[40\]\s+Old value = 97 'a'\s+New value = 0 '\\000'\s+"
                     r"0x[0-9a-f]+ in copy_block \(\) at .*watch\.c:%d" % L("stos"), r.out), r


def test_hbreak_is_reported_as_a_hardware_breakpoint(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["hbreak read_once", "continue", "x/i $pc", "continue"], prog=WATCH)
    assert re.search(r"Hardware assisted breakpoint 1 at", r.out), r
    assert re.search(r"Breakpoint 1, read_once \(\) at .*watch\.c:%d" % L("read"), r.out), r
    assert "int3" not in r.out, r        # the emulation's int3 is never shown
    assert "exited with code 01" in r.out, r


def test_watch_limits_are_the_hardware_ones(procs, watch_mode):
    """Four debug registers: a fifth watched word does not fit, in either mode."""
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break main", "continue", "watch block[0]@8", "watch block[8]@8", "watch block[16]@8",
                         "watch block[24]@8", "watch block[32]@8", "continue"], prog=WATCH)
    assert re.search(r"Could not insert hardware watchpoint 6|Could not insert hardware breakpoints", r.out), r


@pytest.mark.branchstub_only
def test_watch_while_recording_btrace(procs, watch_mode):
    srv = server(procs, watch_mode)
    r = gdb_remote(srv, ["break main", "continue", "record btrace", "watch watched", "continue",
                         "info record", "record function-call-history"], prog=WATCH)
    assert re.search(r"Hardware watchpoint 2: watched\s+Old value = 0\s+New value = 1", r.out), r
    assert re.search(r"Recorded \d+ instructions in \d+ functions", r.out), r
    assert re.search(r"\d+\s+main\s*\n\s*\d+\s+write_twice", r.out), r


def test_ctrl_c_while_watching(procs, heartbeat, watch_mode):
    """A program running under a watchpoint that never fires stops at once on ^C."""
    prog = inferior("sleeper")
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", prog, heartbeat])
    argv = [GDB, "-nx", "-batch"]
    for c in GDB_PRELUDE + GDB_SYSROOT + [target_cmd(srv), "break main", "continue",
                                          "watch never_touched", "continue", "print loop_counter > 0",
                                          "kill"]:
        argv += ["-ex", c]
    argv.append(prog)
    g = procs.spawn(argv, stderr=subprocess.STDOUT)
    out = Reader(g.stdout)
    wait_heartbeat(heartbeat, timeout=60)          # it runs under the watchpoint
    os.kill(g.pid, signal.SIGINT)
    g.wait(60)
    assert out.wait_for(r"\[Inferior 1 \(process \d+\) killed\]", 10), out.text
    assert "Program received signal SIGINT, Interrupt." in out.text, out.text
    assert "Hardware watchpoint 2: never_touched" in out.text, out.text
    assert re.search(r"\$1 = 1\b", out.text), out.text


@pytest.mark.branchstub_only
def test_lldb_read_watchpoint(procs, watch_mode):
    """LLDB's `watchpoint set -w read`: exact when emulated; on debug registers the packet is
    refused (x86 cannot watch reads alone; gdbserver refuses it too) and LLDB says so."""
    srv = server(procs, watch_mode)
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port, "b main", "c",
              "watchpoint set variable -w read watched", "c", "process kill"], timeout=90)
    if watch_mode == "software":
        assert re.search(r"Watchpoint created: Watchpoint 1: addr = 0x[0-9a-f]+ size = 4 state = enabled type = r",
                         r.out), r
        assert re.search(r"stop reason = watchpoint 1\s+frame #0: 0x[0-9a-f]+ watch`read_once at watch\.c:%d"
                         % L("read"), r.out), r
    else:
        assert "Watchpoint creation failed" in r.out, r


_COLLECT_STOPS = """
import gdb
n = 0
while True:
    try:
        out = gdb.execute('continue', to_string=True)
    except gdb.error as e:
        print('ERR %s' % e)
        break
    if gdb.selected_inferior().pid == 0:
        print('EXIT')
        break
    print('STOP %d %#x %d' % (n, int(gdb.parse_and_eval('$pc')), int(gdb.parse_and_eval('cells[2]'))))
    n += 1
"""


def _watch_stops(procs, mode, gdb_software):
    prog = inferior("watchmix")
    srv = procs.server(watch_args(mode) + ["--once", "{COMM}", prog])
    pre = ["set can-use-hw-watchpoints 0"] if gdb_software else []
    r = gdb_remote(srv, ["break main", "continue"] + pre + ["watch cells[2]"], prog=prog,
                   pyscript=_COLLECT_STOPS, timeout=300)
    stops = [l for l in r.out.splitlines() if l.startswith(("STOP", "EXIT", "ERR"))]
    assert stops and stops[-1].startswith("EXIT"), r
    return stops, r


def test_watch_stops_equal_gdbs_own_software_watchpoint(procs, watch_mode):
    """cells[2] written directly, through computed pointers, by memcpy (libc's vector code), in
    a callee, mixed with unrelated stores: every stop (pc and value) is the one GDB finds by
    single-stepping every instruction itself and comparing the value."""
    ours, r = _watch_stops(procs, watch_mode, gdb_software=False)
    truth, t = _watch_stops(procs, watch_mode, gdb_software=True)
    assert len(ours) > 20, r
    assert ours == truth, "\n".join(["ours:"] + ours + ["GDB software watchpoint:"] + truth)
