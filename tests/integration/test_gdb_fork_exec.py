"""exec (and fork) events with GDB 13: the program image changes under the debugger and GDB
follows it, as with gdbserver (issue 2)."""
import re

import pytest

from harness import gdb_remote, inferior, lldb

EXECER, BASIC = inferior("execer"), inferior("basic")


def test_exec_is_followed_and_caught(procs):
    srv = procs.server(["--once", "{COMM}", EXECER, BASIC])
    r = gdb_remote(srv, ["set breakpoint pending on", "break compute", "catch exec",
                         "continue", "continue", "bt 2", "info inferiors", "delete", "continue"],
                   prog=EXECER)
    out = r.out
    assert re.search(r"process \d+ is executing new program: .*/basic\b", out), r
    assert re.search(r"Catchpoint 2 \(exec'd .*/basic\)", out), r
    assert re.search(r"Breakpoint 1, compute \(x=0\) at .*basic\.c:\d+", out), r
    assert re.search(r"#1 +0x[0-9a-f]+ in main \(\) at .*basic\.c", out), r
    assert "SIGTRAP" not in out, r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out), r


def test_exec_from_a_thread_that_is_not_the_leader(procs):
    srv = procs.server(["--once", "{COMM}", EXECER, "--from-thread", BASIC])
    r = gdb_remote(srv, ["set breakpoint pending on", "break compute", "continue",
                         "info threads", "delete", "continue"], prog=EXECER)
    out = r.out
    assert re.search(r"process (\d+) is executing new program: .*/basic\b", out), r
    pid = re.search(r"process (\d+) is executing", out).group(1)
    assert re.search(r"Breakpoint 1, compute \(x=0\)", out), r
    # One thread left, and it carries the process id.
    assert re.search(r"^\* 1 +Thread %s\.%s " % (pid, pid), out, re.M), r
    assert not re.search(r"^  2 +Thread", out, re.M), r
    assert re.search(r"exited with code 07", out), r


def test_exec_from_a_thread_with_scheduler_locking(procs):
    """Only the exec'ing thread is resumed; its tid vanishes before the leader reports the
    exec, and the server must wait for that event instead of saying "no resumed" (GDB's
    thread-execl.exp, schedlock on)."""
    for attempt in range(3):  # the window is a race: give it several chances to show
        srv = procs.server(["--once", "{COMM}", EXECER, "--from-thread", BASIC])
        r = gdb_remote(srv, ["set breakpoint pending on", "break before_exec", "break compute",
                             "continue", "set scheduler-locking on", "continue", "info threads"],
                       prog=EXECER)
        out = r.out
        assert "No unwaited-for children left" not in out, r
        assert re.search(r"process (\d+) is executing new program: .*/basic\b", out), r
        assert re.search(r"Breakpoint 2, compute \(x=0\)", out), r


@pytest.mark.branchstub_only
def test_lldb_stops_at_exec_and_follows(procs):
    """gdbserver reports a bare SIGTRAP to LLDB here; lldb-server and we say reason:exec."""
    srv = procs.server(["--once", "{COMM}", EXECER, BASIC])
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port, "b compute", "c", "c", "bt 2",
              "process kill"], timeout=90)
    out = r.out
    assert re.search(r"stop reason = exec", out), r
    assert re.search(r"stop reason = breakpoint 1\.1", out), r
    assert re.search(r"frame #0: 0x[0-9a-f]+ basic`compute\(x=0\)", out), r


FORKER = inferior("forker")


def test_fork_caught_and_child_detached(procs):
    srv = procs.server(["--once", "{COMM}", FORKER])
    r = gdb_remote(srv, ["break after_fork", "catch fork", "continue", "continue",
                         "info inferiors", "continue"], prog=FORKER)
    out = r.out
    m = re.search(r"Catchpoint 2 \(forked process (\d+)\)", out)
    assert m, r
    assert "[Detaching after fork from child process %s]" % m.group(1) in out, r
    assert re.search(r"Breakpoint 1, after_fork \(\)", out), r
    assert not re.search(r"^ +2 +process", out, re.M), r      # one inferior: the child is gone
    assert re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", out), r


def test_follow_fork_mode_child(procs):
    """GDB follows the child: the parent is detached (and runs on), the child is debugged."""
    srv = procs.server(["--once", "{COMM}", FORKER, "work"])
    r = gdb_remote(srv, ["set follow-fork-mode child", "break in_child", "continue", "bt 2",
                         "next", "print child_value", "continue"], prog=FORKER)
    out = r.out
    assert re.search(r"\[Attaching after Thread \d+\.\d+ fork to child Thread (\d+)\.\d+\]", out), r
    child = re.search(r"fork to child Thread (\d+)", out).group(1)
    assert re.search(r"\[Detaching after fork from parent process \d+\]", out), r
    assert re.search(r"hit Breakpoint 1, in_child \(\)", out), r
    assert re.search(r"#1 +0x[0-9a-f]+ in main \(", out), r
    assert "$1 = 42" in out, r
    assert "[Inferior 2 (process %s) exited with code 05]" % child in out, r


def test_vfork_caught_and_parent_goes_on(procs):
    srv = procs.server(["--once", "{COMM}", FORKER, "vfork"])
    r = gdb_remote(srv, ["break after_fork", "catch vfork", "continue", "continue",
                         "continue"], prog=FORKER)
    out = r.out
    m = re.search(r"Catchpoint 2 \(vforked process (\d+)\)", out)
    assert m, r
    assert "[Detaching after vfork from child process %s]" % m.group(1) in out, r
    assert re.search(r"Breakpoint 1, after_fork \(\)", out), r
    assert re.search(r"exited normally", out), r


@pytest.mark.branchstub_only
def test_lldb_fork_child_detached(procs):
    """LLDB takes our int3s out of the child (Hg child, z0) and detaches it (D;child)."""
    srv = procs.server(["--once", "{COMM}", FORKER])
    r = lldb(["gdb-remote 127.0.0.1:%d" % srv.port, "b after_fork", "c", "c"], timeout=90)
    out = r.out
    assert re.search(r"stop reason = breakpoint 1\.1\n +frame #0: 0x[0-9a-f]+ forker`after_fork", out), r
    assert re.search(r"Process \d+ exited with status = 0", out), r


def test_vfork_follow_child_until_exec(procs):
    """The vfork parent waits, held, while GDB debugs the child; after the child's exec GDB
    lets the parent go."""
    srv = procs.server(["--once", "{COMM}", FORKER, "vfork"])
    r = gdb_remote(srv, ["set follow-fork-mode child", "catch exec", "continue", "info inferiors",
                         "continue"], prog=FORKER)
    out = r.out
    assert re.search(r"\[Attaching after Thread \d+\.\d+ vfork to child Thread \d+\.\d+\]", out), r
    assert re.search(r"\[Detaching vfork parent process \d+ after child exec\]", out), r
    assert re.search(r"hit Catchpoint 1 \(exec'd /usr/bin/true\)", out), r
    assert re.search(r"\[Inferior 2 \(process \d+\) exited normally\]", out), r


def test_detach_on_fork_off_debugs_parent_and_child(procs):
    """Two processes at once, all-stop: the child stops at its breakpoint, runs to its exit,
    then the parent (stopped meanwhile) goes on to its own breakpoint and exit."""
    srv = procs.server(["--once", "{COMM}", FORKER, "work"])
    r = gdb_remote(srv, ["set detach-on-fork off", "set schedule-multiple on", "break in_child",
                         "break after_fork", "continue", "next", "print child_value", "continue",
                         "inferior 1", "continue", "continue"], prog=FORKER, timeout=90)
    out = r.out
    assert re.search(r"\[New inferior 2 \(process \d+\)\]", out), r
    assert re.search(r"Thread 2\.1 \"forker\" hit Breakpoint 1\.2, in_child \(\)", out), r
    assert "$1 = 42" in out, r
    assert re.search(r"\[Inferior 2 \(process \d+\) exited with code 05\]", out), r
    assert re.search(r"Thread 1\.1 \"forker\" hit Breakpoint 2\.1, after_fork \(\)", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 05\]", out), r
