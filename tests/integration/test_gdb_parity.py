"""gdbserver parity in ordinary use (issue 15): stops GDB waits for, each as gdbserver reports it.
Every test here failed (hang, lost or wrong stop) before its fix; each runs against gdbserver
too (BRANCHSTUB_SERVER=/usr/bin/gdbserver)."""
import re

from harness import gdb_remote, inferior, line_of

BASIC = inferior("basic")


def L(tag):
    return "basic.c:%d" % line_of("basic", tag)


def test_jump_onto_a_breakpoint_stops_there(procs):
    """GDB resumes onto a breakpoint it left inserted (`jump`) and expects it hit at once: the
    server must not step over a GDB client's breakpoint at the resume pc."""
    srv = procs.server(["--once", "{COMM}", BASIC])
    r = gdb_remote(srv, ["break marker", "continue", "tbreak " + L("call-marker"),
                         "jump " + L("call-marker"), "continue", "continue"], prog=BASIC)
    assert re.search(r"Temporary breakpoint 2, main \(\) at .*basic\.c:%d" % line_of("basic", "call-marker"), r.out), r
    # then the breakpoint in marker is hit (marker runs after the jump target)
    assert len(re.findall(r"Breakpoint 1, marker \(\)", r.out)) == 2, r


def test_signal_delivered_at_a_breakpoint(procs):
    """`signal SIGUSR1` while stopped at a breakpoint: GDB resumes with the signal onto its own
    breakpoint and relies on it being hit when the handler returns: the handler's breakpoint
    comes first, then the same breakpoint again (as with gdbserver), then the program finishes
    with one more handler run."""
    prog = inferior("signals")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["handle SIGUSR1 nostop noprint pass", "break after_signals", "continue",
                         "break on_usr1", "signal SIGUSR1", "print sig_count", "continue", "continue"],
                   prog=prog)
    assert len(re.findall(r"Breakpoint 1, after_signals \(\)", r.out)) == 2, r
    assert re.search(r"Breakpoint 2, on_usr1 \(", r.out), r
    assert re.search(r"\$1 = 3\b", r.out), r
    assert "exited with code 04" in r.out, r


def test_only_resumed_thread_exits_no_unwaited_for_children(procs):
    """scheduler-locking: the one resumed thread exits: GDB must hear 'no resumed' (N), not
    wait for ever."""
    prog = inferior("thread_exits")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break in_thread", "continue", "set scheduler-locking on", "continue",
                         "info threads"], prog=prog, timeout=60)
    assert re.search(r"Thread 2 .* hit Breakpoint 1, .*in_thread", r.out), r
    assert "No unwaited-for children left." in r.out, r


def test_leader_exited_with_pthread_exit(procs):
    """main calls pthread_exit and stays a zombie: a breakpoint in the other thread is still
    reported (stopping the zombie leader would wait for ever), and the leader is gone from the
    thread list."""
    prog = inferior("leader_exit")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break after_leader_exit", "continue", "info threads", "continue"],
                   prog=prog, timeout=60)
    assert re.search(r"Thread 2 .* hit Breakpoint 1, .*after_leader_exit", r.out), r
    threads = r.out.split("info threads", 1)[-1].split("Continuing.")[0]
    assert re.search(r"^\*\s+2\s+Thread", threads, re.M), r
    assert not re.search(r"^\s+1\s+Thread", threads, re.M), r
    assert re.search(r"exited with code 05", r.out), r


def test_leader_exit_while_only_it_runs(procs):
    """scheduler-locking on main, which pthread_exits: the resumed leader vanishes without a
    wait status; GDB is told nothing is resumed any more."""
    prog = inferior("leader_exit")
    srv = procs.server(["--once", "{COMM}", prog])
    r = gdb_remote(srv, ["break thread_ready", "continue", "thread 1", "set scheduler-locking on",
                         "continue", "info threads"], prog=prog, timeout=60)
    assert "No unwaited-for children left." in r.out, r
    after = r.out.split("No unwaited-for children left.", 1)[-1]
    assert re.search(r"^\s+2\s+Thread", after, re.M), r
    assert not re.search(r"^\s+1\s+Thread", after, re.M), r


def test_catch_syscall_reports_execve_return(procs):
    """The return from execve is a syscall stop whose entry the server saw in the old image."""
    prog = inferior("execer")
    target = inferior("basic")
    srv = procs.server(["--once", "{COMM}", prog, target])
    r = gdb_remote(srv, ["catch syscall execve", "continue", "continue", "continue"], prog=prog, timeout=60)
    assert re.search(r"Catchpoint 1 \(call to syscall execve\)", r.out), r
    assert re.search(r"Catchpoint 1 \(returned from syscall execve\)", r.out), r
