"""Reverse execution on a replay (issue 28, slice 2; docs/record-replay.md): a recorded program
served by `branchstub replay` runs backwards under the real GDB (bc/bs, ReverseContinue+ and
ReverseStep+): reverse-continue to a breakpoint and to the write before a watched value (old and
new values as GDB's own reverse shows them), reverse-step/next/finish/stepi, the recorded time
seen again after going back and forth, the same state after back and forward again, and "No more
reverse-execution history." at both ends. A live program is not offered reverse execution."""
import os
import re
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior

pytestmark = pytest.mark.branchstub_only

PROG = inferior("reverse_prog")
SRC = os.path.join(os.path.dirname(__file__), "..", "inferiors", "reverse_prog.c")


def line_of(tag):
    with open(SRC) as f:
        for n, text in enumerate(f, 1):
            if "/* %s */" % tag in text:
                return n
    raise AssertionError(tag)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("reverse")
    out = subprocess.run([SERVER, "record", "-o", str(d / "t"), PROG], capture_output=True, timeout=120,
                         env=dict(os.environ, BRANCHSTUB_TRACE_DIR=str(d / "traces")), cwd=str(d))
    assert out.returncode == 0, out.stderr
    printed = dict(re.findall(r"(\w+)=(\d+)", out.stdout.decode()))
    assert printed["counter"] == "15", out.stdout
    return d / "t", printed


def session(procs, trace_dir, cmds, timeout=240):
    srv = procs.server(["replay", "--once", "{COMM}", str(trace_dir)])
    r = gdb_remote(srv, cmds, prog=PROG, timeout=timeout, pre=["set sysroot /"])
    assert "cannot run backwards" not in r.out and "divergence" not in r.out, r
    return r


def values(r):
    return re.findall(r"^\$\d+ = (.*)$", r.out, re.M)


def test_reverse_continue_stops_at_the_last_breakpoint_hit_before(procs, trace):
    r = session(procs, trace[0], ["break bump", "continue", "continue", "continue", "print by", "print counter",
                                  "reverse-continue", "print by", "print counter",
                                  "reverse-continue", "print by", "print counter"])
    assert values(r) == ["3", "3", "2", "1", "1", "0"], r
    assert r.out.count("Breakpoint 1, bump") == 5, r


def test_watchpoint_backwards_shows_the_write_before(procs, trace):
    r = session(procs, trace[0], ["break %d" % line_of("print-line"), "continue", "print counter",
                                  "watch counter", "reverse-continue", "print by", "reverse-continue", "print by"])
    assert values(r)[0] == "15", r
    # Backwards, the old value is the later one: GDB compares the value it had with the one now.
    assert re.search(r"Old value = 15\s+New value = 10", r.out), r
    assert re.search(r"Old value = 10\s+New value = 6", r.out), r
    assert values(r)[1:] == ["5", "4"], r
    # Stopped before the writing instruction, in bump's line that writes.
    assert re.search(r"in bump \(by=5\) at .*reverse_prog.c:%d" % line_of("bump-line"), r.out), r


def test_recorded_time_seen_again_after_stepping_back_over_it(procs, trace):
    recorded = trace[1]["time"]
    r = session(procs, trace[0], ["break %d" % line_of("time-line"), "continue", "next", "print recorded_time",
                                  "reverse-step", "print recorded_time", "next", "print recorded_time"])
    assert values(r) == [recorded, "0", recorded], r
    assert re.search(r"^%d\s.*time-line" % line_of("time-line"), r.out, re.M), r


def test_reverse_next_step_finish(procs, trace):
    r = session(procs, trace[0], ["break bump", "continue", "continue", "reverse-finish", "print i",
                                  "reverse-next", "reverse-next", "print i", "print counter",
                                  "reverse-step", "bt 1"])
    # reverse-finish: back in main at the call of bump(2); two lines back: the loop's i++
    # after bump(1); reverse-step from there enters bump(1) at its end.
    assert re.search(r"0x[0-9a-f]+ in main \(\) at .*:%d" % line_of("loop-line"), r.out), r
    assert values(r) == ["1", "0", "1"], r
    assert re.search(r"#0\s+bump \(by=1\) at .*reverse_prog.c:%d" % (line_of("bump-line") + 2), r.out), r


def test_back_and_forward_again_reach_the_same_state(procs, trace):
    r = session(procs, trace[0], ["break bump", "continue", "continue",
                                  "print/x $pc", "print/x $sp", "print counter",
                                  "reverse-stepi", "reverse-stepi", "reverse-stepi", "print/x $pc",
                                  "stepi", "stepi", "stepi",
                                  "print/x $pc", "print/x $sp", "print counter"])
    v = values(r)
    assert len(v) == 7, r
    assert v[0:3] == v[4:7], r
    assert v[3] != v[0], r


def test_both_ends_of_the_history(procs, trace):
    r = session(procs, trace[0], ["reverse-stepi", "break main", "continue", "delete", "reverse-continue",
                                  "continue", "continue"])
    # At the first instruction there is nothing before; from main back to the start; forward to
    # the recorded end, held there once; then the program ends as it did.
    assert r.out.count("No more reverse-execution history.") == 3, r
    assert re.search(r"exited normally", r.out), r


def test_a_live_program_is_not_offered_reverse_execution(procs):
    srv = procs.server(["--once", "{COMM}", PROG])
    r = gdb_remote(srv, ["break main", "continue", "reverse-step"], prog=PROG)
    assert "Target remote does not support this command." in r.out or \
        "does not support" in r.out, r
