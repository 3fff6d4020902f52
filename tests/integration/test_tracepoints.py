"""Tracepoints (issue 31): GDB's `trace`, `actions`/`collect`, `tstart`, `tfind`, `tstatus`,
trace state variables, pass counts, while-stepping, `tsave` and `target tfile`, and the MI
commands Eclipse CDT's tracepoint views use, served by the server as gdbserver serves them: each
hit is collected in the server without a stop GDB hears of; a selected frame's registers and
memory are what was collected there (the rest <unavailable>)."""
import os
import re

import pytest

from harness import IS_GDBSERVER, gdb, gdb_remote, inferior, line_of
from mi_client import MiSession

PROG = inferior("tracepoints")


def L(tag):
    return line_of("tracepoints", tag)


def server(procs, *prog_args):
    return procs.server(["--once", "{COMM}", PROG] + [str(a) for a in prog_args])


# Stop at main, define, run to done() with the trace on, stop tracing.
def traced_run(defs, after=(), start="break main", after_start=()):
    return [start, "continue"] + list(defs) + ["break done", "tstart"] + list(after_start) + ["continue", "tstop"] + list(after)


def run(srv, cmds, **kw):
    """A GDB session on srv with cmds from a script (`actions` reads its list from the script,
    not from -ex commands)."""
    return gdb_remote(srv, [], prog=PROG, script="\n".join(cmds) + "\n", **kw)


def frames_collected(out):
    m = re.search(r"(?:Collected|Buffer contains) (\d+) trace frames", out)
    return int(m.group(1)) if m else None


def test_collect_locals_globals_and_registers_then_tfind(procs):
    srv = server(procs)
    r = run(srv, traced_run(
        ["trace tracepoints.c:%d" % L("sample"), "actions", "collect i, tag, total, $regs", "end"],
        ["tstatus", "tfind start", "print i", "print total", "print history[0]", "info registers rip",
         "tfind 4", "print i", "tfind none", "info tracepoints", "continue"]))
    assert "Trace stopped by a tstop command" in r.out, r
    assert frames_collected(r.out) == 10, r
    assert "Found trace frame 0, tracepoint 2" in r.out, r
    assert "$1 = 0" in r.out, r                      # i at the first hit
    assert re.search(r"\$3 = <unavailable>", r.out), r   # history was not collected
    assert re.search(r"rip\s+0x[0-9a-f]+\s+0x[0-9a-f]+ <sample\+\d+>", r.out), r
    assert "Found trace frame 4, tracepoint 2" in r.out and "$4 = 4" in r.out, r
    if not IS_GDBSERVER:  # gdbserver 13 answers qTP in decimal, which GDB reads as hex (16 for 10)
        assert re.search(r"tracepoint already hit 10 times", r.out), r
    # The program never stopped at the tracepoint: it ran on to done().
    assert re.search(r"Breakpoint \d+, done \(\)", r.out), r
    assert "exited normally" in r.out, r


def test_tfind_pc_tracepoint_range_and_uncollected_memory(procs):
    srv = server(procs)
    r = run(srv, traced_run(
        ["trace tracepoints.c:%d" % L("sample"), "actions", "collect i", "end",
         "trace tracepoints.c:%d" % L("return"), "actions", "collect history, label", "end"],
        ["tstatus", "tfind start", "tfind tracepoint 3", "print history[1]", "print label", "print i",
         "tfind tracepoint 3", "print label", "tfind line tracepoints.c:%d" % L("sample"),
         "tfind end", "kill"]))
    assert frames_collected(r.out) == 20, r
    assert "Found trace frame 0, tracepoint 2" in r.out, r
    assert "Found trace frame 1, tracepoint 3" in r.out, r
    assert "$1 = 0" in r.out, r                      # history[1] before the loop wrote it
    assert '$2 = "sample-0"' in r.out, r
    assert "$3 = <unavailable>" in r.out, r          # i not collected at tracepoint 2
    assert "Found trace frame 3, tracepoint 3" in r.out and '$4 = "sample-1"' in r.out, r
    assert "Found trace frame 4, tracepoint 2" in r.out, r


def test_condition_and_passcount_stop_the_trace(procs):
    srv = server(procs)
    r = run(srv, traced_run(
        ["trace tracepoints.c:%d if i %% 3 == 0" % L("sample"), "passcount 2", "actions", "collect i", "end"],
        ["tstatus", "tfind start", "print i", "tfind", "print i", "tfind", "kill"]))
    assert re.search(r"Trace stopped by tracepoint 2", r.out), r
    assert frames_collected(r.out) == 2, r
    assert "$1 = 0" in r.out and "$2 = 3" in r.out, r
    assert "Target failed to find requested trace frame" in r.out or "No trace frame found" in r.out, r


def test_trace_state_variables(procs):
    srv = server(procs)
    r = run(srv, traced_run(
        ["tvariable $hits = 100", "trace tracepoints.c:%d" % L("sample"), "actions",
         "teval $hits = $hits + 1", "collect $hits", "end"],
        ["tstatus", "print $hits", "tfind 3", "print $hits", "tfind none", "info tvariables", "kill"]))
    assert frames_collected(r.out) == 10, r
    assert "$1 = 110" in r.out, r                    # the live value after 10 hits
    assert "$2 = 104" in r.out, r                    # what frame 3 collected
    assert re.search(r"\$hits\s+100\s+110", r.out), r


def test_while_stepping_collects_each_step(procs):
    srv = server(procs, 3)
    r = run(srv, traced_run(
        ["trace tracepoints.c:%d" % L("sample"), "actions", "collect i", "while-stepping 4", "collect $rip", "end",
         "end"],
        ["tstatus", "tfind start", "tfind", "print $pc", "tfind", "print $pc", "info tracepoints", "kill"]))
    # Each of the 3 hits: its frame and 4 stepping frames.
    assert frames_collected(r.out) == 15, r
    pcs = [int(x, 16) for x in re.findall(r"\$\d+ = \(void \(\*\)\(\)\) (0x[0-9a-f]+)", r.out)]
    assert len(pcs) == 2 and pcs[0] < pcs[1], r      # stepping forwards through sample()
    assert "while-stepping 4" in r.out, r


def test_tracepoint_and_breakpoint_at_one_address(procs):
    srv = server(procs, 3)
    where = "tracepoints.c:%d" % L("sample")
    r = run(srv, ["break main", "continue", "trace " + where, "actions", "collect i", "end", "break done",
                  "tstart", "break " + where, "continue", "print i", "continue", "print i", "delete 4",
                  "continue", "tstop", "tstatus", "tfind 2", "print i", "tfind none", "continue"])
    assert "$1 = 0" in r.out and "$2 = 1" in r.out, r
    assert frames_collected(r.out) == 3, r
    assert "$3 = 2" in r.out, r
    assert "exited normally" in r.out, r


def test_threads_every_hit_collected(procs):
    srv = server(procs, 25, 3)
    r = run(srv, traced_run(["trace sample", "actions", "collect tag", "end"], ["tstatus", "kill"]),
                   timeout=120)
    assert frames_collected(r.out) == 100, r


def test_circular_buffer_keeps_the_newest(procs):
    srv = server(procs, 200)
    r = run(srv, ["set trace-buffer-size 20000", "set circular-trace-buffer on"] + traced_run(
        ["trace tracepoints.c:%d" % L("sample"), "actions", "collect i", "end"],
        ["tstatus", "tfind end", "tfind start", "print i", "kill"]))
    n = frames_collected(r.out)
    assert n is not None and 0 < n < 200, r
    assert "Trace buffer is circular" in r.out and "of 200 created total" in r.out, r
    assert "$1 = %d" % (200 - n) in r.out, r          # the oldest kept frame


def test_tsave_then_target_tfile(procs, tmp_path):
    srv = server(procs)
    tf = str(tmp_path / "run.tf")
    r = run(srv, traced_run(["trace tracepoints.c:%d" % L("sample"), "actions", "collect i, total", "end"],
                            ["print &total", "info tracepoints", "tsave " + tf, "kill"]))
    m = re.search(r"\(volatile long \*\) (0x[0-9a-f]+) <total>", r.out)
    site = re.search(r"tracepoint\s+keep y\s+(0x[0-9a-f]+)", r.out)
    assert m and site and os.path.getsize(tf) > 0, r
    # A fresh GDB reads the file GDB wrote from our qTBuffer data (the program is a PIE, so
    # addresses are given as they were at run time).
    r2 = gdb(["target tfile " + tf, "tstatus", "tfind 5", "x/gd " + m.group(1), "print/x $rip"], prog=PROG)
    assert "Collected 10 trace frames" in r2.out, r2
    assert re.search(r"Found trace frame 5, tracepoint \d+", r2.out), r2
    assert re.search(r":\s+30\n", r2.out), r2           # total = 0+1+4+9+16 at frame 5's hit
    assert "= %s" % hex(int(site.group(1), 16)) in r2.out, r2


def test_mi_trace_commands_as_an_ide_sends_them(procs, mi):
    srv = server(procs)
    s = mi(PROG)
    s.ok("-gdb-set mi-async on")
    s.ok("-target-select remote 127.0.0.1:%d" % srv.port, timeout=60)
    s.ok("-break-insert main")
    assert 'reason="breakpoint-hit"' in s.run("-exec-continue"), s.text()
    result, _ = s.ok("-break-insert -a tracepoints.c:%d" % L("sample"))
    assert 'type="tracepoint"' in result, s.text()
    s.ok('-break-commands 2 "collect i" "collect $rip" "end"')
    s.ok("-trace-define-variable $count 0")
    s.ok("-break-insert done")
    s.ok("-trace-start")
    assert 'func="done"' in s.run("-exec-continue"), s.text()
    status, _ = s.ok("-trace-status")
    assert 'running="1"' in status and 'frames="10"' in status, s.text()
    stop, _ = s.ok("-trace-stop")
    assert 'stop-reason="request"' in stop and 'frames="10"' in stop, s.text()
    found, _ = s.ok("-trace-find frame-number 2")
    assert 'found="1"' in found and 'traceframe="2"' in found, s.text()
    collected, _ = s.ok("-trace-frame-collected")
    assert re.search(r'explicit-variables=\[\{name="i",value="2"\}\]', collected), s.text()
    found, _ = s.ok("-trace-find none")
    assert 'found="0"' in found, s.text()
    tvars, _ = s.ok("-trace-list-variables")
    assert 'name="$count"' in tvars, s.text()


# ---- fast tracepoints (ftrace): jump pads the server writes, no agent library ----

def fast_site():
    return "tracepoints.c:%d" % L("fast")   # its first instruction is 7 bytes: room for the jump


@pytest.mark.skipif(IS_GDBSERVER, reason="gdbserver's ftrace needs libinproctrace.so loaded into the program")
def test_ftrace_collects_inside_the_program(procs):
    srv = server(procs, 50)
    r = run(srv, traced_run(
        ["ftrace %s if i %% 10 == 3" % fast_site(), "actions", "collect i, tag, hits_seen, $regs", "end"],
        ["monitor tracepoints", "tstatus", "tfind 0", "print i", "print hits_seen", "print/x $rip",
         "tfind 4", "print i", "tfind none", "info tracepoints", "print hits_seen", "continue"],
        after_start=["monitor tracepoints"]))
    assert "Fast tracepoint 2 at" in r.out, r
    assert "jump pad (collected in the program)" in r.out, r
    assert frames_collected(r.out) == 5, r
    assert "$1 = 3" in r.out and "$2 = 3" in r.out, r   # hits_seen before the displaced `hits_seen++`
    site = re.search(r"Fast tracepoint 2 at (0x[0-9a-f]+)", r.out).group(1)
    assert "$3 = %s" % site in r.out, r                  # the frame's pc is the tracepoint's
    assert "$4 = 43" in r.out, r
    assert re.search(r"tracepoint already hit 5 times", r.out), r   # the hits whose condition held
    assert "$5 = 50" in r.out and "exited normally" in r.out, r   # the program ran on unharmed


@pytest.mark.skipif(IS_GDBSERVER, reason="gdbserver's ftrace needs libinproctrace.so loaded into the program")
def test_ftrace_threads_and_a_full_area(procs):
    # 4 threads x 3000 hits with a small buffer: the pads' area fills again and again (the
    # server drains it at each full trap); circular keeps the newest frames, all hits counted.
    srv = server(procs, 3000, 3)
    r = run(srv, ["set trace-buffer-size 30000", "set circular-trace-buffer on"] + traced_run(
        ["ftrace %s" % fast_site(), "actions", "collect i, tag", "end"],
        ["tstatus", "monitor tracepoints", "print hits_seen", "continue"]), timeout=120)
    assert "of 12000 created total" in r.out, r
    assert "12000 hits, jump pad" in r.out, r
    assert "$1 = 12000" in r.out, r
    assert "exited normally" in r.out, r


@pytest.mark.skipif(IS_GDBSERVER, reason="gdbserver's ftrace needs libinproctrace.so loaded into the program")
def test_ftrace_with_stepping_and_a_breakpoint_there(procs):
    # Stepping through the site and a GDB breakpoint on it: the site is an int3 then, and each
    # arrival is collected once; the program's code reads as its own throughout.
    srv = server(procs, 4)
    r = run(srv, ["break main", "continue", "ftrace " + fast_site(), "actions", "collect i", "end", "break done",
                  "tstart", "break sample", "continue", "next", "x/i $pc", "delete 4", "break " + fast_site(),
                  "continue", "x/2i $pc", "delete 5", "continue", "tstop", "tstatus", "tfind 0", "print i",
                  "tfind 1", "print i", "tfind 3", "print i", "tfind none", "continue"])
    assert frames_collected(r.out) == 4, r
    assert "$1 = 0" in r.out and "$2 = 1" in r.out and "$3 = 3" in r.out, r
    assert "lock addq" in r.out and "jmp" not in r.out, r   # the program's own code, never the jump
    assert "exited normally" in r.out, r


@pytest.mark.parametrize("command", ["trace", "ftrace"])
def test_tracepoint_and_record_btrace_keep_the_history_exact(procs, command):
    # A hit inside a recorded region changes nothing in the history; while branches are
    # recorded a fast site stays an int3 (a pad's jumps would enter the history): the call
    # history is the one recorded without the tracepoint.
    if command == "ftrace" and IS_GDBSERVER:
        pytest.skip("gdbserver's ftrace needs libinproctrace.so loaded into the program")

    def history(with_tracepoint):
        srv = server(procs, 6)
        tp = [command + " " + fast_site(), "actions", "collect i", "end", "tstart"] if with_tracepoint else []
        r = run(srv, ["set record function-call-history-size 100000", "break main", "continue", "record btrace",
                      "break done"] + tp + ["continue", "tstatus", "record function-call-history", "record stop"])
        return r, re.findall(r"^\d+\s+(\S+)$", r.out, re.M)

    r, traced = history(True)
    assert frames_collected(r.out) == 6, r
    _, plain = history(False)
    assert "sample" in traced and traced == plain, (traced, plain)
