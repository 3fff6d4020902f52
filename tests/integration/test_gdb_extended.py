"""`target extended-remote` to `SERVER --multi`: run twice, attach, detach, kill."""
import re

from harness import gdb_remote, inferior, wait_heartbeat

BASIC = inferior("basic")
SLEEPER = inferior("sleeper")


def test_run_twice_attach_detach_kill(procs, heartbeat):
    srv = procs.server(["--multi", "{COMM}"])
    sleeper, pid = procs.spawn_sleeper(heartbeat)
    r = gdb_remote(srv, [
        "set remote exec-file " + BASIC,
        "run", "run",
        "break marker", "run", "print counter", "kill",
        "delete",
        "attach %d" % pid, "print loop_counter > 0", "detach",
        "info inferiors",
    ], prog=BASIC, extended=True, timeout=90)
    out = r.out
    assert len(re.findall(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out)) == 2, r
    assert re.search(r"Breakpoint 1, marker \(\)", out), r
    assert re.search(r"\$1 = 5\b", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) killed\]", out), r
    # Attached wherever the sleeper was: mostly its nanosleep, sometimes the heartbeat write.
    assert re.search(r"\w*(nanosleep|open|write|close)\w* \(", out), r
    assert re.search(r"\$2 = 1\b", out), r
    assert re.search(r"\[Inferior 1 \(process %d\) detached\]" % pid, out), r
    first = wait_heartbeat(heartbeat)
    wait_heartbeat(heartbeat, after=first)       # the detached program runs on
    assert srv.alive(), "--multi server must outlive its clients"
    # A second client on the same server still works.
    r2 = gdb_remote(srv, ["set remote exec-file " + BASIC, "run", "monitor exit"],
                    prog=BASIC, extended=True)
    assert "exited with code 07" in r2.out, r2
    assert srv.wait_exit(10) is not None, "server still running after `monitor exit`"


def test_two_inferiors_at_once(procs):
    """add-inferior + run: a second process beside the first; each runs to its own end."""
    forker = inferior("forker")
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + BASIC, "file " + BASIC, "break compute", "run",
        "add-inferior", "inferior 2", "set remote exec-file " + forker, "file " + forker,
        "break after_fork", "run", "info inferiors", "continue",
        "inferior 1", "delete 1", "continue", "monitor exit"], extended=True, timeout=90)
    out = r.out
    assert re.search(r"Breakpoint 1, compute \(x=0\)", out), r
    assert re.search(r"Thread 2\.1 \"forker\" hit Breakpoint 2, after_fork \(\)", out), r
    assert re.search(r"^  1 +process \d+ .*basic", out, re.M), r
    assert re.search(r"^\* 2 +process \d+ .*forker", out, re.M), r
    assert re.search(r"\[Inferior 2 \(process \d+\) exited normally\]", out), r
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 07\]", out), r
    assert srv.wait_exit(10) is not None


SIGINFO = inferior("siginfo")


def _pids(out):
    return [int(p) for p in re.findall(r"^\*? +\d+ +process (\d+) ", out, re.M)]


def test_run_with_run_packet_off_restarts_with_R(procs):
    """`set remote run-packet off` + an empty exec-file: GDB restarts with R and reads no
    reply; the last program is started again, under the same wrapper."""
    srv = procs.server(["--multi", "--wrapper", "env", "BS_WRAPPED=yes", "--", "{COMM}"])
    r = gdb_remote(srv, [
        # gdbserver counts the shell's exec to skip the wrapper (as ext-wrapper.exp runs it).
        "set startup-with-shell on",
        "set remote exec-file " + BASIC, "break main", "run", "info inferiors",
        "set remote run-packet off", "set remote exec-file", "run", "info inferiors",
        "print (char *) getenv(\"BS_WRAPPED\")", "delete", "continue", "monitor exit"],
        prog=BASIC, extended=True, timeout=90)
    out = r.out
    assert len(re.findall(r"Breakpoint 1, main \(\)", out)) == 2, r
    pids = _pids(out)
    assert len(pids) == 2 and pids[0] != pids[1], r
    assert re.search(r'\$1 = 0x[0-9a-f]+ "yes"', out), r
    assert "exited with code 07" in out, r
    assert "E01" not in out and "Could not read registers" not in out, r


def test_run_without_exec_file_reuses_the_last_program(procs):
    """vRun with an empty program name: the last program, with the new arguments."""
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + SIGINFO, "run io-ignored",
        "add-inferior", "inferior 2", "file " + SIGINFO, "run", "continue", "monitor exit"],
        prog=SIGINFO, extended=True, timeout=90)
    out = r.out
    assert re.search(r"\[Inferior 1 \(process \d+\) exited with code 03\]", out), r
    assert "Running the default executable on the remote target failed" not in out, r
    assert "Program received signal SIGSEGV" in out, r             # no argument this time
    assert re.search(r"\[Inferior 2 \(process \d+\) exited normally\]", out), r


def test_thread_of_another_inferior_is_alive(procs):
    """T (thread alive) finds a thread in any process, not only the selected one."""
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + BASIC, "break main", "run",
        "add-inferior", "inferior 2", "file " + BASIC, "run", "thread 1.1", "thread 2.1",
        "kill inferiors 1 2", "monitor exit"], prog=BASIC, extended=True, timeout=90)
    out = r.out
    assert "has terminated" not in out, r
    assert re.search(r"\[Switching to thread 1\.1 ", out), r
    assert re.search(r"\[Switching to thread 2\.1 ", out), r


def test_reconnect_after_following_a_fork_child(procs):
    """'?' answers with the last event of any process (here the followed child at its
    breakpoint), never with the parent's stale fork event."""
    forker = inferior("forker")
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + forker, "break main", "run work",
        "set detach-on-fork off", "set follow-fork child", "break in_child", "continue",
        "disconnect", "target extended-remote 127.0.0.1:%d" % srv.port,
        "info inferiors", "frame", "monitor exit"], prog=forker, extended=True, timeout=90)
    out = r.out
    assert "internal-error" not in out, r
    assert re.search(r"hit Breakpoint 2(\.\d+)?, in_child \(\)", out), r
    after = out.split("Ending remote debugging")[-1] if "Ending remote debugging" in out else out
    assert len(_pids(after)) == 2, r
    assert re.search(r"#0 +in_child \(\)", after), r


def test_info_os(procs):
    """qXfer:osdata: `info os` lists the types; `info os processes` shows the inferior."""
    srv = procs.server(["--multi", "{COMM}"])
    r = gdb_remote(srv, [
        "set remote exec-file " + SIGINFO, "break main", "run io-ignored", "info inferiors",
        "info os", "info os processes", "info os threads", "kill", "monitor exit"],
        prog=SIGINFO, extended=True, timeout=90)
    out = r.out
    pid = _pids(out)[0]
    assert re.search(r"^processes +Listing of all processes", out, re.M), r
    assert re.search(r"^sockets +Listing of all internet-domain sockets", out, re.M), r
    assert re.search(r"^pid +user +command +cores", out, re.M), r
    assert re.search(r"^%d +\S+ +%s io-ignored " % (pid, re.escape(SIGINFO)), out, re.M), r
    assert re.search(r"^pid +command +tid +core", out, re.M), r
    assert re.search(r"^%d +siginfo +%d +\d+" % (pid, pid), out, re.M), r
