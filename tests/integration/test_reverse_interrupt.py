"""Long reverse passes on a replay (issue 28; docs/record-replay.md). A pass is the client's to
end, as a forward `continue` is: Ctrl-C in GDB stops `reverse-continue` where the pass stands (a
SIGINT stop at a place of the history, from which the program goes on as recorded), and a GDB
that dies during the pass ends the replay server (`--once`) and its program instead of leaving
them to run the pass out (minutes) with nobody to tell. And a pass whose target pc lies in a
long loop stops there once, by the branch count, not at every iteration.

The pass is made long on purpose: `bploop` recorded with three million calls of hit(), and a
breakpoint on hit() whose condition (evaluated by the server) is never true: the pass back to
the first instruction stops at each of the three million calls."""
import os
import re
import signal
import subprocess
import time

import pytest

from harness import (GDB, GDB_PRELUDE, GDB_SYSROOT, SERVER, Reader, find_inferior_processes, gdb_remote, inferior,
                     target_cmd, wait_until)

pytestmark = pytest.mark.branchstub_only

PROG = inferior("bploop")
CALLS = 3000000


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("reverse_interrupt")
    out = subprocess.run([SERVER, "record", "-o", str(d / "t"), PROG, str(CALLS)], capture_output=True, timeout=120,
                         env=dict(os.environ, BRANCHSTUB_TRACE_DIR=str(d / "traces")), cwd=str(d))
    assert out.returncode == 0, out.stderr
    return d / "t"


def start_long_pass(procs, trace, after):
    """GDB at loop_done of the replay, then `reverse-continue` with nothing to stop it before
    the first instruction but the server's condition on hit(); `after` are GDB's commands once the pass ends. Returns (server,
    GDB's Popen, its output) once the pass is under way."""
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    argv = [GDB, "-nx", "-batch"]
    for c in GDB_PRELUDE + GDB_SYSROOT + [target_cmd(srv), "break loop_done", "continue", "print hits",
                                          "delete", "set breakpoint condition-evaluation target",
                                          "break hit if i < 0", "echo PASS-STARTS\\n", "reverse-continue"] + after:
        argv += ["-ex", c]
    g = procs.spawn(argv + [PROG], stderr=subprocess.STDOUT)
    out = Reader(g.stdout)
    assert out.wait_for(r"PASS-STARTS", 120), out.text
    assert "$1 = %d" % CALLS in out.text, out.text
    time.sleep(1.0)  # not synchronisation: the pass runs a while (it would take minutes)
    return srv, g, out


def test_ctrl_c_ends_a_long_reverse_pass(procs, trace):
    srv, g, out = start_long_pass(procs, trace, ["print hits", "delete", "break loop_done", "continue", "print hits", "kill"])
    t0 = time.monotonic()
    os.kill(g.pid, signal.SIGINT)
    assert out.wait_for(r"received signal SIGINT", 30), out.text
    elapsed = time.monotonic() - t0
    g.wait(120)
    text = out.text
    # Somewhere in the history, neither end: hits counts the calls made up to there.
    mid = re.findall(r"^\$2 = (\d+)$", text, re.M)
    assert mid and 0 <= int(mid[0]) <= CALLS, text
    assert "No more reverse-execution history" not in text, text
    # From there the program goes on as recorded, to the same end.
    assert re.search(r"^\$3 = %d$" % CALLS, text, re.M), text
    assert "cannot run backwards" not in text and "divergence" not in text, text
    assert elapsed < 10, "the pass took %.1fs to stop" % elapsed


def test_a_client_gone_during_a_reverse_pass_ends_the_replay(procs, trace):
    srv, g, out = start_long_pass(procs, trace, [])
    os.killpg(g.pid, signal.SIGKILL)
    g.wait(10)
    # gdbserver's rule for a program it launched: killed when its client goes; --once: done.
    assert srv.wait_exit(30) is not None, "the replay server runs on after its client died"
    wait_until(lambda: not find_inferior_processes(["bploop"]), 10, "the replayed program gone")



def test_stepping_back_out_of_a_long_loop_goes_by_the_branch_count(procs, trace):
    """reverse-stepi from the call after the loop: the pass behind it runs from the first
    instruction to the loop's last `ret` (a pc met three million times before the branch count
    it is wanted at). Through the ring's budget the replay stops there once; an int3 at that
    pc stops it at every call (about 25 minutes here): the session's time limit catches that."""
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["break loop_done", "continue", "reverse-stepi", "reverse-stepi", "reverse-stepi",
                         "reverse-stepi", "print hits", "print i", "info symbol $pc", "delete", "stepi", "stepi",
                         "stepi", "info symbol $pc", "print hits"],
                   prog=PROG, timeout=120, pre=["set sysroot /"])
    assert "cannot run backwards" not in r.out and "divergence" not in r.out, r
    assert re.findall(r"^\$\d+ = (\d+)$", r.out, re.M) == [str(CALLS)] * 3, r
    # Back in main's loop, then forward into loop_done again.
    assert re.findall(r"^(\w+) \+ \d+ in section", r.out, re.M) == ["main", "loop_done"], r
