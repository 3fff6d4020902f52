"""stepbranch as IDEs see it (issue 18): a resume GDB / LLDB perform themselves, so GDB/MI
emits exactly one `*stopped` with the new frame (VS Code and CLion refresh on it) and LLDB
reports an ordinary stop. Real gdb (MI, as cppdbg and CLion drive it) and lldb-16; the truth
is GDB's own single-stepping (truth.py), independent of the server's stepbranch."""
import os
import re
import signal
import time

import pytest

from harness import GDB_SCRIPT, LLDB_SCRIPT, inferior, lldb, watch_args
from mi_client import MiSession
from truth import stepi_truth

pytestmark = pytest.mark.branchstub_only

BRANCHES = inferior("branches")


def after_branches(t, n):
    """(pc, function) of the thread once it has taken n branches from trace_begin's
    breakpoint, from the stepi truth."""
    taken = 0
    for i, pc in enumerate(t.pcs):
        nxt = t.pcs[i + 1] if i + 1 < len(t.pcs) else t.end
        if nxt != pc + t.lens[i]:
            taken += 1
            if taken == n:
                return nxt, (t.funcs[i + 1] if i + 1 < len(t.funcs) else t.end_func)
    raise AssertionError("the truth has fewer than %d branches" % n)


@pytest.fixture
def mi_session(procs):
    sessions = []

    def start(mi_async=True):
        srv = procs.server(["--once", "{COMM}", BRANCHES])
        s = MiSession([BRANCHES], timeout=60)
        sessions.append(s)
        # What cppdbg / CLion send before connecting, then the script as a setupCommand.
        s.ok("-gdb-set mi-async %s" % ("on" if mi_async else "off"))
        s.ok("-enable-pretty-printing")
        s.ok("-gdb-set sysroot /")
        s.ok("-target-select remote 127.0.0.1:%d" % srv.port, timeout=60)
        s.console("source " + GDB_SCRIPT)
        s.ok("-break-insert trace_begin")
        stop = s.run("-exec-continue")
        assert 'reason="breakpoint-hit"' in stop, s.text()
        return s
    yield start
    for s in sessions:
        s.close()


def console_command(s, command):
    """-interpreter-exec console COMMAND, the way an IDE's debug console sends it. Returns
    (every *stopped record it produced, -stack-info-frame's result, its console text)."""
    start = len(s.transcript)
    result, seen = s.send('-interpreter-exec console "%s"' % command)
    assert re.match(r"\d+\^(running|done)", result), s.text()
    s.wait_stopped(seen=seen)
    # The command's own lines (the branch) come before the next command's result.
    frame, _ = s.ok("-stack-info-frame")
    lines = s.transcript[start:]
    stopped = [line for line in lines if line.startswith("*stopped")]
    text = "".join(bytes(line[2:-1], "utf-8").decode("unicode_escape")
                   for line in lines if line.startswith('~"'))
    return stopped, frame, text


def frame_addr(record):
    m = re.search(r'frame=\{(?:level="0",)?addr="(0x[0-9a-f]+)",func="([^"]+)"', record)
    assert m, record
    return int(m.group(1), 16), m.group(2)


@pytest.mark.parametrize("count,mi_async", [
    pytest.param(1, True, id="1-return"),          # ret from trace_begin into main
    pytest.param(3, True, id="3-call"),            # ret, call region, call *%rdx into add1
    pytest.param(4, True, id="4-return"),          # ... and add1's ret back into region
    pytest.param(3, False, id="3-call-sync"),      # mi-async off (CLion's older default)
])
def test_mi_stepbranch_is_one_real_stop(mi_session, count, mi_async):
    t = stepi_truth("branches")
    want_pc, want_func = after_branches(t, count)
    s = mi_session(mi_async)
    s.ok("-break-delete")
    stopped, frame, text = console_command(s, "stepbranch %d" % count if count > 1 else "stepbranch")
    assert len(stopped) == 1, s.text()
    assert 'reason="end-stepping-range"' in stopped[0], s.text()
    assert frame_addr(stopped[0]) == (want_pc, want_func), (want_pc, want_func, s.text())
    assert frame_addr(frame) == (want_pc, want_func), s.text()
    frm, to = t.taken_branches()[count - 1][:2]
    assert "branch 0x%x -> 0x%x" % (frm, to) in text, s.text()
    # GDB's own view agrees (no stale register cache to flush).
    regs, _ = s.ok("-data-evaluate-expression $pc")
    assert re.search(r'value="0x0*%x' % want_pc, regs), s.text()


def test_mi_stepbranch_from_a_breakpoint_at_the_pc(mi_session):
    """GDB steps over the breakpoint it stopped at (lifts it, single-steps that thread alone,
    puts it back): that single step is the one the request applies to."""
    t = stepi_truth("branches")
    s = mi_session()
    # trace_begin's breakpoint stays at the pc; then on from add1's entry (no breakpoint there).
    for count, total in ((3, 3), (1, 4)):
        want_pc, want_func = after_branches(t, total)
        stopped, frame, _ = console_command(s, "stepbranch %d" % count)
        assert len(stopped) == 1, s.text()
        assert 'reason="end-stepping-range"' in stopped[0], s.text()
        assert frame_addr(frame) == (want_pc, want_func), (want_pc, s.text())


def test_mi_stepbranch_stops_at_a_breakpoint_met_first(mi_session):
    t = stepi_truth("branches")
    s = mi_session()
    s.ok("-break-delete")
    result, _ = s.ok("-break-insert add1")        # after add1's prologue: before branch 4
    bp = int(re.search(r'addr="(0x[0-9a-f]+)"', result).group(1), 16)
    add1_entry, _ = after_branches(t, 3)
    assert add1_entry < bp < add1_entry + 16 and bp in t.pcs, s.text()
    stopped, frame, text = console_command(s, "stepbranch 10")
    assert len(stopped) == 1, s.text()
    assert 'reason="breakpoint-hit"' in stopped[0], s.text()
    assert frame_addr(stopped[0]) == (bp, "add1"), s.text()
    assert frame_addr(frame) == (bp, "add1"), s.text()
    assert "stepbranch: stopped at breakpoint" in text, s.text()
    # The request was used up: a later step is a plain instruction step.
    stop = s.run("-exec-step-instruction")
    assert 'reason="end-stepping-range"' in stop, s.text()
    pc, _ = frame_addr(stop)
    assert pc == t.pcs[t.pcs.index(bp) + 1], s.text()


def test_mi_reverse_stepbranch_and_stepbranch_while_replaying(mi_session):
    t = stepi_truth("branches")
    b = t.taken_branches()
    s = mi_session()
    s.ok("-break-delete")
    s.console("record btrace")
    stopped, frame, _ = console_command(s, "stepbranch 4")            # live, recorded
    assert len(stopped) == 1 and frame_addr(frame)[0] == b[3][1], s.text()

    # Back onto the branch instruction of the last taken branch (add1's ret), then two more.
    for command, want in (("reverse-stepbranch", b[3][0]), ("reverse-stepbranch 2", b[1][0])):
        stopped, frame, text = console_command(s, command)
        assert len(stopped) == 1, s.text()
        assert 'reason="end-stepping-range"' in stopped[0], s.text()
        assert frame_addr(stopped[0])[0] == want and frame_addr(frame)[0] == want, s.text()
    assert "Replay in progress" in s.console("info record"), s.text()

    # Forward through the history: the call main -> region, then to the live end.
    stopped, frame, text = console_command(s, "stepbranch")
    assert len(stopped) == 1 and 'reason="end-stepping-range"' in stopped[0], s.text()
    assert frame_addr(frame) == (b[1][1], "region"), s.text()
    assert "branch 0x%x -> 0x%x" % (b[1][0], b[1][1]) in text, s.text()
    stopped, frame, text = console_command(s, "stepbranch 2")
    assert len(stopped) == 1, s.text()
    # Stepping onto the end of the history is GDB's "no more history" stop, live again.
    assert re.search(r'reason="(end-stepping-range|no-history)"', stopped[0]), s.text()
    assert frame_addr(frame) == (b[3][1], "region"), s.text()
    assert "Replay in progress" not in s.console("info record"), s.text()
    # Live again: the next stepbranch runs the program (the server's request).
    want_pc, want_func = after_branches(t, 5)
    stopped, frame, _ = console_command(s, "stepbranch")
    assert len(stopped) == 1 and frame_addr(frame) == (want_pc, want_func), s.text()


def test_lldb_stepbranch_is_an_ordinary_stop(procs):
    t = stepi_truth("branches")
    add1_entry = after_branches(t, 3)[0]
    bp = t.pcs[t.pcs.index(add1_entry) + 2]      # inside add1, before its ret
    srv = procs.server(["--once", "{COMM}", BRANCHES])
    r = lldb(["command script import " + LLDB_SCRIPT, "gdb-remote 127.0.0.1:%d" % srv.port,
              "b trace_begin", "c",
              "stepbranch 3", "register read rip",          # LLDB steps over the breakpoint at the pc
              "breakpoint delete 1", "b -a 0x%x" % bp,
              "stepbranch", "register read rip",            # the breakpoint comes before the ret
              "stepbranch 2", "register read rip", "bt", "process kill"], timeout=90)
    out = r.out
    rips = [int(x, 16) for x in re.findall(r"^\s+rip = (0x[0-9a-f]+)", out, re.M)]
    assert rips == [add1_entry, bp, after_branches(t, 5)[0]], (add1_entry, bp, r)
    # LLDB reported the stepbranch as its own instruction step, with the new frame.
    assert re.search(r"stop reason = instruction step into\s+frame #0: 0x0*%x branches`add1"
                     % add1_entry, out), r
    assert "branch 0x%x -> 0x%x" % t.taken_branches()[2][:2] in out, r
    assert re.search(r"stop reason = breakpoint 2\.1", out), r
    assert "stepbranch: stopped before the branch was taken" in out, r
    # add1's ret, then call *%rdx into dbl: LLDB's frames are the new ones.
    assert re.search(r"frame #0: 0x0*%x branches`dbl" % rips[2], out), r
    assert re.search(r"frame #1: 0x[0-9a-f]+ branches`region", out), r


# ---------------------------------------------------------------- a run that loops back

BPLOOP = inferior("bploop")


@pytest.fixture
def bploop_session(procs):
    """MI on bploop (hit(i) called in a loop), stopped at the breakpoint in hit()."""
    sessions = []

    def start(server_args=(), loops=1000, mi_async=True):
        srv = procs.server(list(server_args) + ["--once", "{COMM}", BPLOOP, str(loops)])
        s = MiSession([BPLOOP], timeout=60)
        sessions.append(s)
        s.ok("-gdb-set mi-async %s" % ("on" if mi_async else "off"))
        s.ok("-target-select remote 127.0.0.1:%d" % srv.port, timeout=60)
        s.console("source " + GDB_SCRIPT)
        result, _ = s.ok("-break-insert hit")
        bp = int(re.search(r'addr="(0x[0-9a-f]+)"', result).group(1), 16)
        stop = s.run("-exec-continue")
        assert 'reason="breakpoint-hit"' in stop and frame_addr(stop) == (bp, "hit"), s.text()
        return s, bp
    yield start
    for s in sessions:
        s.close()


def hits(s):
    result, _ = s.ok("-data-evaluate-expression hits")
    return int(re.search(r'value="(\d+)"', result).group(1))


def test_mi_stepbranch_loops_back_onto_the_breakpoint_it_started_at(bploop_session):
    """GDB lifts the breakpoint at the pc for its step; the run still stops there when the loop
    comes back to it before the N-th branch (the script names it in the request), as the
    stepbranch packet does. hit's ret, the loop's jump and the call are 3 branches: 10 would
    go past the breakpoint without it."""
    s, bp = bploop_session()
    assert hits(s) == 0
    for want in (1, 2):
        stopped, frame, text = console_command(s, "stepbranch 10")
        assert len(stopped) == 1, s.text()
        assert 'reason="breakpoint-hit"' in stopped[0], s.text()
        assert frame_addr(stopped[0]) == (bp, "hit") and frame_addr(frame) == (bp, "hit"), s.text()
        assert hits(s) == want, s.text()
        assert "stepbranch: stopped at breakpoint 1" in text, s.text()
    # The breakpoint is GDB's again: deleted, the run goes on to its 10th branch.
    s.ok("-break-delete")
    stopped, frame, _ = console_command(s, "stepbranch 10")
    assert len(stopped) == 1 and 'reason="end-stepping-range"' in stopped[0], s.text()
    assert hits(s) > 2, s.text()
    # And the server holds no breakpoint of its own there: the program runs to its end.
    stop = s.run("-exec-continue")
    assert 'reason="exited-normally"' in stop, s.text()


def test_lldb_stepbranch_loops_back_onto_the_breakpoint_it_started_at(procs):
    srv = procs.server(["--once", "{COMM}", BPLOOP, "1000"])
    r = lldb(["command script import " + LLDB_SCRIPT, "gdb-remote 127.0.0.1:%d" % srv.port,
              "b hit", "c", "p hits",
              "stepbranch 10", "register read rip", "p hits",
              "stepbranch 10", "register read rip", "p hits",
              "breakpoint delete 1", "stepbranch 10", "p hits", "process kill"], timeout=90)
    out = r.out
    rips = [int(x, 16) for x in re.findall(r"^\s+rip = (0x[0-9a-f]+)", out, re.M)]
    counts = [int(x) for x in re.findall(r"^\((?:volatile )?long\) \$\d+ = (\d+)", out, re.M)]
    assert len(rips) == 2 and rips[0] == rips[1], r
    assert counts[:3] == [0, 1, 2] and counts[3] > 2, r
    assert len(re.findall(r"stop reason = breakpoint 1\.1", out)) == 3, r   # the c and both runs


# ---------------------------------------------------------------- what ends a long run early

def test_mi_watchpoint_met_during_the_run_stops_it(bploop_session, watch_mode):
    """A watchpoint hit inside the converted step ends it as a watchpoint stop: GDB reports the
    trigger (old and new value), not the end of a step."""
    s, bp = bploop_session(watch_args(watch_mode))
    s.ok("-break-delete")
    s.ok("-break-watch hits")
    stopped, frame, text = console_command(s, "stepbranch 10")
    assert len(stopped) == 1, s.text()
    assert 'reason="watchpoint-trigger"' in stopped[0], s.text()
    assert 'value={old="0",new="1"}' in stopped[0], s.text()
    assert frame_addr(frame)[1] == "hit", s.text()
    assert "stepbranch: stopped at watchpoint 2" in text, s.text()
    # The next one: from inside hit, past its ret, the loop and the call, to the next write.
    stopped, frame, _ = console_command(s, "stepbranch 10")
    assert len(stopped) == 1 and 'value={old="1",new="2"}' in stopped[0], s.text()


@pytest.mark.parametrize("how", ["exec-interrupt", "sigint"])
def test_mi_interrupt_ends_a_long_stepbranch(bploop_session, how):
    """The IDE's pause button during `stepbranch N` with N far beyond what the loop takes
    (bploop runs 10^9 rounds): -exec-interrupt, as front ends send it with mi-async on (GDB
    must be reading commands during the run: the script steps in the background), or, with
    mi-async off, SIGINT to GDB (what front ends do then, and a terminal's Ctrl-C). One
    *stopped, SIGINT, and the thread steps normally afterwards."""
    s, bp = bploop_session(loops=10 ** 9, mi_async=how == "exec-interrupt")
    s.ok("-break-delete")
    start = len(s.transcript)
    result, seen = s.send('-interpreter-exec console "stepbranch 4000000000"')
    assert re.match(r"\d+\^running", result), s.text()
    time.sleep(1.5)
    assert not any(line.startswith("*stopped") for line in s.transcript[start:]), s.text()
    if how == "exec-interrupt":
        s.ok("-exec-interrupt", timeout=15)
    else:
        os.kill(s.proc.pid, signal.SIGINT)
    stopped = s.wait_stopped(timeout=30, seen=seen)
    assert 'reason="signal-received"' in stopped and 'signal-name="SIGINT"' in stopped, s.text()
    frame, _ = s.ok("-stack-info-frame")
    lines = s.transcript[start:]
    assert len([line for line in lines if line.startswith("*stopped")]) == 1, s.text()
    assert "stepbranch: program received signal SIGINT" in "".join(lines), s.text()
    assert hits(s) > 10, s.text()     # it ran (software stepbranch: thousands of rounds a second)
    pc, _ = frame_addr(frame)
    stop = s.run("-exec-step-instruction")
    assert 'reason="end-stepping-range"' in stop and frame_addr(stop)[0] != pc, s.text()
    # And stepbranch works again from there.
    stopped, frame, text = console_command(s, "stepbranch")
    assert len(stopped) == 1 and "branch 0x" in text, s.text()


@pytest.mark.parametrize("case", ["passed-by-server", "bp-at-pc", "print"])
def test_mi_nostop_signal_during_the_run(procs, case):
    """`handle SIGUSR1 nostop noprint pass` puts SIGUSR1 in GDB's QPassSignals: the server
    delivers it during the run, which goes on (to trace_end's breakpoint, both signals
    handled). A known limit, pinned (docs/stepbranch.md "Known limits"): while GDB steps over
    a breakpoint at the pc it sends an empty QPassSignals, and a `print` signal is never in
    it; then the signal is reported, GDB passes it with a step of its own that delivers it,
    which the request does not cover, and the command ends, with one *stopped, at the
    handler's first instruction."""
    prog = inferior("branches_signal")
    srv = procs.server(["--once", "{COMM}", prog])
    s = MiSession([prog], timeout=60)
    try:
        s.ok("-gdb-set mi-async on")
        s.ok("-target-select remote 127.0.0.1:%d" % srv.port, timeout=60)
        s.console("source " + GDB_SCRIPT)
        s.console("handle SIGUSR1 nostop %s pass" % ("print" if case == "print" else "noprint"))
        s.ok("-break-insert trace_begin")
        assert 'reason="breakpoint-hit"' in s.run("-exec-continue"), s.text()
        if case != "bp-at-pc":
            s.ok("-break-delete")
        s.ok("-break-insert trace_end")
        stopped, frame, text = console_command(s, "stepbranch 100000")
        assert len(stopped) == 1, s.text()
        result, _ = s.ok("-data-evaluate-expression handled")
        if case == "passed-by-server":
            assert 'reason="breakpoint-hit"' in stopped[0] and frame_addr(frame)[1] == "trace_end", s.text()
            assert 'value="2"' in result, s.text()
        else:
            assert 'reason="end-stepping-range"' in stopped[0], s.text()
            assert frame_addr(frame)[1] == "on_usr1", s.text()
            assert 'value="1"' in result, s.text()     # the warm-up's: this handler has not run yet
            assert "stepbranch: stopped without taking a branch" in text, s.text()
    finally:
        s.close()


def test_mi_stepbranch_inside_a_user_defined_command_waits_for_its_stop(mi_session, tmp_path):
    """With mi-async on the typed command runs in the background; inside a `define`d command
    (or breakpoint commands) it stays synchronous: the next line sees the stop."""
    t = stepi_truth("branches")
    want_pc, _ = after_branches(t, 3)
    s = mi_session(True)
    s.ok("-break-delete")
    defs = tmp_path / "sb3.gdb"
    defs.write_text("define sb3\n  stepbranch 3\n  output/x $pc\n  echo \\n\nend\n")
    s.console("source %s" % defs)
    start = len(s.transcript)
    result, seen = s.send('-interpreter-exec console "sb3"')
    s.wait_stopped(seen=seen)
    s.ok("-stack-info-frame")
    text = "".join(bytes(line[2:-1], "utf-8").decode("unicode_escape")
                   for line in s.transcript[start:] if line.startswith('~"'))
    assert "0x%x" % want_pc in text, s.text()
    assert "running" not in text.lower(), s.text()
