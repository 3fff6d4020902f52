"""branchstub record / replay counting branches through block patching (docs/record-replay.md,
"Branch counts"): the count is the thread's taken branches whichever mechanism counted them,
so a recording made with the software engine (--btrace-source=soft) replays under block
patching and the other way round, every event at its recorded count, with the program's own
mmaps where they were recorded (the patch source's areas are kept out of their way); a timer
signal in a busy loop recorded at native speed replays at its count; `gzip -c` and `ls -l`,
the issue's benchmark programs, record and replay under GDB."""
import os
import re
import subprocess

import pytest

from harness import SERVER, gdb, gdb_remote, inferior
from test_record_replay import input_file, printed  # noqa: F401 (input_file: a fixture)

pytestmark = pytest.mark.branchstub_only

PROG = inferior("replay_prog")


def record(tmp_path, argv, name, source=None, timeout=120, preexec_fn=None, options=()):
    trace = tmp_path / name
    extra = (["--btrace-source=" + source] if source else []) + list(options)
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    p = subprocess.run([SERVER, "record", "-o", str(trace)] + extra + argv, capture_output=True, timeout=timeout,
                       env=env, cwd=str(tmp_path), preexec_fn=preexec_fn)
    assert b"trace in" in p.stderr, p.stderr
    return p, trace


def replay(procs, trace, prog, cmds, source=None, timeout=120):
    """cmds, then a `continue` more: the recorded end holds the program once (reverse execution
    can start there), the next continue lets it end."""
    extra = ["--btrace-source=" + source] if source else []
    srv = procs.server(["replay", "--once"] + extra + ["{COMM}", str(trace)])
    r = gdb_remote(srv, list(cmds) + ["continue"], prog=prog, timeout=timeout)
    assert "divergence" not in r.out and "divergence" not in srv.stderr.text, r
    return r



@pytest.mark.parametrize("recorded_with,replayed_with", [("soft", None), (None, "soft")])
def test_counts_do_not_depend_on_the_counter(procs, tmp_path, input_file, recorded_with, replayed_with):
    p, trace = record(tmp_path, [PROG, str(input_file)], "t", recorded_with)
    rec = printed(p.stdout.decode())
    r = replay(procs, trace, PROG, ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue",
                                    "print pid", "print random_value", "continue"], replayed_with)
    assert "$1 = %s" % rec["pid"] in r.out, r
    assert "$2 = %s" % rec["random"] in r.out, r
    assert re.search(r"exited with code 0?\d+\]", r.out), r


def test_busy_loop_signals_recorded_by_the_engine_replay_through_patches(procs, tmp_path, input_file):
    """Signals in the program's code, recorded by the software engine (few loop iterations),
    replayed through block patching: the int3 at their pc goes in near their count."""
    p, trace = record(tmp_path, [PROG, str(input_file), "busy"], "t", "soft")
    alarms = printed(p.stdout.decode())["alarms"].split(",")
    r = replay(procs, trace, PROG, ["handle SIGUSR1 nostop noprint pass", "break values_ready", "continue",
                                    "print alarm_at", "continue"])
    assert "$1 = {%s}" % ", ".join(alarms) in r.out, (alarms, r)


def test_record_refuses_other_counters(tmp_path, input_file):
    p = subprocess.run([SERVER, "record", "--btrace-source=bts", PROG, str(input_file)], capture_output=True,
                       timeout=30)
    assert p.returncode == 1 and b"unknown option --btrace-source=bts" in p.stderr, p.stderr


def test_gzip_records_and_replays(procs, tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("".join("line %d of the data that gzip compresses\n" % i for i in range(20000)))
    native = subprocess.run(["/bin/gzip", "-c", str(data)], capture_output=True, timeout=30)
    p, trace = record(tmp_path, ["/bin/gzip", "-c", str(data)], "t")
    assert p.returncode == 0 and p.stdout == native.stdout  # its output is the program's own
    r = replay(procs, trace, "/bin/gzip", ["continue"])
    assert "exited normally" in r.out, r


def test_inherited_signal_dispositions_do_not_diverge(procs, tmp_path):
    """gzip asks which of SIGINT, SIGHUP, SIGTERM... are ignored and handles only the others:
    recorded with SIGINT ignored (a shell's background job), replayed by a server that has it
    at its default, the program is told what it was told when recorded."""
    import signal
    data = tmp_path / "data.txt"
    data.write_text("some text\n" * 100)
    p, trace = record(tmp_path, ["/bin/gzip", "-c", str(data)], "t",
                      preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert p.returncode == 0, p.stderr
    r = replay(procs, trace, "/bin/gzip", ["continue"])
    assert "exited normally" in r.out, r


@pytest.mark.parametrize("source", [None, "soft"])
def test_signals_inside_rep_string_instructions_replay_at_their_iteration(procs, tmp_path, source):
    """SIGALRMs from a 1 ms timer while the program copies and fills 32 MiB with single `rep
    movsb`/`rep stosb` instructions: most arrive halfway through one (the handler keeps the
    interrupted rcx, the bytes left). The replay reaches the instruction at the recorded count
    before any iteration; it does the iterations up to the recorded registers and delivers the
    signal there: the handler sees the same rcx, the buffers end the same (a divergence before,
    "reached it with other registers"; and, under block patching, one at the same pc as the
    signal just delivered: the rep instruction met again under its int3 before the count is
    finished by the replay, not stepped an iteration at a time, each step looking like a taken
    branch). The recording itself takes well under a minute (each
    signal used to be a reported stop, taking every patch out and in: longer than the timer's
    period, so the program never got anywhere)."""
    prog = inferior("rep_signal")
    p, trace = record(tmp_path, [prog], "t", timeout=60)
    assert p.returncode == 0, p.stderr
    rec = printed(p.stdout.decode())
    assert int(rec["alarms_in_rep"]) >= 1, rec  # 6 of 6 natively and recorded here
    r = replay(procs, trace, prog, ["break values_ready", "continue", "print alarm_rcx", "print buffer_sum",
                                    "continue"], source=source)
    assert "$1 = {%s}" % ", ".join(rec["alarms_rcx"].split(",")) in r.out, (rec, r)
    assert "$2 = %s" % rec["buffer_sum"] in r.out, (rec, r)
    assert "exited normally" in r.out, r


def test_a_timer_faster_than_the_recording_neither_hangs_it_nor_diverges(procs, tmp_path):
    """fast_timer: a loop with no system call under a 200 us interval timer. Each signal costs a
    recording several ptrace stops; once they take longer than the period, the next signal is
    pending when the handler returns and the program never runs again (the recording hung: a 1 ms
    timer did so on a loaded machine). The recorder holds back a signal that interrupts the
    program's code before it has run 0.5 ms of CPU since the last one delivered (the kernel may
    deliver late and merges a pending signal of a kind) and raises it again when due; only the
    delivered ones are recorded, and the replay delivers those at their counts: the same work
    done, the same number of signals seen by the handler."""
    prog = inferior("fast_timer")
    p, trace = record(tmp_path, [prog, "1000000", "200"], "t", timeout=120)
    assert p.returncode == 0, p.stderr
    rec = printed(p.stdout.decode())
    assert int(rec["ticks"]) >= 1, rec
    r = replay(procs, trace, prog, ["handle SIGALRM nostop noprint pass", "break values_ready", "continue",
                                    "print hash", "print ticks", "continue"], timeout=240)
    assert "$1 = %s" % rec["hash"] in r.out, (rec, r)
    assert "$2 = %s" % rec["ticks"] in r.out, (rec, r)
    assert "exited normally" in r.out, r


def test_inherited_ignored_signals_are_the_recorded_ones(procs, tmp_path):
    """Recorded with SIGUSR2 ignored (inherited through exec, as from a shell's job), replayed
    by a server that has it at its default: the replay gives the program the recorded
    dispositions before its first instruction (trace header sig-ignored; the mask too,
    sig-blocked, though the launcher starts every program with an empty one), so its
    raise(SIGUSR2) vanishes as recorded (before, the replay's kernel killed it: a divergence)."""
    import signal
    prog = inferior("inherited_signals")
    p, trace = record(tmp_path, [prog], "t", preexec_fn=lambda: signal.signal(signal.SIGUSR2, signal.SIG_IGN))
    assert p.returncode == 0 and printed(p.stdout.decode()) == {"usr2_ignored": "1"}, p
    header = (trace / "header").read_text()
    ignored = int(re.search(r"^sig-ignored ([0-9a-f]+)$", header, re.M).group(1), 16)
    assert ignored & (1 << (signal.SIGUSR2 - 1)), header
    assert re.search(r"^sig-blocked 0$", header, re.M), header
    r = replay(procs, trace, prog, ["handle SIGUSR2 nostop noprint pass", "continue", "continue"])
    assert "exited normally" in r.out, r


WITH_FDS = ["sh", "-c", 'exec 3</dev/null 4</dev/null 9</dev/null; exec "$@"', "sh"]


def test_descriptors_inherited_by_the_recorder_or_the_replay_do_not_diverge(procs, tmp_path, input_file):
    """The program opens its file at the lowest free descriptor: 6 when recorded by a
    `branchstub record` that inherited 3, 4 and 9 from its shell, 3 when replayed by a server
    that did not; recorded with none, 3, and 6 when replayed by a server that inherited them.
    Each replay gives the program the recording's descriptors (trace header `fds`), so both
    replay to the end, the file read as recorded."""
    env = dict(os.environ, BRANCHSTUB_TRACE_DIR=str(tmp_path / "traces"))
    args = [PROG, str(input_file)]
    p = subprocess.run(WITH_FDS + [SERVER, "record", "-o", str(tmp_path / "with")] + args, capture_output=True,
                       timeout=60, env=env, cwd=str(tmp_path))
    assert b"trace in" in p.stderr and b"refused" not in p.stderr, p.stderr  # its status: random % 7 + 3
    header = (tmp_path / "with" / "header").read_text()
    assert re.search(r"^fds 0 1 2 3 4 9$", header, re.M), header
    r = replay(procs, tmp_path / "with", PROG, ["handle SIGUSR1 nostop noprint pass", "break values_ready",
                                                 "continue", "print file_text", "continue"])
    assert '$1 = "recorded-input-42"' in r.out and "exited with code" in r.out, r

    p, trace = record(tmp_path, args, "without")
    assert b"refused" not in p.stderr, p.stderr
    comm = "target remote | %s" % " ".join(WITH_FDS[:2] + ["'%s'" % WITH_FDS[2]] + WITH_FDS[3:] +
                                             [SERVER, "replay", "-", str(trace)])
    r = gdb([comm, "handle SIGUSR1 nostop noprint pass", "break values_ready", "continue", "print file_text",
             "continue", "continue"], prog=PROG)
    assert "divergence" not in r.out and "diverged" not in r.out, r
    assert '$1 = "recorded-input-42"' in r.out and "exited with code" in r.out, r


def test_ls_l_records_and_replays(procs, tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    for i in range(20):
        (d / ("file%d" % i)).write_text("x" * i)
    os.symlink("file3", str(d / "link"))
    native = subprocess.run(["/bin/ls", "-l", str(d)], capture_output=True, timeout=30)
    p, trace = record(tmp_path, ["/bin/ls", "-l", str(d)], "t")
    assert p.returncode == 0 and p.stdout == native.stdout, p.stderr
    r = replay(procs, trace, "/bin/ls", ["continue"])
    assert "exited normally" in r.out, r


@pytest.mark.parametrize("mode", ["data", "code"])
def test_mapping_calls_keep_the_patches_unless_code_changes(procs, tmp_path, mode):
    """mmap/mprotect/munmap while recording and replaying through block patching (every system
    call stops there): calls on the program's data (anonymous and file mappings, a MAP_FIXED
    over its own page, mprotect, munmap) leave the patches in, where each used to take every
    patch out and put it back (52 installs for the replay below, 5 now; `ls -l` of a large
    directory records ~20 % faster); a dlopen/dlclose of libm (a mapping with PROT_EXEC comes
    and goes) still takes them out and in again. The replay's history of the region is the
    software engine's either way, libm's code included (GDB cannot read it after the dlclose,
    and says so the same way for both)."""
    prog = inferior("patchmaps")
    p, trace = record(tmp_path, [prog, mode, "5"], "t")
    assert p.returncode == 0 and b"sum=" in p.stdout, p
    native = subprocess.run([prog, mode, "5"], capture_output=True, timeout=30)
    assert p.stdout == native.stdout
    cmds = ["set record function-call-history-size unlimited", "set record instruction-history-size unlimited",
            "break trace_begin", "continue", "record btrace", "break trace_end", "continue",
            "monitor btrace status", "info record", "record instruction-history /r", "record function-call-history /ilc"]
    patch = replay(procs, trace, prog, cmds, source="patch").out
    soft = replay(procs, trace, prog, cmds, source="soft").out
    history = re.compile(r"^(?:Recorded|warning|\d+\t).*$", re.M)
    lines = history.findall(patch)
    assert lines == history.findall(soft) and len(lines) > 1000, (patch[-3000:], soft[-3000:])
    installs = int(re.search(r"(\d+) installs", patch).group(1))
    if mode == "data":
        assert installs < 12, installs
    else:
        assert installs >= 10, installs  # each dlopen and dlclose: out, the regions read again, in
