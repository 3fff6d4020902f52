"""IDE-style sessions: GDB/MI driven the way VS Code (cppdbg) and CLion drive it, against the
server (issue 2: IDEs drive GDB this way). Works with gdbserver too, except the branch part."""
import re

import pytest

from harness import IS_GDBSERVER, inferior, line_of
from mi_client import MiSession

BASIC, BPLOOP, THREADS = inferior("basic"), inferior("bploop"), inferior("threads")


def connect(s, srv, non_async=False):
    # What cppdbg sends before connecting (setupCommands aside).
    s.ok("-gdb-set mi-async %s" % ("off" if non_async else "on"))
    s.ok("-enable-pretty-printing")
    s.ok("-gdb-set sysroot /")
    result, seen = s.ok("-target-select remote 127.0.0.1:%d" % srv.port, timeout=60)
    assert "^connected" in result, s.text()


def test_mi_breakpoint_stack_variables_stepping(procs, mi):
    srv = procs.server(["--once", "{COMM}", BASIC])
    s = mi(BASIC)
    connect(s, srv)
    line = line_of("basic", "compute-body")
    result, _ = s.ok("-break-insert -f basic.c:%d" % line)
    assert re.search(r'bkpt=\{number="1",type="breakpoint".*line="%d"' % line, result), s.text()
    stop = s.run("-exec-continue")
    assert 'reason="breakpoint-hit"' in stop and 'func="compute"' in stop, s.text()
    assert re.search(r'args=\[\{name="x",value="0"\}\]', stop), s.text()
    frames, _ = s.ok("-stack-list-frames")
    assert re.search(r'frame=\{level="0",addr="0x[0-9a-f]+",func="compute"', frames), s.text()
    assert re.search(r'frame=\{level="1",addr="0x[0-9a-f]+",func="main"', frames), s.text()
    variables, _ = s.ok("-stack-list-variables --simple-values")
    assert re.search(r'\{name="x",arg="1",type="int",value="0"\}', variables), s.text()
    var, _ = s.ok("-var-create - * counter")
    assert re.search(r'name="var1",numchild="0",value="0",type="int"', var), s.text()
    stop = s.run("-exec-next")
    assert 'reason="end-stepping-range"' in stop, s.text()
    assert 'line="%d"' % line_of("basic", "counter-inc") in stop, s.text()
    s.run("-exec-next")
    changed, _ = s.ok("-var-update --all-values *")
    assert re.search(r'\{name="var1",value="1",in_scope="true"', changed), s.text()
    value, _ = s.ok("-data-evaluate-expression global_value")
    assert 'value="42"' in value, s.text()
    stop = s.run("-exec-finish")
    assert 'reason="function-finished"' in stop and 'func="main"' in stop, s.text()
    regs, _ = s.ok("-data-list-register-values x 16")   # rip
    assert re.search(r'\{number="16",value="0x[0-9a-f]+"\}', regs), s.text()
    mem, _ = s.ok("-data-read-memory-bytes &global_value 4")
    assert 'contents="2a000000"' in mem, s.text()
    s.ok("-break-delete 1")
    stop = s.run("-exec-continue")
    assert 'reason="exited"' in stop and 'exit-code="07"' in stop, s.text()


def test_mi_threads_and_interrupt(procs, mi):
    srv = procs.server(["--once", "{COMM}", THREADS])
    s = mi(THREADS)
    connect(s, srv)
    s.ok("-break-insert -f all_running")
    stop = s.run("-exec-continue")
    assert 'reason="breakpoint-hit"' in stop, s.text()
    threads, _ = s.ok("-thread-info")
    assert len(re.findall(r'\{id="\d+",target-id="Thread ', threads)) == 9, s.text()
    s.ok("-break-delete")
    s.ok("-thread-select 1")

    srv2 = procs.server(["--once", "{COMM}", BPLOOP, "100000000"])
    t = mi(BPLOOP)
    connect(t, srv2)
    result, seen = t.ok("-exec-continue")
    assert "^running" in result, t.text()
    t.ok("-exec-interrupt")
    stop = t.wait_stopped(seen=seen)
    assert 'reason="signal-received"' in stop and 'signal-name="SIGINT"' in stop, t.text()
    frames, _ = t.ok("-stack-list-frames")
    assert 'func="' in frames, t.text()


@pytest.mark.skipif(IS_GDBSERVER, reason="branch history needs branchstub")
def test_mi_record_btrace_from_the_console(procs, mi):
    """The IDE's debug console: record btrace, then the history, in an MI session."""
    srv = procs.server(["--once", "{COMM}", BPLOOP, "3"])
    s = mi(BPLOOP)
    connect(s, srv, non_async=True)
    s.ok("-break-insert -f hit")
    s.run("-exec-continue")
    s.console("record btrace")
    s.run("-exec-continue")
    info = s.console("info record")
    assert re.search(r"Recorded \d+ instructions in \d+ functions", info), s.text()
    calls = s.console("record function-call-history")
    assert "hit" in calls and "main" in calls, s.text()
    # The IDE's "step back" button: MI's --reverse, replayed by GDB from the branch history.
    stop = s.run("-exec-next --reverse")
    assert 'reason="end-stepping-range"' in stop, s.text()
    assert re.search(r"Replay in progress\.\s+At instruction \d+\.", s.console("info record")), s.text()
