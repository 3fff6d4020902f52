"""Non-stop mode (issue 16) with the real GDB: what works in all-stop keeps working while
other threads run. In each test one thread meets an event (a syscall stop, a fork, a
watchpoint, a target-evaluated condition, the leader's exit) and stops alone; a spinner thread
counts on meanwhile (`counter` grows between two prints a moment apart). The sessions end with
the program still running (GDB's batch end kills it), as in test_gdb_non_stop.py."""
import re

import pytest

from harness import IS_GDBSERVER, gdb_remote, inferior, watch_args

EVENTS = inferior("nonstop_events")
NON_STOP = ["set non-stop on"]
# The spinner has counted on while the stopped thread sat still: two prints a moment apart.
SPIN_CHECK = ["print counter", "shell sleep 0.3", "print counter"]
# GDB keeps the selected thread when another one stops in non-stop: select the one stopped
# thread (the tests have exactly one stopped at a time).
SELECT = "python [t.switch() for t in gdb.selected_inferior().threads() if t.is_stopped()]"


def values(out):
    return [int(v) for v in re.findall(r"^\$\d+ = (-?\d+)", out, re.M)]


def running_threads(out, after):
    """Threads `info threads` (the first after `after`) shows as running."""
    info = out[out.index("Id   Target Id", out.index(after)):]
    info = info.split("\n\n")[0]
    return len(re.findall(r"\(running\)", info))


def test_catch_syscall_in_one_thread_while_another_runs(procs):
    srv = procs.server(["--once", "{COMM}", EVENTS, "syscall", "120"])
    r = gdb_remote(srv, ["catch syscall getppid", "continue"] + SPIN_CHECK +
                   ["info threads", SELECT, "continue", "bt 2"] + SPIN_CHECK,
                   prog=EVENTS, pre=NON_STOP, timeout=60)
    out = r.out
    if not IS_GDBSERVER:  # gdbserver 13.1 reports a new thread's first syscall stop as a return
        assert re.search(r"Thread \d+ \"nonstop_events\" hit Catchpoint 1 \(call to syscall getppid\)", out), r
    assert re.search(r"Thread \d+ \"nonstop_events\" hit Catchpoint 1 \(returned from syscall getppid\)", out), r
    assert re.search(r"#1 +0x[0-9a-f]+ in worker \(", out), r
    v = values(out)
    assert len(v) == 4 and v[1] > v[0] and v[3] > v[2], r
    assert running_threads(out, "hit Catchpoint 1") == 2, r  # main and the spinner


def test_catch_fork_follow_parent_while_another_runs(procs):
    srv = procs.server(["--once", "{COMM}", EVENTS, "fork", "120"])
    r = gdb_remote(srv, ["set follow-fork-mode parent", "catch fork", "break event_done", "continue"]
                   + SPIN_CHECK + ["info threads", SELECT, "continue", "print child_status", "info inferiors"]
                   + SPIN_CHECK, prog=EVENTS, pre=NON_STOP, timeout=60)
    out = r.out
    m = re.search(r"Thread \d+ \"nonstop_events\" hit Catchpoint 1 \(forked process (\d+)\)", out)
    assert m, r
    assert "[Detaching after fork from child process %s]" % m.group(1) in out, r
    assert re.search(r"Thread \d+ \"nonstop_events\" hit Breakpoint 2, event_done \(\)", out), r
    v = values(out)
    assert len(v) == 5 and v[1] > v[0] and v[4] > v[3], r
    assert v[2] == 7, r  # the detached child ran to its end
    assert running_threads(out, "forked process") == 2, r
    assert not re.search(r"^ +2 +process", out, re.M), r  # one inferior: the child is gone


def test_follow_fork_mode_child_in_non_stop(procs):
    """GDB follows the child of the forking thread: the parent (its spinner running) is
    detached, the child hits its breakpoint and runs to its end (exit code 7)."""
    srv = procs.server(["--once", "{COMM}", EVENTS, "fork", "120"])
    r = gdb_remote(srv, ["set follow-fork-mode child", "break in_child", "continue", "info threads",
                         "inferior 2", SELECT, "bt 1", "continue"],
                   prog=EVENTS, pre=NON_STOP, timeout=60)
    out = r.out
    m = re.search(r"\[Detaching after fork from parent process (\d+)\]", out)
    assert m, r
    procs.allowed.add(int(m.group(1)))  # detached and running on: ended at teardown
    assert re.search(r"Thread 2\.1 \"nonstop_events\" hit Breakpoint 1, in_child \(\)", out), r
    assert re.search(r"^#0 +in_child \(\)", out, re.M), r
    assert re.search(r"\[Inferior 2 \(process \d+\) exited with code 07\]", out), r


def test_detach_on_fork_off_in_non_stop(procs):
    """Both processes debugged: the child stops at its breakpoint (thread 2.1) while the
    parent's threads run on, and runs to its end when continued."""
    srv = procs.server(["--once", "{COMM}", EVENTS, "fork", "120"])
    r = gdb_remote(srv, ["set detach-on-fork off", "break in_child", "continue", "info inferiors",
                         "info threads", "inferior 2", "continue"],
                   prog=EVENTS, pre=NON_STOP, timeout=60)
    out = r.out
    assert re.search(r"Thread 2\.1 \"nonstop_events\" hit Breakpoint 1\.2, in_child \(\)", out), r
    assert re.search(r"^ +2 +process \d+ ", out, re.M), r
    info = out[out.index("Id   Target Id"):].split("[Switching")[0]
    # main and the spinner of the parent were never stopped by the fork
    assert re.search(r"^\*? +1\.1 +Thread .*\(running\)", info, re.M), r
    assert re.search(r"^ +1\.3 +Thread .*\(running\)", info, re.M), r
    assert re.search(r"^ +2\.1 +Thread .*in_child \(\)", info, re.M), r
    assert re.search(r"\[Inferior 2 \(process \d+\) exited with code 07\]", out), r


def test_watchpoint_in_one_thread_while_another_runs(procs, watch_mode):
    srv = procs.server(watch_args(watch_mode) + ["--once", "{COMM}", EVENTS, "watch", "120"])
    r = gdb_remote(srv, ["break main", "continue", "watch watched", "continue"] + SPIN_CHECK +
                   ["info threads", "delete", SELECT, "break event_done", "continue", "print visited"]
                   + SPIN_CHECK, prog=EVENTS, pre=NON_STOP, timeout=90)
    out = r.out
    assert re.search(r"Thread \d+ \"nonstop_events\" hit Hardware watchpoint 2: watched\s+"
                     r"Old value = 0\s+New value = 1\s+worker \(", out), r
    assert re.search(r"hit Breakpoint 3, event_done \(\)", out), r
    v = values(out)
    assert len(v) == 5 and v[1] > v[0] and v[4] > v[3], r
    assert v[2] == 1, r
    assert running_threads(out, "Hardware watchpoint 2: watched") == 2, r


def test_target_condition_in_one_thread_while_another_runs(procs):
    srv = procs.server(["--once", "{COMM}", EVENTS, "cond", "120"])
    r = gdb_remote(srv, ["set breakpoint condition-evaluation target", "break visit if i == 7",
                         "continue", SELECT, "print i"] + SPIN_CHECK +
                   ["info threads", "info breakpoints", "delete", "break event_done", "continue",
                    "print visited"], prog=EVENTS, pre=NON_STOP, timeout=60)
    out = r.out
    if not IS_GDBSERVER:
        assert "(target evals)" in out, r  # GDB really left the condition to the server
    stops = re.findall(r"hit Breakpoint 1, visit \(i=(\d+)\)", out)
    assert stops == ["7"], r
    assert re.search(r"breakpoint already hit 1 time\b", out), r
    assert re.search(r"hit Breakpoint 2, event_done \(\)", out), r
    v = values(out)
    assert len(v) == 4 and v[0] == 7 and v[2] > v[1] and v[3] == 19, r
    assert running_threads(out, "visit (i=7)") == 2, r


def test_leader_exits_first_with_pthread_exit(procs):
    """main calls pthread_exit while the other thread runs on; that thread's breakpoint is
    reported, the leader is gone from the list, the exit status is the thread's."""
    prog = inferior("leader_exit")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break after_leader_exit", "continue", "info threads", SELECT, "continue"],
                   prog=prog, pre=NON_STOP, timeout=60)
    out = r.out
    assert re.search(r"Thread 2 .* hit Breakpoint 1, .*after_leader_exit", out), r
    threads = out[out.index("Id   Target Id"):].split("\n\n")[0]
    # The leader (thread 1, the selected one: no `*` is left) is gone, as with gdbserver.
    assert re.search(r"^\s+2\s+Thread .*after_leader_exit \(\)", threads, re.M), r
    assert not re.search(r"^\*?\s+1\s+Thread", threads, re.M), r
    assert re.search(r"exited with code 05", out), r


def test_stepbranch_script_in_non_stop_steps_from_gdb(procs):
    """branchstub refuses its stepbranch in non-stop (the process cannot be held stopped, and
    the answer would be a stop reply); the GDB command says so and single-steps the selected
    thread from GDB to its next taken branch (visit's ret), the spinner running on."""
    from harness import GDB_SCRIPT
    srv = procs.server(["--once", "{COMM}", EVENTS, "cond", "120"])
    r = gdb_remote(srv, ["break visit if i == 3", "continue", SELECT, "stepbranch", "bt 1",
                         "print $pc == (long) &visit"] + SPIN_CHECK,
                   prog=EVENTS, pre=["source " + GDB_SCRIPT] + NON_STOP, timeout=60)
    out = r.out
    assert "stepbranch: non-stop mode: branchstub's stepbranch needs all-stop mode" in out, r
    assert re.search(r"^branch 0x[0-9a-f]+ -> 0x[0-9a-f]+ <worker\+\d+>$", out, re.M), r
    assert re.search(r"^#0 +0x[0-9a-f]+ in worker \(", out, re.M), r
    v = values(out)
    assert len(v) == 3 and v[0] == 0 and v[2] > v[1], r  # out of visit; the spinner ran


def test_catch_exec_from_a_thread_in_non_stop(procs):
    """A thread that is not the leader execs: the exec catchpoint is reported for the one
    thread left (it carries the process id), the new program runs to its breakpoint and end."""
    execer, basic = inferior("execer"), inferior("basic")
    srv = procs.server(["--once", "{COMM}", execer, "--from-thread", basic])
    r = gdb_remote(srv, ["set breakpoint pending on", "break compute", "catch exec", "continue",
                         "info threads", "continue", "bt 1", "delete", "continue"],
                   prog=execer, pre=NON_STOP, timeout=60)
    out = r.out
    m = re.search(r"process (\d+) is executing new program: .*/basic\b", out)
    assert m, r
    assert re.search(r"Catchpoint 2 \(exec'd .*/basic\)", out), r
    assert re.search(r"^\* 1 +Thread %s\.%s \"basic\"" % (m.group(1), m.group(1)), out, re.M), r
    assert not re.search(r"^  2 +Thread", out, re.M), r
    assert re.search(r"^#0 +compute \(x=0\)", out, re.M), r
    assert re.search(r"\[Inferior 1 \(process %s\) exited with code 07\]" % m.group(1), out), r
