"""`branchstub record --syscall-buffer=on` (docs/record-replay.md, "The system-call buffer"): a
program's stat, lstat, readlink, lgetxattr and access calls are recorded without a stop by the
patched code and replayed as any recorded call. Replayed twice under the real GDB, which sees the
recorded values (the file changed after the recording: the replay still sees the recorded
size); `reverse-continue` to a watchpoint goes back over buffered calls to the previous write,
with GDB's Old/New values; the same program recorded without the buffer replays to the same
values."""
import os
import re
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior

pytestmark = pytest.mark.branchstub_only

PROG = inferior("buffered_calls")
ROUNDS = 300


def record(tmp_path, target, buffer):
    trace = tmp_path / ("trace-" + buffer)
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "--syscall-buffer=" + buffer, "-o", str(trace), PROG, str(ROUNDS),
                        str(target)], capture_output=True, timeout=120, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    return p, trace


def printed(text):
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.M))


def replay_values(procs, trace, extra=()):
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    cmds = ["break values_ready", "continue", "print checksum", "print last_size", "print link_len"]
    cmds += list(extra) + ["continue", "continue"]
    r = gdb_remote(srv, cmds, prog=PROG)
    assert "divergence" not in r.out, r
    return r


@pytest.fixture
def target(tmp_path):
    f = tmp_path / "target.txt"
    f.write_text("x" * 1234)
    return f


def test_buffered_calls_record_without_stops_and_replay(procs, tmp_path, target):
    p, trace = record(tmp_path, target, "on")
    rec = printed(p.stdout.decode())
    # Five buffered calls a round; the getpid and everything else stop as before.
    m = re.search(rb"(\d+) system calls recorded without a stop", p.stderr)
    assert m and int(m.group(1)) >= 5 * ROUNDS, p.stderr
    assert "syscall-buffer 1" in (trace / "header").read_text()
    target.write_text("y" * 99)  # changed after the recording: the replay sees what was recorded
    for _ in range(2):
        r = replay_values(procs, trace)
        got = re.findall(r"^\$\d+ = (.*)$", r.out, re.M)
        assert got[:3] == [rec["checksum"], rec["last_size"], rec["link_len"]], r
    # Without the buffer: the same program, the same values (every call stopped twice).
    target.write_text("x" * 1234)
    p2, trace2 = record(tmp_path, target, "off")
    assert printed(p2.stdout.decode()) == rec
    assert b"without a stop" not in p2.stderr
    assert "syscall-buffer" not in (trace2 / "header").read_text()
    r = replay_values(procs, trace2)
    assert re.findall(r"^\$\d+ = (.*)$", r.out, re.M)[:3] == [rec["checksum"], rec["last_size"], rec["link_len"]]


def test_reverse_continue_over_buffered_calls_to_a_watchpoint(procs, tmp_path, target):
    p, trace = record(tmp_path, target, "on")
    rec = printed(p.stdout.decode())
    last = int(rec["last_size"])
    r = replay_values(procs, trace, ["watch last_size", "reverse-continue", "print last_size",
                                     "reverse-continue", "print last_size"])
    # Back from the end: the last round's write (its Old value the round before's), then the one before.
    assert re.search(r"Old value = %d\s+New value = %d" % (last - 1, last), r.out), r
    assert re.search(r"Old value = %d\s+New value = %d" % (last - 2, last - 1), r.out), r
    vals = re.findall(r"^\$\d+ = (.*)$", r.out, re.M)
    assert vals[3:5] == [str(last - 1), str(last - 2)], r
