"""Emulated watchpoints by page protection on a replay (backend/points/page_watch.h,
docs/record-replay.md): where the debug registers do not trap (or with --watchpoints=software),
a replay protects the watched page instead of stepping the program, and checks only the
accesses that fault there. Its answers must be those of checked steps (--watchpoints=steps),
on every host: a neighbour on the same page written 21,000 times (faults that are no hit, then
checked steps while the page is that hot), a
memset over the page (a rep string store), calls the kernel runs for real that write the page
(pipe2, rt_sigaction: run with the page open) and the program's own mprotect of it."""
import re
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior
from harness import line_of as harness_line_of

pytestmark = pytest.mark.branchstub_only

PROG = inferior("page_watch")


def line_of(tag):
    return harness_line_of("page_watch", tag)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    d = tmp_path_factory.mktemp("page_watch")
    out = subprocess.run([SERVER, "record", "-o", str(d / "t"), PROG], capture_output=True, timeout=120, cwd=str(d))
    assert out.returncode == 0, out.stderr
    assert b"watched=4 " in out.stdout, out.stdout
    return d / "t"


def session(procs, trace_dir, tmp_path, mode, cmds):
    log = tmp_path / ("server-%s.log" % mode)
    srv = procs.server(["replay", "--watchpoints=" + mode, "--debug", "--debug-file=%s" % log, "--once", "{COMM}",
                        str(trace_dir)])
    r = gdb_remote(srv, ["break %d" % line_of("end-line"), "continue"] + cmds, prog=PROG, timeout=300,
                   pre=["set sysroot /"])
    assert "cannot run backwards" not in r.out and "divergence" not in r.out and "diverged" not in r.out, r
    srv.stop()
    return r, log.read_text()


def changes(r):
    return re.findall(r"Old value = (-?\d+)\s+New value = (-?\d+)", r.out)


def test_reverse_continue_to_each_write_as_checked_steps_find_them(procs, trace, tmp_path):
    cmds = ["watch pg.watched"] + ["reverse-continue"] * 6
    by_steps, _ = session(procs, trace, tmp_path, "steps", cmds)
    by_pages, log = session(procs, trace, tmp_path, "software", cmds)
    want = [("4", "0"), ("0", "3"), ("3", "2"), ("2", "1"), ("1", "0")]
    assert changes(by_steps) == want, by_steps
    assert changes(by_pages) == want, by_pages
    for r in (by_steps, by_pages):
        assert "No more reverse-execution history." in r.out, r
        assert r.out.count("set_watched (v=") == 4, r
        assert re.search(r"main \(\) at .*page_watch.c:%d" % line_of("zero-line"), r.out), r
    # The page was protected, the calls that write it ran with it open, and faults were checked.
    assert "watched pages 0x" in log and " protected (" in log, log[-3000:]
    assert "watched pages opened for system call 293" in log, log[-3000:]  # pipe2
    assert "watched pages opened for system call 13" in log, log[-3000:]   # rt_sigaction
    assert "watched pages opened for system call 10" in log, log[-3000:]   # mprotect
    assert re.search(r"hit the watchpoint at 0x[0-9a-f]+ \(\d+ faults\)", log), log[-3000:]
    # The neighbour's loop writes the page every few branches: checked steps take over there
    # for a while, and the page is protected again after.
    assert "written every few branches: checked steps for 1024 stops" in log, log[-3000:]
    assert "checked steps from here" not in log, log[-3000:]


def test_read_watch_backwards_finds_the_last_read(procs, trace, tmp_path):
    """A read watch protects the page from every access (PROT_NONE): reverse-continue goes
    back to the last read (printf's argument), then to the one before it (sink = ...)."""
    cmds = ["rwatch pg.watched", "reverse-continue", "reverse-continue"]
    by_steps, _ = session(procs, trace, tmp_path, "steps", cmds)
    by_pages, log = session(procs, trace, tmp_path, "software", cmds)
    for r in (by_steps, by_pages):
        assert r.out.count("Value = 4") == 2, r
        assert re.search(r"main \(\) at .*page_watch.c:%d" % line_of("print-line"), r.out), r
        assert re.search(r"main \(\) at .*page_watch.c:%d" % line_of("read-line"), r.out), r
    assert " protected (" in log, log[-3000:]
