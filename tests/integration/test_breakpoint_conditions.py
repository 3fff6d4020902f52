"""Breakpoint conditions and dprintf evaluated in the server (issue 17, GDB's agent
expressions): with `set breakpoint condition-evaluation target` GDB sends the conditions with
the Z packet and is told only of hits where one holds; with `set dprintf-style agent` the
server prints. Every test checks that GDB really used the target (`(target evals)`,
`agent-printf` in `info breakpoints`): GDB falls back to evaluating on its side when the server
does not advertise ConditionalBreakpoints+ / BreakpointCommands+, and would count every hit."""
import re

import pytest

from harness import GDB_SCRIPT, IS_GDBSERVER, gdb_remote, inferior, line_of, watch_args

CONDS = inferior("conds")
TARGET_EVAL = ["set breakpoint condition-evaluation target"]


def L(tag):
    return line_of("conds", tag)


def server(procs, *args, prog_args=(), opts=()):
    return procs.server(list(opts) + ["--once", "{COMM}", CONDS] + [str(a) for a in prog_args])


def stops_at_visit(out):
    """(i, tag) of every stop GDB reported in visit()."""
    return [(int(m.group(1)), int(m.group(2)))
            for m in re.finditer(r"visit \(i=(\d+), tag=(\d+)\) at .*conds\.c:%d" % L("visit"), out)]


def hit_counts(out):
    """Breakpoint number -> 'already hit N times' from `info breakpoints`."""
    counts = {}
    num = None
    for line in out.splitlines():
        m = re.match(r"(\d+)\s+(?:hw )?(?:breakpoint|dprintf)\s", line)
        if m:
            num = int(m.group(1))
        m = re.search(r"breakpoint already hit (\d+) times?", line)
        if m and num is not None:
            counts[num] = int(m.group(1))
    return counts


def test_condition_in_a_loop_stops_only_where_it_holds(procs):
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["break visit if i == 7", "continue", "print i", "info breakpoints",
                                       "continue"], prog=CONDS)
    assert "Target does not support breakpoint condition evaluation" not in r.out, r
    assert "stop only if i == 7 (target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(7, 0)], r
    assert "$1 = 7" in r.out, r
    # GDB counts the hits it is told of: one (host evaluation would count 8).
    assert hit_counts(r.out) == {1: 1}, r
    assert "exited normally" in r.out, r


def test_two_conditions_at_one_address(procs):
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["break visit if i == 3", "break visit if i == 11", "continue", "print i",
                                       "continue", "print i", "info breakpoints", "continue"], prog=CONDS)
    assert r.out.count("(target evals)") == 2, r
    assert stops_at_visit(r.out) == [(3, 0), (11, 0)], r
    assert "$1 = 3" in r.out and "$2 = 11" in r.out, r
    # Each stop was reported once; GDB's own check picks the breakpoint whose condition holds.
    assert hit_counts(r.out) == {1: 1, 2: 1}, r
    assert "exited normally" in r.out, r


def test_changed_condition_replaces_the_old_one(procs):
    # always-inserted: GDB sends the changed condition as a new Z0 at the inserted address,
    # without a z0 first. It must replace the old condition, and one z0 must remove it all.
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["set breakpoint always-inserted on", "break visit if i == 2", "continue",
                                       "condition 1 i == 9", "info breakpoints", "continue", "print i",
                                       "condition 1", "continue", "print i", "delete 1", "continue"], prog=CONDS)
    assert "stop only if i == 9 (target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(2, 0), (9, 0), (10, 0)], r
    assert "$1 = 9" in r.out and "$2 = 10" in r.out, r
    assert "SIGTRAP" not in r.out, r
    assert "exited normally" in r.out, r


@pytest.mark.branchstub_only
def test_condition_reading_unreadable_memory_is_reported(procs):
    # `probe` points at address 8 during the loop: the server cannot evaluate the condition, so
    # the hit is reported (gdbserver's rule for evaluation errors) and GDB shows its own
    # evaluation error. gdbserver 13.1 ignores the failed read (a stale value: never stops).
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["break visit if *probe == 5", "continue", "print i", "info breakpoints"],
                   prog=CONDS)
    assert "stop only if *probe == 5 (target evals)" in r.out, r
    assert re.search(r"Error in testing (breakpoint )?condition.*\n.*Cannot access memory at address 0x8", r.out), r
    assert stops_at_visit(r.out) == [(0, 0)], r
    assert "$1 = 0" in r.out, r


def test_condition_in_a_multithreaded_inferior(procs):
    # Four threads and the main one run visit(); only one (tag 300) at i == 150 stops. The
    # others keep running between the hits the server passes.
    srv = server(procs, prog_args=(200, 4))
    r = gdb_remote(srv, TARGET_EVAL + ["break visit if tag == 300 && i == 150", "continue", "print i", "print tag",
                                       "info breakpoints", "delete 1", "continue"], prog=CONDS, timeout=120)
    assert "(target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(150, 300)], r
    assert "$1 = 150" in r.out and "$2 = 300" in r.out, r
    assert hit_counts(r.out) == {1: 1}, r
    assert "exited normally" in r.out, r


def test_condition_on_a_hardware_breakpoint(procs, watch_mode):
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", CONDS])
    r = gdb_remote(srv, TARGET_EVAL + ["hbreak visit if i == 6", "continue", "print i", "info breakpoints",
                                       "continue"], prog=CONDS)
    assert "(target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(6, 0)], r
    assert hit_counts(r.out) == {1: 1}, r
    assert "exited normally" in r.out, r


def test_condition_with_a_watchpoint(procs, watch_mode):
    # The software watchpoints single-step every instruction: a passed hit must still be
    # checked (the write in visit() after the breakpoint triggers the watchpoint).
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", CONDS])
    r = gdb_remote(srv, TARGET_EVAL + ["break done", "break visit if i == 12", "continue", "print i",
                                       "watch total", "continue", "print total", "info breakpoints"], prog=CONDS)
    assert "(target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(12, 0)], r
    # 0 + 1 + ... + 11 = 66 before the write of i = 12.
    assert re.search(r"watchpoint 3: total\s+Old value = 66\s+New value = 78", r.out), r
    assert hit_counts(r.out).get(2) == 1, r


def dprintf_lines(text):
    return re.findall(r"^visit i=(\d+) tag=(\d+)\r?$", text, re.M)


def test_agent_dprintf_prints_without_stopping(procs):
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["set dprintf-style agent", 'dprintf visit,"visit i=%d tag=%d\\n",i,tag',
                                       "break done", "continue", "print total", "info breakpoints", "continue"],
                   prog=CONDS)
    assert "Target cannot run dprintf commands" not in r.out, r
    assert 'agent-printf "visit i=%d tag=%d\\n",i,tag' in r.out, r
    assert re.search(r"Breakpoint 2, done \(\)", r.out), r
    assert "$1 = 190" in r.out, r
    # branchstub sends the text to GDB as console output; gdbserver prints on its own stdout.
    where = srv.stdout.text if IS_GDBSERVER else r.out
    assert dprintf_lines(where) == [(str(i), "0") for i in range(20)], (where, r)


@pytest.mark.branchstub_only
def test_agent_dprintf_with_a_condition_prints_only_where_it_holds(procs):
    # GDB's dprintf semantics; gdbserver runs the commands at every hit (docs).
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["set dprintf-style agent", 'dprintf visit,"visit i=%d tag=%d\\n",i,tag',
                                       "condition 1 i > 15", "break done", "continue", "info breakpoints",
                                       "continue"], prog=CONDS)
    assert "stop only if i > 15 (target evals)" in r.out, r
    assert dprintf_lines(r.out) == [(str(i), "0") for i in range(16, 20)], r
    assert re.search(r"Breakpoint 2, done \(\)", r.out), r
    assert "exited normally" in r.out, r


@pytest.mark.branchstub_only
def test_conditions_while_recording(procs):
    # record btrace (the software tracer here): the passed hits are traced like any code.
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["break worker", "continue", "record btrace", "break visit if i == 5",
                                       "continue", "print i", "info breakpoints", "set record function-call-history-size 100",
                                       "record function-call-history",
                                       "record stop", "delete", "continue"], prog=CONDS)
    assert "(target evals)" in r.out, r
    assert stops_at_visit(r.out) == [(5, 0)], r
    assert hit_counts(r.out).get(2) == 1, r
    hist = re.findall(r"^\d+\s+(\w+)\s*$", r.out, re.M)
    # From the stop in worker: visit and back to worker for each i = 0..4, then visit (i = 5),
    # the same history as GDB evaluating the condition itself (checked by hand).
    assert hist == ["worker"] + ["visit", "worker"] * 5 + ["visit"], (" ".join(hist), r)
    assert "exited normally" in r.out, r


@pytest.mark.branchstub_only
def test_conditions_during_stepbranch(procs):
    # stepbranch runs to the 1000th taken branch; the breakpoint's hits where i != 10 are
    # passed (and counted as code), the one where i == 10 stops it.
    srv = server(procs)
    r = gdb_remote(srv, TARGET_EVAL + ["break worker", "continue", "break visit if i == 10",
                                       "stepbranch 1000", "print i", "info breakpoints", "delete", "continue"],
                   prog=CONDS, pre=["source " + GDB_SCRIPT])
    assert "(target evals)" in r.out, r
    assert "stepbranch: stopped at breakpoint 2" in r.out, r
    assert "$1 = 10" in r.out, r
    assert "exited normally" in r.out, r
