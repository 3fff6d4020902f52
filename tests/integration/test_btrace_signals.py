"""Signal entries in a `record btrace` history, live and on a replay (docs/btrace.md, "Signals").

A signal delivered where a thread had just arrived by a branch, before the first instruction
there ran (a breakpoint reached by a call, the loop head a replay's in-code signal lands on),
or before anything ran since recording began: the history goes from that branch (or from the
start) into the handler. Before, the handler entry was lost there and GDB decoded a block from
the delivery pc into the handler ("Recorded trace may be corrupted", a gap). `record btrace`
on a replay gives the live run's history."""
import re

import pytest

from harness import gdb_remote, inferior
from test_record_replay import input_file, printed  # noqa: F401 (input_file: a fixture)
from test_record_replay_counting import record, replay

pytestmark = pytest.mark.branchstub_only

SIGNAL_PROG = inferior("branches_signal")
BRANCHES = inferior("branches")
HISTORY = ["set record function-call-history-size unlimited", "set record instruction-history-size unlimited"]


def section(out, name):
    m = re.search(r"^==%s==\n(.*?)^==END==" % name, out, re.M | re.S)
    assert m, out[-3000:]
    return m.group(1).splitlines()


def insn_lines(lines):
    """`record instruction-history` lines without their numbers: (address, symbol+offset)."""
    return [m.group(1) for m in (re.match(r"^\d+\t(?:=> )?\s*(0x[0-9a-f]+ <[^>]+>)", l) for l in lines) if m]


def no_gap(r):
    assert "may be corrupted" not in r.out and "decode error" not in r.out, r
    assert "(0 gaps)" in r.out, r


@pytest.mark.parametrize("source", ["soft", "patch"])
def test_signal_delivered_right_after_a_call(procs, source):
    """Stopped at trace_end's first instruction (the call reached it), then `signal SIGUSR1`:
    the history goes from the call into on_usr1; trace_end+0 never ran, so it is not in it."""
    srv = procs.server(["--once", "--btrace-source=" + source, "{COMM}", SIGNAL_PROG])
    r = gdb_remote(srv, HISTORY + ["handle SIGUSR1 nostop noprint pass", "break trace_begin", "continue",
                                   "record btrace", "break *trace_end", "continue", "info record", "delete",
                                   "break in_handler", "signal SIGUSR1", "info record",
                                   "echo ==INSN==\\n", "record instruction-history", "echo ==END==\\n",
                                   "continue"], prog=SIGNAL_PROG, timeout=120)
    no_gap(r)
    insns = insn_lines(section(r.out, "INSN"))
    at = [i for i, l in enumerate(insns) if l.endswith("<on_usr1+0>")]
    assert len(at) == 2, insns[-30:]  # the program's own raise(), then ours
    before = r.out[r.out.index("==INSN=="):].splitlines()
    entry = [l for l in before if "<on_usr1+0>" in l][-1]
    prev = before[before.index(entry) - 1]
    assert re.search(r"call\s+0x[0-9a-f]+ <trace_end>", prev), (prev, entry)
    assert not any(l.endswith("<trace_end+0>") for l in insns), insns[-12:]
    assert "exited with code 03" in r.out, r  # the region's raise, ours, and the last one


@pytest.mark.parametrize("source", ["soft", "patch"])
def test_signal_delivered_before_anything_ran(procs, source):
    """`record btrace` at a stop, then the signal at once: the history starts in the handler."""
    srv = procs.server(["--once", "--btrace-source=" + source, "{COMM}", SIGNAL_PROG])
    r = gdb_remote(srv, HISTORY + ["handle SIGUSR1 nostop noprint pass", "break trace_end", "continue",
                                   "record btrace", "delete", "break in_handler", "signal SIGUSR1",
                                   "echo ==INSN==\\n", "record instruction-history", "echo ==END==\\n",
                                   "info record", "continue"], prog=SIGNAL_PROG, timeout=120)
    no_gap(r)
    insns = insn_lines(section(r.out, "INSN"))
    assert insns and insns[0].endswith("<on_usr1+0>"), insns
    assert re.search(r"Recorded 7 instructions in 2 functions", r.out), r


@pytest.mark.parametrize("source", [None, "soft"])
def test_btrace_on_a_replay_is_the_live_history(procs, tmp_path, source):
    """The same GDB commands over the live program and over a replay of its recording:
    `info record`, the instruction and the function-call histories are the same."""
    p, trace = record(tmp_path, [BRANCHES], "t")
    assert p.returncode == 0, p.stderr
    cmds = HISTORY + ["break trace_begin", "continue", "record btrace", "break trace_end", "continue",
                      "info record", "echo ==INSN==\\n", "record instruction-history /r", "echo ==END==\\n",
                      "echo ==CALLS==\\n", "record function-call-history /ilc", "echo ==END==\\n"]
    extra = ["--btrace-source=" + source] if source else []
    live = gdb_remote(procs.server(["--once"] + extra + ["{COMM}", BRANCHES]), cmds + ["continue"], prog=BRANCHES)
    replayed = replay(procs, trace, BRANCHES, cmds, source=source)
    no_gap(live)
    no_gap(replayed)
    count = re.compile(r"Recorded \d+ instructions in \d+ functions")
    assert count.findall(live.out) == count.findall(replayed.out) != [], (live, replayed)
    assert section(live.out, "INSN") == section(replayed.out, "INSN"), replayed
    assert section(live.out, "CALLS") == section(replayed.out, "CALLS"), replayed
    assert "region" in "".join(section(replayed.out, "CALLS")), replayed


def test_replayed_signals_in_code_enter_their_handler_in_the_history(procs, tmp_path, input_file):
    """A recording whose SIGALRMs arrived in a busy loop (at the loop's head, often): replayed
    with `record btrace` from main, the history has no gap and shows each handler entered."""
    p, trace = record(tmp_path, [inferior("replay_prog"), str(input_file), "busy"], "t")
    alarms = printed(p.stdout.decode())["alarms"].split(",")
    r = replay(procs, trace, inferior("replay_prog"),
               HISTORY + ["handle SIGUSR1 nostop noprint pass", "handle SIGALRM nostop noprint pass", "break main",
                          "continue", "record btrace", "break values_ready", "continue", "print alarm_at",
                          "info record", "echo ==CALLS==\\n", "record function-call-history", "echo ==END==\\n"])
    assert "$1 = {%s}" % ", ".join(alarms) in r.out, (alarms, r)
    no_gap(r)
    calls = [l.split("\t")[1] for l in section(r.out, "CALLS") if "\t" in l]
    assert "on_alarm" in calls and "__restore_rt" in calls, calls[-20:]
