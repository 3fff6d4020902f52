"""branchstub record / replay, slice 1 (docs/record-replay.md): a single-threaded program that
reads a file, asks the time, the clocks, randomness, its pid, rdtsc and signals itself is
recorded, then replayed twice under the real GDB (target remote), which sees the recorded
values; a changed trace diverges and is reported with event, position, expected and seen; what
the slice does not support (threads) is refused at record time; SIGALRMs from a timer replay at
the loop index (the branch count) where they were recorded, and every event's branch count is checked."""
import os
import re
import struct
import subprocess

import pytest

from harness import SERVER, gdb_remote, inferior

pytestmark = pytest.mark.branchstub_only

PROG = inferior("replay_prog")
VALUES = ["file", "time", "mono", "random", "pid", "tsc", "usr1"]
GDB_NAMES = {"file": "file_text", "time": "now", "mono": "mono_ns", "random": "random_value",
             "pid": "pid", "tsc": "tsc", "usr1": "usr1_count"}


def record(tmp_path, *args, name="trace"):
    trace = tmp_path / name
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "-o", str(trace), PROG] + list(args), capture_output=True,
                       timeout=60, env=env, cwd=str(tmp_path))
    return p, trace


def printed(text):
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.M))


@pytest.fixture
def input_file(tmp_path):
    f = tmp_path / "input.txt"
    f.write_text("recorded-input-42\n")
    return f


def replay_values(procs, trace):
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    cmds = ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue"]
    # The recorded end holds the program once (reverse execution can start there); then it ends.
    cmds += ["print %s" % GDB_NAMES[v] for v in VALUES] + ["continue", "continue"]
    r = gdb_remote(srv, cmds, prog=PROG)
    got = re.findall(r"^\$\d+ = (.*)$", r.out, re.M)
    assert len(got) == len(VALUES), r
    return dict(zip(VALUES, got)), r, srv



def edit_first_event(trace, edit):
    """Walks the trace's event records (12-byte head: magic, kind, size; then the body) and
    calls edit(events, kind, body) on each until one returns something (it edited that record
    in place); writes the events back and returns that value (None: nothing edited)."""
    events = bytearray((trace / "events").read_bytes())
    at, edited = 0, None
    while at < len(events) and edited is None:
        _magic, kind, size = struct.unpack_from("<III", events, at)
        edited = edit(events, kind, at + 12)
        at += 12 + size
    (trace / "events").write_bytes(bytes(events))
    return edited

def test_record_then_replay_twice_under_gdb(procs, tmp_path, input_file):
    p, trace = record(tmp_path, str(input_file))
    out = p.stdout.decode()
    rec = printed(out)
    assert rec["file"] == "recorded-input-42", out
    assert rec["usr1"] == "1", out
    native = int(rec["random"]) % 7 + 3
    assert p.returncode == native, p.stderr  # record returns the program's status
    assert b"trace in" in p.stderr
    header = (trace / "header").read_text()
    assert "complete 1" in header and "exit %d" % native in header
    assert re.search(r"^file [0-9a-f]{16} \d+ \d+-libc\.so\.6 ", header, re.M), header
    # The file changes after the recording: the replay still reads what was recorded.
    input_file.write_text("changed\n")
    for _ in range(2):
        got, r, srv = replay_values(procs, trace)
        assert got["file"].startswith('"recorded-input-42"'), r
        for v in ["time", "mono", "random", "pid", "tsc", "usr1"]:
            assert got[v] == rec[v], (v, r)
        assert "No more reverse-execution history." in r.out, r
        assert re.search(r"exited with code 0?%o\]" % native, r.out) or \
            "exited with code %02d]" % native in r.out, r
        assert "divergence" not in r.out, r
        # The program's output was seen once, when recorded: replay does not write it again.
        assert "random=" not in srv.stdout.text and "random=" not in r.out, r


def test_latest_trace_is_the_default(procs, tmp_path, input_file):
    p, trace = record(tmp_path, str(input_file))
    assert p.returncode != 125, p.stderr
    link = tmp_path / "traces" / "latest-trace"
    assert os.path.realpath(link) == str(trace)
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    srv = procs.server(["replay", "--once", "{COMM}"], env=env)
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue",
                         "print pid", "continue"], prog=PROG)
    assert "$1 = %s" % printed(p.stdout.decode())["pid"] in r.out, r


def test_divergence_is_reported_with_event_and_values(procs, tmp_path, input_file):
    """An edited result that keeps the program on its path is simply what it gets; one that
    changes what it does is a divergence, reported at the first system call that differs
    (event, position, expected vs seen), with a stop the client sees."""
    p, trace = record(tmp_path, str(input_file))
    assert p.returncode != 125, p.stderr
    # Replace the recorded read of the input file by a shorter one: fgets sees other bytes, the
    # program's next syscall differs from the recording.
    header = (trace / "header").read_text()
    data = bytearray((trace / "data").read_bytes())
    at = data.find(b"recorded-input-42")
    assert at >= 0
    data[at + 8:at + 9] = b"\n"  # the line ends early: strcspn cuts it; same syscalls though
    (trace / "data").write_bytes(bytes(data))
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue",
                         "print file_text"], prog=PROG)
    assert '"recorded"' in r.out, r  # the edited result is what the program got
    # Now a real divergence, in a fresh recording: the recorded getpid returns a pid with more
    # digits, so the program prints a longer line: its write differs from the recorded one.
    p, trace = record(tmp_path, str(input_file), name="trace2")
    assert p.returncode != 125, p.stderr
    header = (trace / "header").read_text()
    pid = int(re.search(r"^pid (\d+)$", header, re.M).group(1))
    def own_getpid(events, kind, body):
        nr = struct.unpack_from("<q", events, body + 24)[0]
        result_at = body + 32 + 48
        # The program's own getpid, the first (raise() asks again later).
        if kind == 1 and nr == 39 and events[result_at:result_at + 8] == pid.to_bytes(8, "little"):
            events[result_at:result_at + 8] = (pid * 1000 + 7).to_bytes(8, "little")
            return True
        return None
    assert edit_first_event(trace, own_getpid)
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "continue", "print pid", "bt 1", "kill"], prog=PROG)
    m = re.search(r"branchstub replay: divergence at event (\d+) of (\d+): expected write\(0x1, (0x[0-9a-f]+), "
                  r"(0x[0-9a-f]+)\) at pc (0x[0-9a-f]+), saw write\(0x1, (0x[0-9a-f]+), (0x[0-9a-f]+)\) at pc", r.out)
    assert m, r
    assert int(m.group(1)) < int(m.group(2))
    assert int(m.group(7), 16) == int(m.group(4), 16) + 3, m.group(0)  # three more digits
    assert "$1 = %d" % (pid * 1000 + 7) in r.out, r  # the edited result is what the program got
    assert "SIGTRAP" in r.out, r  # the client sees a stop, never a silent run
    assert "divergence at event" in srv.stderr.text


@pytest.mark.parametrize("mode,words", [
    ("thread", r"refused: the program called clone3? .*threads are not supported by record yet"),
])
def test_unsupported_programs_are_refused(tmp_path, input_file, mode, words):
    p, trace = record(tmp_path, str(input_file), mode)
    err = p.stderr.decode()
    assert p.returncode == 125, err
    assert re.search(words, err), err
    assert "holds no replayable trace" in err
    assert not (trace / "header").exists()
    assert not (tmp_path / "traces" / "latest-trace").exists()


def replays_alarms(procs, trace, alarms):
    """Replayed twice under GDB, the handler sees the recorded loop indices."""
    for _ in range(2):
        srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
        r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue",
                             "print alarm_at", "print alarm_count", "continue"], prog=PROG)
        assert "$1 = {%s}" % ", ".join(alarms) in r.out, (alarms, r)
        assert "$2 = 3" in r.out, r
        assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r


def test_timer_signals_replay_at_their_branch_count(procs, tmp_path, input_file):
    """Every recording replays: a SIGALRM at nanosleep's return or one in the program's code."""
    p, trace = record(tmp_path, str(input_file), "alarm")
    assert p.returncode != 125, p.stderr  # the program's own status otherwise
    rec = printed(p.stdout.decode())
    alarms = rec["alarms"].split(",")
    assert len(alarms) == 3, rec
    replays_alarms(procs, trace, alarms)


def test_timer_signals_in_a_busy_loop_replay(procs, tmp_path, input_file):
    """A loop with no syscall: each SIGALRM lands in the program's own code and is delivered
    at its recorded branch count, pc and registers."""
    p, trace = record(tmp_path, str(input_file), "busy")
    assert p.returncode != 125, p.stderr  # the program's own status otherwise
    rec = printed(p.stdout.decode())
    alarms = rec["alarms"].split(",")
    # Counted through block patching the loop runs at native speed between stops: a timer that
    # fires again while the recorder is slow over the first handler's return (a loaded
    # machine) lands at the same index, right after rt_sigreturn (still in the loop's code).
    assert len(alarms) == 3 and alarms == sorted(alarms, key=int), rec
    replays_alarms(procs, trace, alarms)


def test_signal_in_code_with_other_registers_diverges(procs, tmp_path, input_file):
    """A SIGALRM recorded in the busy loop whose register digest is edited is not delivered at
    a pc and count alone: the replay stops there with a divergence."""
    p, trace = record(tmp_path, str(input_file), "busy")
    assert p.returncode != 125, p.stderr
    def first_signal_in_code(events, kind, body):
        flags, digest = struct.unpack_from("<QQ", events, body + 40)
        if kind == 3 and flags == 2:
            struct.pack_into("<Q", events, body + 48, digest ^ 1)
            return struct.unpack_from("<Q", events, body)[0]  # its position
        return None
    edited = edit_first_event(trace, first_signal_in_code)
    assert edited is not None
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "continue", "kill"], prog=PROG)
    assert re.search(r"divergence at event %d of \d+: signal 14 at pc 0x[0-9a-f]+, branch \d+: reached it with "
                     r"other registers" % edited, r.out), r
    assert "SIGTRAP" in r.out, r


def test_branch_counts_are_checked(procs, tmp_path, input_file):
    """Every event carries the thread's taken-branch count; a count edited in the trace is a
    divergence at that event, with the expected and the seen count."""
    p, trace = record(tmp_path, str(input_file))
    assert p.returncode != 125, p.stderr
    def first_getpid(events, kind, body):
        position, branches = struct.unpack_from("<QQ", events, body)
        if kind == 1 and struct.unpack_from("<q", events, body + 24)[0] == 39:
            assert branches > 0
            struct.pack_into("<Q", events, body + 8, branches + 5)
            return position, branches
        return None
    edited = edit_first_event(trace, first_getpid)
    assert edited
    srv = procs.server(["replay", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "continue", "kill"], prog=PROG)
    position, branches = edited
    assert re.search(r"divergence at event %d of \d+: getpid\(\) at pc 0x[0-9a-f]+: expected branch count %d, "
                     r"saw %d" % (position, branches + 5, branches), r.out), r
    assert "SIGTRAP" in r.out, r


def test_replay_without_a_trace_says_so(procs, tmp_path):
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "none"))
    p = subprocess.run([SERVER, "replay", ":0"], capture_output=True, timeout=20, env=env)
    assert p.returncode == 1
    assert b"no latest trace" in p.stderr


def test_a_replay_checked_step_by_step_counts_the_signal_return(procs, tmp_path, input_file):
    """With emulated watchpoints (--watchpoints=software; the default where debug registers do
    not trap) a replay runs as checked single steps; the rt_sigreturn that ends the SIGUSR1
    handler is a branch back to where the signal came, and every later event's branch count
    must still match the recording's (it was one short: a divergence at the next syscall)."""
    p, trace = record(tmp_path, str(input_file))
    assert b"trace in" in p.stderr, p.stderr
    srv = procs.server(["replay", "--watchpoints=software", "--once", "{COMM}", str(trace)])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "watch alarm_count", "break values_ready",
                         "continue", "print usr1_count", "continue", "continue"], prog=PROG, timeout=240)
    assert re.search(r"Breakpoint 2, values_ready", r.out), r
    assert re.search(r"\$1 = 1\b", r.out), r
    assert "divergence" not in r.out and "diverged" not in r.out, r
    assert "divergence" not in srv.stderr.text, srv.stderr.text
